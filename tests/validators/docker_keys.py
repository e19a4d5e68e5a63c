"""The documented daemon.json keys of dockerd on Linux, with their JSON types.

Source: the Docker Engine reference, "dockerd" → "Daemon configuration file" → "On Linux" (the
full example configuration, docs.docker.com/reference/cli/dockerd/#daemon-configuration-file).
It stands in for `dockerd --validate --config-file`, which Docker 23.0 added and Debian 12's
docker.io (20.10.24) lacks. dockerd refuses to start on an unknown key ("the following
directives don't match any configuration option") and on a value of the wrong type.
"""

from __future__ import annotations

import re
from typing import Any

STRING, BOOL, INT, LIST, OBJECT = "string", "bool", "int", "list", "object"
KEYS: dict[str, str] = {
    "authorization-plugins": LIST,
    "bip": STRING,
    "bridge": STRING,
    "builder": OBJECT,
    "cgroup-parent": STRING,
    "containerd": STRING,
    "containerd-namespace": STRING,
    "containerd-plugins-namespace": STRING,
    "data-root": STRING,
    "debug": BOOL,
    "default-address-pools": LIST,
    "default-cgroupns-mode": STRING,
    "default-gateway": STRING,
    "default-gateway-v6": STRING,
    "default-network-opts": OBJECT,
    "default-runtime": STRING,
    "default-shm-size": STRING,
    "default-ulimits": OBJECT,
    "dns": LIST,
    "dns-opts": LIST,
    "dns-search": LIST,
    "exec-opts": LIST,
    "exec-root": STRING,
    "experimental": BOOL,
    "features": OBJECT,
    "fixed-cidr": STRING,
    "fixed-cidr-v6": STRING,
    "group": STRING,
    "host-gateway-ip": STRING,
    "hosts": LIST,
    "proxies": OBJECT,
    "icc": BOOL,
    "init": BOOL,
    "init-path": STRING,
    "insecure-registries": LIST,
    "ip": STRING,
    "ip-forward": BOOL,
    "ip-masq": BOOL,
    "iptables": BOOL,
    "ip6tables": BOOL,
    "ipv6": BOOL,
    "labels": LIST,
    "live-restore": BOOL,
    "log-driver": STRING,
    "log-format": STRING,
    "log-level": STRING,
    "log-opts": OBJECT,
    "max-concurrent-downloads": INT,
    "max-concurrent-uploads": INT,
    "max-download-attempts": INT,
    "mtu": INT,
    "no-new-privileges": BOOL,
    "node-generic-resources": LIST,
    "pidfile": STRING,
    "raw-logs": BOOL,
    "registry-mirrors": LIST,
    "runtimes": OBJECT,
    "seccomp-profile": STRING,
    "selinux-enabled": BOOL,
    "shutdown-timeout": INT,
    "storage-driver": STRING,
    "storage-opts": LIST,
    "swarm-default-advertise-addr": STRING,
    "tls": BOOL,
    "tlscacert": STRING,
    "tlscert": STRING,
    "tlskey": STRING,
    "tlsverify": BOOL,
    "userland-proxy": BOOL,
    "userland-proxy-path": STRING,
    "userns-remap": STRING,
}
# The nested objects goldtune writes: a runtime (path, runtimeArgs) and a ulimit (Name/Hard/Soft).
RUNTIME_KEYS = {"path": STRING, "runtimeArgs": LIST, "runtimeType": STRING, "options": OBJECT}
ULIMIT_KEYS = {"Name": STRING, "Hard": INT, "Soft": INT}
ULIMIT_NAMES = {
    "core",
    "cpu",
    "data",
    "fsize",
    "locks",
    "memlock",
    "msgqueue",
    "nice",
    "nofile",
    "nproc",
    "rss",
    "rtprio",
    "rttime",
    "sigpending",
    "stack",
}
# a size as go-units' RAMInBytes reads it (64M, 8G, 1.5GiB)
SIZE = re.compile(r"[0-9]+(?:\.[0-9]+)?\s*(?:[kmgtpe]i?b?|b)?", re.IGNORECASE)


def is_type(value: Any, wanted: str) -> bool:
    return {
        STRING: isinstance(value, str),
        BOOL: isinstance(value, bool),
        INT: isinstance(value, int) and not isinstance(value, bool),
        LIST: isinstance(value, list),
        OBJECT: isinstance(value, dict),
    }[wanted]


def check_object(where: str, value: Any, keys: dict[str, str]) -> list[str]:
    if not isinstance(value, dict):
        return [f"{where}: not an object"]
    return [
        f"{where}.{key}: " + ("unknown key" if key not in keys else f"not a {keys[key]}")
        for key, item in value.items()
        if key not in keys or not is_type(item, keys[key])
    ]


def check_daemon_json(document: Any) -> list[str]:
    if not isinstance(document, dict):
        return ["daemon.json must be a JSON object"]
    problems = []
    for key, value in document.items():
        if key not in KEYS:
            problems.append(f"{key}: not a documented daemon.json key (dockerd refuses to start)")
        elif not is_type(value, KEYS[key]):
            problems.append(f"{key}: {value!r} is not a {KEYS[key]}")
        elif key == "default-shm-size" and not SIZE.fullmatch(value):
            problems.append(f"default-shm-size: {value!r} is not a size (64M, 8G)")
        elif key == "runtimes":
            for name, runtime in value.items():
                problems += check_object(f"runtimes.{name}", runtime, RUNTIME_KEYS)
        elif key == "default-ulimits":
            for name, ulimit in value.items():
                problems += check_object(f"default-ulimits.{name}", ulimit, ULIMIT_KEYS)
                named = ulimit.get("Name", name) if isinstance(ulimit, dict) else name
                if name not in ULIMIT_NAMES or named != name:
                    problems.append(f"default-ulimits.{name}: not a ulimit name matching its Name")
    runtime = document.get("default-runtime")
    if runtime is not None and runtime not in ("runc", *document.get("runtimes", {})):
        problems.append(f"default-runtime: {runtime!r} is neither runc nor in runtimes")
    return problems
