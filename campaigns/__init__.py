"""The shipped campaign files (``kchaos.campaigns`` package data, read with importlib.resources)."""
