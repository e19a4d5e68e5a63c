"""A bundle set: the bundles of several hardware files for one profile and one distribution, in
one directory that bakes into one image, the member chosen on the node at its first boot.

The set is itself a bundle that install.sh installs (the fixed install.sh and install-lib.sh, an
install.list, a manifest.json): its overlay is every member's install part under SET_ROOT
(install.sh, install-lib.sh, install.list, manifest.json and rootfs/ of each), the selector
script and its unit; nothing of it is machine-specific. Each member's whole bundle is also kept
at members/<name>/ for review (`gen diff`, `gen verify`). Files of identical bytes and mode are
stored once, as hard links of one another (``link_duplicates``), and the manifest says so in its
sizes: what the set lists and what it stores.
"""

from __future__ import annotations

import hashlib
import json
import os
import re
from collections.abc import Mapping, Sequence
from pathlib import Path

from generator import TOOL, __version__
from generator.bundle.set_common import CommonFile, common_part
from generator.errors import InputError, Problem
from generator.foreign import read_beneath
from generator.model import layout
from generator.model.setting import Plan
from generator.paths import templates_dir

RenderedFiles = dict[str, tuple[bytes, int]]  # as generator.render.outputs: path -> (content, mode)

SET_FORMAT = f"{TOOL}-set/1"
SET_ROOT = f"/usr/lib/{TOOL}/set"  # where the image keeps the members' install parts
SET_RECORD = f"/var/lib/{TOOL}/set/installed-files"  # the set's own install record
SELECT_SCRIPT = f"{layout.LIBEXEC}/select"
SELECT_UNIT = f"{TOOL}-select.service"
SELECTED = f"/run/{TOOL}/selected"  # the member this node chose, written by the selector
SELECTED_KEPT = f"/var/lib/{TOOL}/set/selected"
MEMBERS_DIR = "members"
# The members' files installed into the image: what their install.sh reads, nothing for review.
INSTALL_PART = ("install.sh", "install-lib.sh", "install.list", layout.MANIFEST)
# A member's name is a directory, a preflight log tag and an NFD label value.
MEMBER_NAME = re.compile(r"[A-Za-z0-9][A-Za-z0-9_.-]{0,62}")
MAX_MEMBERS = 8  # the set's install record holds every member's files: 1024 lines at most
# Units a member configures and restarts only when they run: the selector runs before them so that
# they start once, configured (its install.sh's try-restart of a unit not yet started does nothing).
SELECT_BEFORE = (
    "containerd.service docker.service kubelet.service nvidia-persistenced.service "
    "nvidia-fabricmanager.service"
)


def member_names(plans: list[Plan], source: str) -> list[str]:
    """Each member's name (its hardware's), checked: a name of the safe alphabet, no two alike,
    two to MAX_MEMBERS of them."""
    names = [plan.hardware_name for plan in plans]
    if not 2 <= len(names) <= MAX_MEMBERS:
        raise InputError(
            Problem(source, "--hw", f"{len(names)} hardware files; a set has 2 to {MAX_MEMBERS}")
        )
    for name in names:
        if not MEMBER_NAME.fullmatch(name):
            raise InputError(Problem(source, "--hw", f"{name!r} cannot name a member"))
        if names.count(name) > 1:
            raise InputError(Problem(source, "--hw", f"{name!r} is given twice"))
    return names


def claims_of(files: RenderedFiles) -> str:
    """A member's claims as the preflight judges them: its data file's claim lines."""
    content, _ = files.get(layout.in_overlay(layout.PREFLIGHT_DATA), (b"", 0))
    lines = content.decode("utf-8").splitlines()
    return "\n".join(sorted(line for line in lines if line.startswith("claim\t")))


def judged_claims(files: RenderedFiles) -> frozenset[tuple[str, str]]:
    """What the preflight judges of a member: each claim's name and value (the settings made
    from it, its last field, change no node's verdict)."""
    claims = (line.split("\t") for line in claims_of(files).splitlines())
    return frozenset((fields[1], fields[2]) for fields in claims if len(fields) > 2)


def check_distinguishable(members: dict[str, RenderedFiles], source: str) -> None:
    """Every member can be chosen: two members with the same claims match the same nodes, and a
    member whose claims are all among another's matches every node of the other's shape too
    (the preflight judges each claim alone), so that shape matches two and is never chosen."""
    judged = {name: judged_claims(files) for name, files in members.items()}
    for name, claims in judged.items():
        for other, others in judged.items():
            if other == name or not claims <= others:
                continue
            if claims == others:
                why = f"members {min(name, other)!r} and {max(name, other)!r} make the same "
                why += "claims: no node can tell them apart"
            else:
                why = f"every node that matches member {other!r} matches {name!r} too (its "
                why += f"claims are among {other!r}'s): no node can choose {other!r}"
            raise InputError(Problem(source, "--hw", why))


def select_unit() -> bytes:
    return f"""# Written by {TOOL} set: chooses this node's member of the bundle set and applies it.
# The member's own units (GPU, IRQ, preflight) exist once it is applied, and start then: this
# unit is not ordered before them (their start would wait for it). The member's install.sh runs
# with --no-block: the starts it asks for are queued, never waited for (the GPU unit starts after
# nvidia-persistenced, which starts after this unit). It runs at every boot; after the first it
# only publishes the kept choice ({SELECTED_KEPT}) and judges its kernel arguments.
[Unit]
Description={TOOL}: choose and apply this node's member of the bundle set
After=systemd-udev-trigger.service systemd-udev-settle.service network.target
Before={SELECT_BEFORE}
ConditionPathExists={SET_ROOT}/set.conf

[Service]
Type=oneshot
RemainAfterExit=yes
ExecStart=/bin/sh {SELECT_SCRIPT} {SET_ROOT}
TimeoutStartSec=900
SyslogIdentifier={TOOL}-select

[Install]
WantedBy=multi-user.target
""".encode()


def set_conf(names: list[str], reboot: bool) -> bytes:
    lines = [f"# Written by {TOOL} set: the members, and whether a reboot for kernel arguments"]
    lines.append(f"tool\t{TOOL}")
    lines += [f"member\t{name}" for name in names]
    lines.append(f"kernel-args-reboot\t{'allow' if reboot else 'forbid'}")
    return ("\n".join(lines) + "\n").encode()


def set_install_list(
    label: str, profile: str, overlay: dict[str, int], common: Sequence[CommonFile] = ()
) -> bytes:
    """The set's install.list: its members' install parts, the selector and its unit, and the
    common part (``gen set --common``), each common file with a comment saying why."""
    lines = [
        f"# Written by {TOOL} set: the set's common part; the selector applies a member at boot",
        f"tool\t{TOOL}",
        f"bundle\t{label}\t{profile}",
        f"record\t{SET_RECORD}",
    ]
    why = {entry.path: entry for entry in common}
    for path, mode in sorted(overlay.items()):
        if path in why:
            lines.append(
                f"# common: {why[path].member_path} is the same in every member "
                f"({why[path].kind}: {why[path].why})"
            )
        lines.append(f"file\t{mode:04o}\t{path}")
    lines.append(f"service\tenable\t{SELECT_UNIT}")
    if any(entry.kind == "sysctl" for entry in common):
        lines.append("step\tsysctl")  # a live install of the set applies it; an image boots it
    return ("\n".join(lines) + "\n").encode()


def review_name(plan: Plan, os_given: bool) -> str:
    """A member's whole bundle's directory under members/: the name `gen matrix` gives the same
    combination (<hardware>-<profile>[-<distro>]), so `gen matrix --check SET/members` with the
    set's --hw, --profile and --os is the fleet gate of its members."""
    suffix = f"-{plan.distro}" if os_given and plan.distro else ""
    return f"{plan.hardware_name}-{plan.profile_name}{suffix}"


def set_files(
    members: dict[str, RenderedFiles],
    plans: list[Plan],
    reboot: bool,
    os_given: bool = False,
    with_common: bool = False,
) -> tuple[RenderedFiles, dict[str, object]]:
    """Every file of the set (less its manifest), and the manifest's data. ``with_common``: the
    files every member carries the same go into the image too (generator/bundle/set_common)."""
    files: RenderedFiles = {}
    overlay: dict[str, int] = {}
    reviews = {name: review_name(plan, os_given) for name, plan in zip(members, plans, strict=True)}
    for name, member in members.items():
        for path, (content, mode) in member.items():
            files[f"{MEMBERS_DIR}/{reviews[name]}/{path}"] = (content, mode)
            if path in INSTALL_PART or path.startswith("rootfs/"):
                target = f"{SET_ROOT}/{MEMBERS_DIR}/{name}/{path}"
                files[f"rootfs{target}"] = (content, mode)
                overlay[target] = mode
    script = (templates_dir() / "set" / "select").read_bytes()
    own = {
        f"{SET_ROOT}/set.conf": (set_conf(list(members), reboot), 0o644),
        SELECT_SCRIPT: (script, 0o755),
        f"/etc/systemd/system/{SELECT_UNIT}": (select_unit(), 0o644),
    }
    for target, (content, mode) in own.items():
        files[f"rootfs{target}"] = (content, mode)
        overlay[target] = mode
    first = next(iter(members.values()))
    for fixed in ("install.sh", "install-lib.sh"):
        files[fixed] = first[fixed]
    label = "set-" + "+".join(members)
    common = common_part(members, label) if with_common else []
    for entry in common:
        files[f"rootfs{entry.path}"] = (entry.content, entry.mode)
        overlay[entry.path] = entry.mode
    listed = set_install_list(label, plans[0].profile_name, overlay, common)
    files["install.list"] = (listed, 0o644)
    data = set_manifest_data(members, plans, files, reboot, reviews)
    return files, data | {"common": [entry.as_json() for entry in common]}


def digest(content: bytes) -> str:
    return hashlib.sha256(content).hexdigest()


def set_manifest_data(
    members: dict[str, RenderedFiles],
    plans: list[Plan],
    files: RenderedFiles,
    reboot: bool,
    reviews: dict[str, str],
) -> dict[str, object]:
    stored = {(digest(content), mode): len(content) for content, mode in files.values()}
    return {
        "format": SET_FORMAT,
        "tool": {"name": TOOL, "version": __version__},
        "profile": plans[0].profile_name,
        "kernel_args_reboot": "allow" if reboot else "forbid",
        "members": [
            {
                "name": name,
                "bundle": f"{MEMBERS_DIR}/{reviews[name]}",
                "hardware": plan.hardware_name,
                "inputs": {role: {"sha256": value} for role, value in sorted(plan.inputs.items())},
                "claims_sha256": digest(claims_of(member).encode()),
                "files": [
                    {"path": path, "sha256": digest(content), "size": len(content)}
                    for path, (content, _) in sorted(member.items())
                ],
            }
            for (name, member), plan in zip(members.items(), plans, strict=True)
        ],
        "sizes": {
            "files": len(files),
            "listed_bytes": sum(len(content) for content, _ in files.values()),
            "stored_files": len(stored),
            "stored_bytes": sum(stored.values()),
        },
    }


def render_set_manifest(data: dict[str, object], files: RenderedFiles) -> bytes:
    """The set's manifest: its data and every file as a bundle's manifest lists it (install.sh
    finds install-lib.sh's digest there)."""
    entries = [
        {"mode": f"{mode:04o}", "path": path, "sha256": digest(content)}
        for path, (content, mode) in sorted(files.items())
    ]
    return (json.dumps(data | {"files": entries}, indent=2, sort_keys=True) + "\n").encode()


def link_duplicates(root: Path, files: Mapping[str, tuple[bytes, int]]) -> int:
    """Store files of identical bytes and mode once: each later one replaced (renamed over) by a
    hard link of the first. Every rename is atomic and the bytes the same, so the set is whole at
    every moment. Returns how many were linked."""
    first: dict[tuple[str, int], Path] = {}
    linked = 0
    for path, (content, mode) in sorted(files.items()):
        key = (digest(content), mode)
        target = root / path
        if key not in first:
            first[key] = target
            continue
        temporary = target.with_name(f".{target.name}.{TOOL}-link")
        os.link(first[key], temporary)
        os.replace(temporary, target)
        linked += 1
    return linked


def set_manifest(directory: Path) -> dict[str, object] | None:
    """A bundle set's manifest in ``directory`` (read as data, never through a link), or None."""
    manifest = directory / layout.MANIFEST
    try:
        if manifest.is_symlink() or not manifest.is_file() or manifest.stat().st_size > 1 << 24:
            return None
        data = json.loads(manifest.read_bytes())
    except (OSError, ValueError, RecursionError):
        return None
    return data if isinstance(data, dict) and data.get("format") == SET_FORMAT else None


def is_set(directory: Path) -> bool:
    return set_manifest(directory) is not None


def set_members(set_dir: Path) -> dict[str, Path]:
    """Each member's name and its whole bundle's directory, as the set's manifest lists them
    (a name of the safe alphabet, a directory right under members/), each checked to be that
    member's image copy (check_pairing)."""
    members: dict[str, Path] = {}
    manifest = set_manifest(set_dir) or {}
    listed = manifest.get("members")
    for entry in listed if isinstance(listed, list) else []:
        name = entry.get("name") if isinstance(entry, dict) else None
        bundle = entry.get("bundle") if isinstance(entry, dict) else None
        if not isinstance(name, str) or not MEMBER_NAME.fullmatch(name):
            continue
        if isinstance(bundle, str) and re.fullmatch(rf"{MEMBERS_DIR}/[A-Za-z0-9][\w.-]*", bundle):
            check_pairing(set_dir, manifest, name, bundle)
            members[name] = set_dir / bundle
    return members


def check_pairing(set_dir: Path, manifest: dict[str, object], name: str, bundle: str) -> None:
    """The review copy ``bundle`` the manifest names for member ``name`` is the image copy the
    selector installs for that name, file by file, by the set manifest's own digests (what
    check_set_intact holds the files to): a manifest naming another member's review copy made
    `gen diff` and `gen verify` show and judge what that member's nodes never get."""
    entries = manifest.get("files")
    digests = {
        str(entry.get("path")): entry.get("sha256")
        for entry in (entries if isinstance(entries, list) else [])
        if isinstance(entry, dict)
    }
    image = f"rootfs{SET_ROOT}/{MEMBERS_DIR}/{name}/"
    copies = [path for path in digests if path.startswith(image)]
    if copies and all(
        digests.get(f"{bundle}/{path[len(image) :]}") == digests[path] for path in copies
    ):
        return
    why = f"is not the image copy of member {name} ({image}), which the set installs"
    raise InputError(Problem(f"{set_dir}/{bundle}", "", why))


# collect.conf: one line per checked value; a member's is a few hundred lines
MAX_COLLECT_DATA = 4 * 1024 * 1024


def member_label(member: Path) -> str | None:
    """The label a member's collector prints as its snapshot's ``meta bundle`` record: the
    ``bundle`` line of its collect.conf (read beneath the member, bounded)."""
    try:
        data = read_beneath(member, f"rootfs{layout.COLLECT_DATA}", MAX_COLLECT_DATA)
    except InputError:
        return None
    for line in data.decode("utf-8", errors="replace").splitlines():
        if line.startswith("bundle\t"):
            return line.split("\t", 1)[1]
    return None


def member_of_snapshot(set_dir: Path, label: str | None, snapshot: Path) -> Path:
    """The member whose collector took ``snapshot``: each member's collect.conf names its own
    bundle, which the collector prints as ``meta bundle``; the snapshot of a node that applied a
    member therefore says which member it judges."""
    for member in set_members(set_dir).values():
        if label is not None and member.is_dir() and member_label(member) == label:
            return member
    said = f"names the bundle {label!r}" if label else "names no bundle (no meta bundle record)"
    raise InputError(
        Problem(str(snapshot), "meta bundle", f"{said}, which is no member of the set {set_dir}")
    )


def chosen_member(set_dir: Path, root: Path | None) -> Path:
    """The member bundle of ``set_dir`` that the node (``root``, or this machine) chose: the
    selector's /run record, else the kept one under /var. gen verify judges that member."""
    base = root if root is not None else Path("/")
    for record in (SELECTED, SELECTED_KEPT):
        path = base / record.lstrip("/")
        try:  # beneath the root: a link at any part of the path is refused, never followed
            raw = read_beneath(base, record.lstrip("/"), 256)
        except InputError as error:
            if error.problems[0].message == "no such file":
                continue
            raise
        name = raw.decode("utf-8", errors="replace").strip()
        member = set_members(set_dir).get(name)
        if member is not None and member.is_dir() and not member.is_symlink():
            return member
        raise InputError(Problem(str(path), "", f"names no member of the set {set_dir}"))
    raise InputError(
        Problem(
            str(set_dir),
            "",
            f"is a bundle set and {base} chose no member of it "
            f"(no {SELECTED} or {SELECTED_KEPT}): goldtune-select has not run or failed",
        )
    )
