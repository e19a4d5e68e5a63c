"""One check per consumer of a rendered bundle, each running the tool that really reads the file.

Every ``check_*`` takes a bundle directory (rootfs/, install.sh, cloud-init/user-data,
kernel-cmdline, ...) and returns a list of problems, one line each, naming the file; an empty
list means the consumer accepts every file of its kind, and a kind absent from the bundle passes.
A missing tool raises ``MissingTool``. Nothing here imports goldtune: the checks know only the
bundle layout, so they judge the renderer from outside.

``VALIDATORS`` lists the checks with the files each one claims; ``unclaimed_files`` names the
rendered files that no check reads, so a new kind of file cannot ship unchecked.

Traps honoured (../shared/research/validators-and-boot.md): systemd-analyze verify fails on
warnings only with --recursive-errors=no; modprobe, systemd --test and pam_limits report on
stderr/syslog with exit 0; `udevadm test` writes to devices, so only `udevadm verify` is used;
anything that executes or applies rendered content runs as nobody without capabilities (run.py).
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

from .checks_data import DATA_PATTERNS, check_data_files
from .checks_runtime import (
    CONTAINERD_PATTERNS,
    DOCKER_PATTERNS,
    KUBELET_PATTERNS,
    NCCL_PATTERNS,
    NFD_PATTERNS,
    check_containerd,
    check_docker,
    check_kubelet,
    check_nccl,
    check_nfd,
)
from .checks_system import (
    LIMITS_PATTERNS,
    MODPROBE_PATTERNS,
    MODULES_LOAD_PATTERNS,
    SYSCTL_PATTERNS,
    SYSTEM_CONF_PATTERNS,
    TMPFILES_PATTERNS,
    UDEV_PATTERNS,
    UNIT_PATTERNS,
    check_limits,
    check_modprobe,
    check_modules_load,
    check_sysctl,
    check_system_conf,
    check_tmpfiles,
    check_udev,
    check_units,
)
from .checks_userland import (
    GRUB_PATTERNS,
    JSON_PATTERNS,
    TUNED_PATTERNS,
    check_cloud_init,
    check_cloud_init_many,
    check_grub,
    check_json,
    check_scripts,
    check_scripts_many,
    check_tuned,
    check_tuned_many,
    script_files,
)
from .layout import (
    INSTALL_SH,
    USER_DATA,
    USER_DATA_GZ,
    USER_DATA_MIME,
    USER_DATA_MIME_GZ,
    files,
    relative,
)
from .run import MissingTool

__all__ = [
    "VALIDATORS",
    "MissingTool",
    "Validator",
    "check_cloud_init",
    "check_cloud_init_many",
    "check_containerd",
    "check_data_files",
    "check_docker",
    "check_grub",
    "check_json",
    "check_kubelet",
    "check_limits",
    "check_modprobe",
    "check_modules_load",
    "check_nccl",
    "check_nfd",
    "check_scripts",
    "check_scripts_many",
    "check_sysctl",
    "check_system_conf",
    "check_tmpfiles",
    "check_tuned",
    "check_tuned_many",
    "check_udev",
    "check_units",
    "unclaimed_files",
]

METADATA = ("EXPLAIN.md",)  # read by people, not by a tool


@dataclass(frozen=True)
class Validator:
    name: str
    consumer: str  # the real tool (or code) that judges the files
    patterns: tuple[str, ...]  # bundle-relative globs of the files it checks
    check: Callable[[Path], list[str]]
    check_many: Callable[[list[Path]], dict[Path, list[str]]] | None = None  # one tool run for many
    slow: bool = False  # > 0.1 s per bundle: the property tests run it on fewer examples

    def run_many(self, bundles: list[Path]) -> dict[Path, list[str]]:
        if self.check_many is not None:
            return self.check_many(bundles)
        return {bundle: self.check(bundle) for bundle in bundles}


VALIDATORS: tuple[Validator, ...] = (
    Validator("units", "systemd-analyze verify --root", UNIT_PATTERNS, check_units),
    Validator(
        "system-conf",
        "systemd --test --user, systemd-analyze cat-config",
        SYSTEM_CONF_PATTERNS,
        check_system_conf,
    ),
    Validator("tmpfiles", "systemd-tmpfiles --create --root", TMPFILES_PATTERNS, check_tmpfiles),
    Validator("modprobe", "modprobe -C DIR --showconfig", MODPROBE_PATTERNS, check_modprobe),
    Validator(
        "modules-load",
        "module-name syntax + modprobe --showconfig",
        MODULES_LOAD_PATTERNS,
        check_modules_load,
    ),
    Validator(
        "sysctl", "reference-kernel key lists + systemd-sysctl", SYSCTL_PATTERNS, check_sysctl
    ),
    Validator("limits", "pam_limits' parser (limits.py)", LIMITS_PATTERNS, check_limits),
    Validator("udev", "udevadm verify (udev 254)", UDEV_PATTERNS, check_udev),
    Validator(
        "cloud-init",
        "cloud-init's schema, write_files and shellify code",
        (USER_DATA, USER_DATA_GZ, USER_DATA_MIME, USER_DATA_MIME_GZ),
        check_cloud_init,
        check_cloud_init_many,
        slow=True,
    ),
    Validator("scripts", "shellcheck", (INSTALL_SH,), check_scripts, check_scripts_many, slow=True),
    Validator(
        "tuned", "tuned's profile loader", TUNED_PATTERNS, check_tuned, check_tuned_many, slow=True
    ),
    Validator(
        "grub", "sh -n, shellcheck -s sh, sourcing as grub-mkconfig", GRUB_PATTERNS, check_grub
    ),
    Validator("json", "json.loads", JSON_PATTERNS, check_json),
    Validator(
        "data",
        "the fixed script that reads each data file (--check)",
        DATA_PATTERNS,
        check_data_files,
    ),
    Validator(
        "containerd", "containerd config dump (imports)", CONTAINERD_PATTERNS, check_containerd
    ),
    Validator(
        "docker",
        "documented daemon.json keys and types (docker_keys.py)",
        DOCKER_PATTERNS,
        check_docker,
    ),
    Validator(
        "kubelet",
        "KubeletConfiguration v1beta1 field table (kubelet_fields.py)",
        KUBELET_PATTERNS,
        check_kubelet,
    ),
    Validator(
        "nccl", "NCCL's and RCCL's setEnvFile reading (nccl_conf.py)", NCCL_PATTERNS, check_nccl
    ),
    Validator(
        "nfd",
        "NFD's local source parseFeatureFile and label rules (nfd_features.py)",
        NFD_PATTERNS,
        check_nfd,
    ),
)


def claimed(bundle: Path) -> set[Path]:
    paths = {path for validator in VALIDATORS for path in files(bundle, *validator.patterns)}
    return paths | set(script_files(bundle))


def unclaimed_files(bundle: Path) -> list[str]:
    """Rendered files that no validator checks (EXPLAIN.md is for people)."""
    checked = claimed(bundle)
    return [
        relative(bundle, path)
        for path in files(bundle, "**/*")
        if path not in checked and relative(bundle, path) not in METADATA
    ]


def run_all(bundle: Path, include_slow: bool = True) -> dict[str, list[str]]:
    """Every validator's problems by name (for property tests and quick manual runs)."""
    return {v.name: v.check(bundle) for v in VALIDATORS if include_slow or not v.slow}
