import sys

from kchaos.cli.main import main

if __name__ == "__main__":  # importing the package's modules (the wheel check does) must not run the CLI
    sys.exit(main())
