"""kchaos harness: the CLI, run orchestration, shared errors and paths."""
