import sys

from kchaos.cli.main import main

sys.exit(main())
