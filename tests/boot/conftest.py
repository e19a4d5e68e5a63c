"""test_boot.py's module fixtures (the out directory, the bundle, its collector, verify of a
snapshot), for test_packer.py too: each module gets its own instances."""

from test_boot import bundle, collector, out_dir, verify_snapshot

__all__ = ["bundle", "collector", "out_dir", "verify_snapshot"]
