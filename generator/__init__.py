"""goldtune: GPU-server hardware + workload profile -> reviewed bundle of boot-time OS tuning."""

__version__ = "0.1.0"
TOOL = "goldtune"
