"""Generator-independent checks of rendered bundles with the real consumer tools (see tools.py)."""
