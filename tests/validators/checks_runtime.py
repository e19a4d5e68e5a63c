"""Checks of the container runtime and kubelet files (issue 14): containerd's own parser, the
documented daemon.json keys, and the published KubeletConfiguration field table.

The unit drop-ins (containerd.service.d/, docker.service.d/) are claimed by the units check of
checks_system.py: `systemd-analyze verify` judges them against the unit they extend.
"""

from __future__ import annotations

import json
import re
import tomllib
from pathlib import Path
from typing import Any

import yaml

from . import docker_keys, kubelet_fields, nccl_conf, nfd_features
from .layout import ROOTFS, files, output_problems, relative
from .run import copy_readable, find_containerd2, find_tool, run, scratch, unprivileged

CONTAINERD_PATTERNS = (f"{ROOTFS}/etc/containerd/conf.d/*.toml",)
DOCKER_PATTERNS = (f"{ROOTFS}/etc/docker/daemon.json",)
# kubeadm's kubelet.conf.d, and the --config-dir a node agent passes (EKS's nodeadm:
# generator/model/layout.py KUBELET_AGENT_DIRS), where an AL2023 bundle's drop-in goes
KUBELET_PATTERNS = (
    f"{ROOTFS}/etc/kubernetes/kubelet.conf.d/*.conf",
    f"{ROOTFS}/etc/kubernetes/kubelet/config.json.d/*.conf",
)
# RCCL reads /etc/rccl.conf with NCCL's older setEnvFile (ROCm/rccl src/misc/param.cc): a '#'
# line is not skipped there, which nccl_conf.problems_of already flags
NCCL_PATTERNS = (f"{ROOTFS}/etc/nccl.conf", f"{ROOTFS}/etc/rccl.conf")
NFD_PATTERNS = (f"{ROOTFS}/etc/kubernetes/node-feature-discovery/features.d/*",)
TOML_SEGMENT = re.compile(r'"[^"]*"|[^.]+')


# --- containerd ----------------------------------------------------------------------------------

KeyPath = tuple[str, ...]


def leaves(table: dict[str, Any], prefix: KeyPath = ()) -> list[tuple[KeyPath, Any]]:
    """Every (key path, value) of a TOML document that is not itself a table."""
    found: list[tuple[KeyPath, Any]] = []
    for key, value in table.items():
        if isinstance(value, dict):
            found += leaves(value, (*prefix, key))
        else:
            found.append(((*prefix, key), value))
    return found


def lookup(document: dict[str, Any], path: KeyPath) -> Any:
    node: Any = document
    for key in path:
        node = node.get(key) if isinstance(node, dict) else None
    return node


# The CRI runtime options' table in version 2 (1.x; 2.x migrates it) and version 3 (2.x): the
# keys under it are the same (containerd plugins/cri/runtime/plugin.go migrateConfig).
CRI_RUNTIME_V2 = ("plugins", "io.containerd.grpc.v1.cri", "containerd")
CRI_RUNTIME_V3 = ("plugins", "io.containerd.cri.v1.runtime", "containerd")


def in_dump(path: KeyPath, dump_version: object) -> KeyPath:
    """A key path of the drop-in where a dump of ``dump_version`` has it: containerd 2 dumps
    version 3, the CRI runtime table migrated out of io.containerd.grpc.v1.cri."""
    size = len(CRI_RUNTIME_V2)
    if dump_version == 3 and path[:size] == CRI_RUNTIME_V2:
        return CRI_RUNTIME_V3 + path[size:]
    return path


def readers(version: object) -> list[tuple[str, str]]:
    """(name, binary) of each containerd that reads a drop-in of ``version``: a version 2 file
    both the system's 1.6 and containerd 2 (which migrates it); a version 3 file containerd 2
    only (1.6 ignores its plugin ids, 1.7 refuses it: install.sh writes it as version 2 under a
    version 2 config.toml, which tests/test_wiring.py runs with both)."""
    found = [("containerd 2", find_containerd2())]
    return found if version == 3 else [("the system's containerd", find_tool("containerd")), *found]


def dump_problems(containerd: tuple[str, str], main: Path, dropin: Path, label: str) -> list[str]:
    """`containerd --config MAIN config dump` as nobody; every key of the drop-in must be in the
    merged dump with its value."""
    name, binary = containerd
    result = run(unprivileged([binary, "--config", str(main), "config", "dump"]))
    if result.returncode != 0:
        failed = output_problems(result, f"containerd config dump ({name})")
        return [problem.replace(str(dropin), label) for problem in failed]
    merged = tomllib.loads(result.stdout)
    problems = []
    for path, value in leaves(tomllib.loads(dropin.read_text())):
        if path == ("version",):
            continue
        actual = lookup(merged, in_dump(path, merged.get("version")))
        if actual != value:
            problems.append(
                f"{label}: containerd did not take {'.'.join(path)} = {value!r} "
                f"(the merged config of {name} has {actual!r})"
            )
    return problems


def check_containerd(bundle: Path) -> list[str]:
    """`containerd --config MAIN config dump`, MAIN importing the drop-in as a real config.toml
    does (`imports = [...]`) in the drop-in's own version: containerd's own TOML loader and
    plugin decoders, with each containerd that reads that version (``readers``). A bad file fails
    it (exit 1); then every key of the drop-in must be in the merged dump with its value (the
    NVIDIA runtime the CRI default, its options), so a key containerd does not know (decoded
    into nothing, or a table of the other version's plugin ids) is found too."""
    dropins = files(bundle, *CONTAINERD_PATTERNS)
    if not dropins:
        return []
    problems: list[str] = []
    with scratch("containerd") as tmp:
        for dropin in dropins:
            label = relative(bundle, dropin)
            copy = copy_readable(dropin, tmp / dropin.name)
            try:
                version = tomllib.loads(dropin.read_text()).get("version", 2)
            except tomllib.TOMLDecodeError:
                version = 2  # containerd's own parser says what is wrong
            main = tmp / f"main-{dropin.stem}.toml"
            main.write_text(f'version = {version}\nimports = ["{copy}"]\n')
            main.chmod(0o644)
            for containerd in readers(version):
                problems += dump_problems(containerd, main, copy, label)
    return problems


# --- docker --------------------------------------------------------------------------------------


def check_docker(bundle: Path) -> list[str]:
    """JSON, then every key against the documented daemon.json keys and their types
    (docker_keys.py). Not `dockerd --validate`: Debian 12's docker.io is 20.10, and --validate
    came with Docker 23.0."""
    problems: list[str] = []
    for path in files(bundle, *DOCKER_PATTERNS):
        label = relative(bundle, path)
        try:
            document = json.loads(path.read_text())
        except ValueError as error:
            problems.append(f"{label}: not JSON: {error}")
            continue
        problems += [f"{label}: {problem}" for problem in docker_keys.check_daemon_json(document)]
    return problems


# --- kubelet -------------------------------------------------------------------------------------

TYPE_CHECKS = {
    "string": lambda v: isinstance(v, str),
    "bool": lambda v: isinstance(v, bool),
    "int": lambda v: isinstance(v, int) and not isinstance(v, bool),
    "float": lambda v: isinstance(v, (int, float)) and not isinstance(v, bool),
    "duration": lambda v: isinstance(v, str) and DURATION.fullmatch(v),
    "string-map": lambda v: isinstance(v, dict) and all(isinstance(x, str) for x in v.values()),
    "bool-map": lambda v: isinstance(v, dict) and all(isinstance(x, bool) for x in v.values()),
    "string-list": lambda v: isinstance(v, list) and all(isinstance(x, str) for x in v),
    "object": lambda v: isinstance(v, (dict, list)),
    "memory-reservations": lambda v: (
        isinstance(v, list)
        and all(
            isinstance(x, dict)
            and set(x) == {"numaNode", "limits"}
            and isinstance(x["numaNode"], int)
            and isinstance(x["limits"], dict)
            for x in v
        )
    ),
}
DURATION = re.compile(r"(?:[0-9.]+(?:ns|us|ms|s|m|h))+|0")
QUANTITY = re.compile(r"[0-9]+(?:\.[0-9]+)?(?:[KMGTPE]i|[kMGTPE]|m)?|[0-9]+(?:\.[0-9]+)?%")


def check_kubelet_document(data: Any) -> list[str]:
    """One drop-in against the published KubeletConfiguration v1beta1 fields and types."""
    if not isinstance(data, dict):
        return ["not a YAML mapping"]
    problems = []
    api, kind = kubelet_fields.API_VERSION, kubelet_fields.KIND
    if data.get("apiVersion") != api or data.get("kind") != kind:
        problems.append(f"a drop-in needs apiVersion: {api} and kind: {kind}")
    for field, value in data.items():
        if field in ("apiVersion", "kind"):
            continue
        wanted = kubelet_fields.FIELDS.get(field)
        if wanted is None:
            problems.append(f"unknown field {field!r} (strict decoding rejects it)")
        elif not TYPE_CHECKS[wanted](value):
            problems.append(f"{field}: {value!r} is not a {wanted}")
        elif field in kubelet_fields.ENUMS and value not in kubelet_fields.ENUMS[field]:
            words = sorted(kubelet_fields.ENUMS[field])
            problems.append(f"{field}: {value!r} is not one of {words}")
        elif field in ("kubeReserved", "systemReserved", "evictionHard", "evictionSoft"):
            problems += [
                f"{field}.{key}: {amount!r} is not a quantity"
                for key, amount in value.items()
                if not QUANTITY.fullmatch(amount)
            ]
    return problems


def check_kubelet(bundle: Path) -> list[str]:
    """YAML (PyYAML's safe loader, a YAML 1.1 superset of what sigs.k8s.io/yaml reads), then
    the field table of kubelet_fields.py: unknown fields, types, the policies' closed words and
    resource quantities. Not covered: kubelet's cross-field validation at start-up (reservedMemory
    must add up to the reservations: tests/rules/test_kubernetes.py checks the rules for it)."""
    problems: list[str] = []
    for path in files(bundle, *KUBELET_PATTERNS):
        label = relative(bundle, path)
        try:
            data = yaml.safe_load(path.read_text())
        except yaml.YAMLError as error:
            problems.append(f"{label}: not YAML: {' '.join(str(error).split())}")
            continue
        problems += [f"{label}: {problem}" for problem in check_kubelet_document(data)]
    return problems


# --- nccl ----------------------------------------------------------------------------------------


def check_nccl(bundle: Path) -> list[str]:
    """Each nccl.conf (and RCCL's rccl.conf) as NCCL's setEnvFile reads it (nccl_conf.py)."""
    problems: list[str] = []
    for path in files(bundle, *NCCL_PATTERNS):
        label = relative(bundle, path)
        problems += [f"{label}: {problem}" for problem in nccl_conf.problems_of(path.read_text())]
    return problems


def check_nfd(bundle: Path) -> list[str]:
    """Each features.d file as NFD's local source reads it and its label rules (nfd_features.py)."""
    problems: list[str] = []
    for path in files(bundle, *NFD_PATTERNS):
        label = relative(bundle, path)
        problems += [
            f"{label}: {problem}" for problem in nfd_features.problems_of(path.read_bytes())
        ]
    return problems
