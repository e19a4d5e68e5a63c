"""Packaged unit files the bundle writes drop-ins for, as the distributions ship them.

Each text is quoted from its source, so a test judges the bundle's drop-in against the unit it
really extends (systemd-analyze verify, systemctl --root, gen verify --root).
"""

from __future__ import annotations

PERSISTENCED = "nvidia-persistenced.service"

# Ubuntu's nvidia-compute-utils-<branch>(-server): static (no [Install]) and started with
# --no-persistence-mode; canonical/nvidia-graphics-drivers debian/nvidia-persistenced.service
# (745a97b6), the ExecStart hardware_db/distros/ubuntu-24.04.yaml records for 580-server.
UBUNTU_PERSISTENCED = """\
[Unit]
Description=NVIDIA Persistence Daemon
Wants=syslog.target

[Service]
Type=forking
ExecStart=/usr/bin/nvidia-persistenced --user nvidia-persistenced --no-persistence-mode --verbose
ExecStopPost=/bin/rm -rf /var/run/nvidia-persistenced
"""

# NVIDIA's RHEL package: NVIDIA/yum-packaging-nvidia-persistenced nvidia-persistenced.service
# (fe5d7c8): root, persistence mode by default, enabled through [Install].
RHEL_PERSISTENCED = """\
[Unit]
Description=NVIDIA Persistence Daemon
After=syslog.target

[Service]
Type=forking
PIDFile=/var/run/nvidia-persistenced/nvidia-persistenced.pid
Restart=always
ExecStart=/usr/bin/nvidia-persistenced --verbose
ExecStopPost=/bin/rm -rf /var/run/nvidia-persistenced/*
TimeoutSec=300

[Install]
WantedBy=multi-user.target
"""
