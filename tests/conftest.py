import os
import tempfile


# Tests never touch the user's own clusters: state goes to a temporary directory.
os.environ.setdefault("KCHAOS_STATE", tempfile.mkdtemp(prefix="kchaos-test-state-"))
