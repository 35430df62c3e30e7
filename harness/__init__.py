"""kchaos harness: the CLI, run orchestration, campaigns, certification; it may import every layer."""
