"""Facts of the Linux kernel itself that several steps share, each with its source."""

from __future__ import annotations

# fs.nr_open's default (include/linux/fs.h NR_OPEN, 1024*1024): a hard nofile limit above it makes
# logins and service starts fail, so the limit rules and the plan's checks both hold to it.
NR_OPEN_DEFAULT = 1048576
