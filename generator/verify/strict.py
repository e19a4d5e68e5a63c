"""`gen verify --strict`: what the bundle says must be there, and is not, fails.

Without ``--strict`` an absent unit or driver is "not applicable": ``gen verify`` judges whether
the bundle took effect, and a build host or a VM has no GPU to tell a GPU image by. An
acceptance gate asks the other question, whether this image or node is one the plan is for, and
the bundle answers it with two contracts:

- install.list's ``require`` lines (``require unit X``, ``require command Y``): what the target
  must already carry for the plan to take effect. install.sh ``--strict`` refuses an image
  without them at build time (templates/scripts/install.sh, ``missing_needs``); this checks the
  same lines against the image (``--root``) or the node (live, ``--snapshot``).
- plan.json's ``nvidia_gpus``, the hardware file's NVIDIA GPUs: on a node the driver must be
  loaded (nvidia-smi answers) and list every one; in an image the driver's kernel module must be
  installed. A GPU count is not a fact of an image, so ``--root`` does not count GPUs.

Each requirement not met is one ``StrictFailure`` with one line. Other checks (the preflight's
hardware checks) compose by adding their own failures to the same list: ``run_verify`` prints
each line and fails (exit 1) when the list is not empty.
"""

from __future__ import annotations

import os
from dataclasses import dataclass
from pathlib import Path

from generator.bundle.read import Bundle
from generator.errors import InputError, Problem
from generator.foreign import read_beneath
from generator.model.layout import INSTALL_LIST
from generator.model.probes import Section
from generator.model.vendors import NVIDIA
from generator.verify.imagefs import Image
from generator.verify.snapshot import Snapshot, Why, is_absent, why_not
from generator.verify.units import unit_exists

INSTALL_LIST_LIMIT = 4 << 20  # bytes; install.list is tens of kB
# install.sh's command_in_image: the bin directories a required command is looked up in
BIN_DIRS = ("/usr/local/sbin", "/usr/local/bin", "/usr/sbin", "/usr/bin", "/sbin", "/bin")
TUNED_UNIT = "tuned.service"
# The NVIDIA driver's kernel module: loaded, nvidia-smi answers (NVIDIA.smi_tool).
DRIVER_MODULE = "nvidia"
AMD_DRIVER_MODULE = "amdgpu"
# os.driver models whose driver is not in the image: the Operator's driver container brings it
# (NVIDIA: its driver root /run/nvidia/driver; AMD: KMM loads amdgpu), so none is demanded there
OPERATOR_DRIVERS = {"nvidia": "nvidia-gpu-operator", "amdgpu": "amd-gpu-operator"}


@dataclass(frozen=True)
class StrictFailure:
    """One requirement the target does not meet: what, what was found, and who requires it."""

    what: str  # "unit nvidia-fabricmanager.service", "command nvidia-smi", "driver", "gpus"
    found: str  # "not installed", "nvidia-smi lists 6 of 8"
    why: str  # the contract's reason: the rule and its reason, or the hardware file

    def line(self) -> str:
        return f"strict: {self.what}: {self.found} (required by {self.why})"

    def as_json(self) -> dict[str, str]:
        return {"what": self.what, "found": self.found, "why": self.why}


@dataclass(frozen=True)
class Requirement:
    what: str  # unit | command
    name: str
    why: str  # the comment line above it in install.list: "<rule id>: <reason>"

    @property
    def label(self) -> str:
        return f"{self.what} {self.name}"


def bundle_requirements(bundle: Bundle) -> list[Requirement]:
    """install.list's ``require`` lines, each with the reason written above it."""
    path = bundle.root / INSTALL_LIST
    if not os.path.lexists(path):
        raise InputError(
            Problem(str(path), "", "no install.list: --strict reads the bundle's require lines")
        )
    text = read_beneath(bundle.root, INSTALL_LIST, INSTALL_LIST_LIMIT).decode("utf-8", "replace")
    found: list[Requirement] = []
    why = ""
    for number, line in enumerate(text.splitlines(), start=1):
        if line.startswith("#"):
            why = line[1:].strip()
            continue
        fields = line.split("\t")
        if fields[0] != "require":
            continue
        if len(fields) != 3 or fields[1] not in ("unit", "command") or not fields[2]:
            raise InputError(
                Problem(
                    str(path),
                    f"line {number}",
                    "a require line is require<TAB>unit|command<TAB>NAME",
                )
            )
        found.append(Requirement(fields[1], fields[2], why or "install.list"))
    return found


def hardware_why(bundle: Bundle, vendor: str = "NVIDIA") -> str:
    count = bundle.plan.amd_gpus if vendor == "AMD" else bundle.plan.nvidia_gpus
    return f"the hardware file {bundle.plan.hardware_name}: {count} {vendor} GPU" + (
        "" if count == 1 else "s"
    )


# --- a node: its snapshot (live: the collector's output here) -------------------------------


def snapshot_unit(snapshot: Snapshot, unit: str) -> str | None:
    """Why the snapshot shows ``unit`` is not there, or None when it is there. A unit the plan
    enables or disables has a ``unit-enabled`` record, one it configures a ``runtime-unit``
    record; tuned.service is told by tuned-adm (the collector's ``tuned`` records)."""
    if unit == TUNED_UNIT and snapshot.has(Section.TUNED):
        absent = snapshot.absent(Section.TUNED, "active")
        return "not installed (no tuned-adm)" if absent else None
    enabled = snapshot.value(Section.UNIT_ENABLED, unit)
    load = snapshot.value(Section.RUNTIME_UNIT, f"{unit}:LoadState")
    active = snapshot.value(Section.RUNTIME_UNIT, f"{unit}:ActiveState")
    if is_absent(enabled) or load == "not-found":
        return "not installed"
    if "masked" in (enabled, load):
        return "masked"
    if Why.UNAVAILABLE in (why_not(enabled), why_not(active)):
        return "not shown: systemd is not the service manager here"
    if enabled is None and load is None:
        return "not shown: the snapshot has no record of it"
    return None


def gpu_tool(snapshot: Snapshot) -> str | None:
    return snapshot.value(Section.GPU, "tool")


def snapshot_command(snapshot: Snapshot, command: str, here: Image | None) -> str | None:
    """Why ``command`` is not there, or None. nvidia-smi is in the snapshot (``gpu tool``);
    another command is looked up in this machine's bin directories when verifying live."""
    if command == NVIDIA.smi_tool and gpu_tool(snapshot) is not None:
        return "not installed" if snapshot.absent(Section.GPU, "tool") else None
    if here is not None:
        return image_command(here, command)
    return "not shown: a snapshot does not record it (verify live or --root)"


def driver_and_gpus(snapshot: Snapshot, bundle: Bundle) -> list[StrictFailure]:
    """On a node: the driver answers (nvidia-smi lists GPUs) and lists every planned GPU."""
    expected = bundle.plan.nvidia_gpus
    if not expected:
        return []
    why = hardware_why(bundle)
    on_pci = snapshot.value(Section.GPU_PCI, "count") or "?"
    bus = f"{on_pci} NVIDIA GPU{'' if on_pci == '1' else 's'} on the PCI bus"
    failures = []
    if on_pci.isdigit() and int(on_pci) < expected:
        failures.append(StrictFailure("gpus", f"{bus}, {expected} expected", why))
    tool = gpu_tool(snapshot)
    if tool is None:
        return [
            *failures,
            StrictFailure("driver", "not shown: the snapshot has no gpu records", why),
        ]
    if tool != "ok":
        reason = why_not(tool) or tool
        state = "nvidia-smi is absent or lists no GPU" if reason == Why.ABSENT else reason
        if reason == Why.ABSENT and bundle.plan.driver == "nvidia-gpu-operator":
            state = "the GPU Operator's driver root /run/nvidia/driver has no nvidia-smi yet"
        return [
            *failures,
            StrictFailure("driver", f"not loaded or not answering: {state}; {bus}", why),
        ]
    listed = sum(1 for key, _ in snapshot.section(Section.GPU) if key != "tool")
    if listed < expected:
        failures.append(StrictFailure("gpus", f"nvidia-smi lists {listed} of {expected}", why))
    return failures


def snapshot_failures(
    bundle: Bundle, snapshot: Snapshot, here: Image | None = None
) -> list[StrictFailure]:
    """Every strict failure of a node; ``here``: this machine's root, when verifying live."""
    failures = []
    for need in bundle_requirements(bundle):
        if need.what == "unit":
            lacking = snapshot_unit(snapshot, need.name)
        else:
            lacking = snapshot_command(snapshot, need.name, here)
        if lacking is not None:
            failures.append(StrictFailure(need.label, lacking, need.why))
    return failures + driver_and_gpus(snapshot, bundle)


# --- an image (--root) -------------------------------------------------------------------------


def image_command(image: Image, command: str) -> str | None:
    """install.sh's command_in_image: a link in a bin directory counts, and is not followed."""
    for directory in BIN_DIRS:
        host = image.resolve(directory)
        if host is None:
            continue
        candidate = host / command
        if candidate.is_symlink() or (candidate.is_file() and os.access(candidate, os.X_OK)):
            return None
    return "not installed (in none of " + ", ".join(BIN_DIRS) + ")"


def image_driver(image: Image, bundle: Bundle) -> list[StrictFailure]:
    """An image for NVIDIA (AMD) GPUs carries the driver's kernel module for a kernel it has,
    unless the plan's os.driver says the GPU Operator delivers it."""
    wanted = [
        (module, vendor)
        for module, vendor, count in (
            (DRIVER_MODULE, "NVIDIA", bundle.plan.nvidia_gpus),
            (AMD_DRIVER_MODULE, "AMD", bundle.plan.amd_gpus),
        )
        if count and bundle.plan.driver != OPERATOR_DRIVERS[module]
    ]
    if not wanted:
        return []
    # imported here: the image's readers (YAML, TOML) are not needed to judge a snapshot
    from generator.verify.image import image_modules

    kernels = image_modules(image)
    failures = []
    for module, vendor in wanted:
        if kernels is None:
            found = "no /lib/modules in the image"
        elif any(module in names for names in kernels.values()):
            continue
        else:
            found = f"no {module} module for kernel " + ", ".join(sorted(kernels) or ["(none)"])
        why = f"{hardware_why(bundle, vendor)}, os.driver {bundle.plan.driver}"
        failures.append(StrictFailure("driver", found, why))
    return failures


def root_failures(bundle: Bundle, root: Path) -> list[StrictFailure]:
    image = Image(root)
    failures = []
    for need in bundle_requirements(bundle):
        if need.what == "unit":
            lacking = None if unit_exists(image, need.name) else "not installed"
        else:
            lacking = image_command(image, need.name)
        if lacking is not None:
            failures.append(StrictFailure(need.label, lacking, need.why))
    return failures + image_driver(image, bundle)
