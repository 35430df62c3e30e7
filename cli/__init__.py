"""The ``kchaos`` command line: the one room that sees both the harness (runs, campaigns) and CI
(the nightly matrix). Everything else sits below it (tests/unit/test_layering.py)."""
