"""`gen detect`: describe a real machine (or a captured copy of its /proc and /sys)."""
