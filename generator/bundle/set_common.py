"""A bundle set's common part (``gen set --common``): the configuration every member carries the
same, installed into the image with the set itself, so in effect on every node whichever member
its selector chooses, or when it chooses none ("no match or more than one: nothing
machine-specific applied; a safe common subset may still apply if the set says so", issue 44).

Which files may be common, by the plan's setting kinds (generator/model/kinds.py). A file is a
candidate only when its consumer is the system itself, reading a plain value at boot or login,
with no device, driver, unit or script in it:

- ``sysctl`` (sysctl.d): kernel parameters systemd-sysctl writes at boot; a parameter names no
  device (the per-interface keys a rule writes name an interface, and then differ per member);
- ``limit`` (security/limits.d): pam_limits' session limits, read at each login;
- ``systemd-manager`` (system.conf.d): the Default* limits systemd applies to every service,
  read when systemd starts.

Never common, whatever their bytes: ``kernel-arg`` (a bootloader edit, taking effect at a reboot
the set may forbid, and the arguments a member needs for its own devices: IOMMU, nouveau);
``modprobe``/``module-load`` (a vendor's driver's options and modules: an image of another
machine type may lack the driver, and a module loaded at boot fails the boot's module loading);
``udev``, ``sysfs`` (tmpfiles), ``irq``, ``pcie-acs``, ``gpu`` (devices' rules, data and boot
units); ``tuned`` (a profile layered by a step, CPU and device tuning); ``service``,
``unit-dropin`` (units: started and ordered, not only read); ``containerd``, ``docker``,
``kubelet``, ``nccl``, ``rccl`` (runtime and fabric configuration made from the GPUs and NICs,
merged into the image's own files by install.sh); and the preflight's, collector's and scripts'
data (each member's own claims).

Same means the same bytes and mode in every member but for the first line, whose header names
the member's hardware (``# goldtune bundle for <hardware> / <profile>: ...``): the rules decided
every setting and its reason the same from each member's hardware. A reason that names a
hardware fact (the RAM a dirty-bytes bound is made from, a NIC's speed) differs between members
unless they share it, and then a node of another shape gets that value too: the image owner
opts in with ``--common``.

Where: beside the member's file, at ``89-<tool>-set`` in place of ``90-<tool>`` (sysctl.d,
limits.d and system.conf.d read files in the order of their names, the later winning: a chosen
member's own file, carrying the same values, comes after). So a member's install never meets the
common file (a same path would be the member's too: its install record would list it and its
``--uninstall`` remove it); the set's install record alone lists it, and the set's
``--uninstall`` takes it back.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import NamedTuple

from generator import TOOL
from generator.model import layout
from generator.model.kinds import KINDS, Kind
from generator.model.shellform import HEADER_LINE

RenderedFiles = dict[str, tuple[bytes, int]]  # as generator.render.outputs: path -> (content, mode)

# Each kind that may be common, and why, in the words the manifest and install.list give.
COMMON_KINDS: Mapping[str, str] = {
    Kind.SYSCTL: "kernel parameters systemd-sysctl writes at boot, naming no device",
    Kind.LIMIT: "session limits pam_limits reads at login",
    Kind.SYSTEMD_MANAGER: "service defaults systemd reads when it starts",
}
COMMON_DROP_IN = f"89-{TOOL}-set"


class CommonFile(NamedTuple):
    """One file of the common part: where the set installs it, the members' file it stands for,
    its kind and why that kind may be common, and its content and mode in the set."""

    path: str
    member_path: str
    kind: str
    why: str
    content: bytes
    mode: int

    def as_json(self) -> dict[str, str]:
        """As the set's manifest lists it."""
        return {
            "path": self.path,
            "member_path": self.member_path,
            "kind": self.kind,
            "why": self.why,
        }


def common_target(target: str) -> str:
    """Where the common copy of a member's file goes: its drop-in name one before the member's."""
    directory, _, name = target.rpartition("/")
    return f"{directory}/{name.replace(layout.DROP_IN, COMMON_DROP_IN, 1)}"


def set_header(content: bytes, label: str) -> bytes | None:
    """``content`` with its header's bundle name (the member's) replaced by the set's ``label``
    and a line saying what the common part is; None when its first line is no such header."""
    first, newline, rest = content.decode("utf-8", errors="replace").partition("\n")
    found = HEADER_LINE.fullmatch(first)
    _, of_profile, profile = found.group(1).rpartition(" / ") if found else ("", "", "")
    if found is None or not of_profile or not newline:
        return None
    header = f"# {TOOL} bundle for {label} / {profile}{first[len(found.group(1)) :]}"
    note = (
        "# The set's common part: this file is the same in every member, so the image build "
        "installs it and it is in effect on every node, whichever member is chosen, or none."
    )
    return f"{header}\n{note}\n{rest}".encode()


def common_part(members: Mapping[str, RenderedFiles], label: str) -> list[CommonFile]:
    """The files of the common kinds that every member carries the same (bytes and mode, the
    header aside), each with its common target, its content for the set and why it may be common.
    Sorted by target; empty when no such file is the same everywhere."""
    common: list[CommonFile] = []
    for spec in KINDS:
        if spec.kind not in COMMON_KINDS or "{" in spec.file:
            continue
        copies = [files.get(spec.file) for files in members.values()]
        if any(copy is None for copy in copies):
            continue
        forms = {(set_header(copy[0], label), copy[1]) for copy in copies if copy is not None}
        content, mode = next(iter(forms))
        target = layout.target_of(spec.file)
        if len(forms) != 1 or content is None or target is None:
            continue
        kind = str(spec.kind)
        common.append(
            CommonFile(common_target(target), target, kind, COMMON_KINDS[kind], content, mode)
        )
    return sorted(common)
