"""The two delivery paths of one overlay: install.sh and cloud-init.

Both carry the same files and the same activation steps. install.sh is a fixed script; what it
installs and runs is its data file, ``install.list`` (``install_lines``): the overlay's files,
the tuned selection, the services, and the activation steps by name (``step sysctl``…), each of
which is one function of install.sh. cloud-init's ``runcmd`` runs the same steps at first boot,
as the fixed commands of ``STEP_COMMANDS``; the only words put into them are plan words of the
safe alphabet, quoted once. install.sh's own phases (tuned layered on the selection found, boot
arguments added and removed per mechanism, with their records) run at first boot as install.sh's
own functions (firstboot.py, ``first_boot_text``), not as a second copy. install.list also
says what the target must already carry (``require`` lines, ``image_requirements``): an image
build with ``install.sh --strict`` fails naming each one it lacks.
"""

from __future__ import annotations

import base64
import functools
import gzip
import hashlib
import re
import struct
import zlib
from collections.abc import Callable, Mapping
from typing import Any, NamedTuple, Protocol

import yaml

from generator import TOOL
from generator.errors import GenerationError, InputError, Problem
from generator.model import layout
from generator.model.kinds import KINDS, Kind, KindSpec
from generator.model.layout import target_of
from generator.model.setting import Plan, Setting, is_driver_module
from generator.model.shellform import without_comment_lines
from generator.model.vendors import NVIDIA
from generator.render.datafile import DataLine, fixed_line, setting_line
from generator.render.firstboot import FirstBootScript, first_boot_parts, first_boot_words
from generator.render.formats import kernel_arg_text, sh_quote


class OverlayFile(NamedTuple):
    """A file of the root-filesystem overlay, as install.sh and cloud-init place it."""

    bundle_path: str  # rootfs/etc/sysctl.d/90-goldtune.conf
    target: str  # /etc/sysctl.d/90-goldtune.conf
    mode: str  # 0644
    text: str


class Step(NamedTuple):
    """One activation step on a live system: its name in install.list and its word, if any."""

    name: str  # a step_<name> function of install.sh, a STEP_COMMANDS entry for cloud-init
    word: str = ""
    setting: Setting | None = None  # the service setting this step applies, for its reason

    @property
    def summary(self) -> str:
        return STEP_SUMMARIES.get(self.name, f"{self.name} {self.word}")

    @property
    def fields(self) -> tuple[str, ...]:
        """Its line of install.list."""
        return ("step", self.name, self.word) if self.word else ("step", self.name)

    @property
    def command(self) -> str:
        return STEP_COMMANDS[self.name].format(word=sh_quote(self.word), tool=TOOL)

    @property
    def guarded(self) -> str:
        """The command for cloud-init's runcmd: announced, and a failure reported, not fatal."""
        return guarded_command(self.name, self.word)


# A matrix's bundles run mostly the same steps: each command is made once.
@functools.lru_cache(maxsize=256)
def guarded_command(name: str, word: str) -> str:
    """Step(name, word).guarded: the summary and command of a step are its name's and word's."""
    step = Step(name, word)
    return (
        f"echo {sh_quote(f'{TOOL}: {step.summary}')}; {{ {step.command}; }} "
        f"|| echo {sh_quote(f'{TOOL}: {step.summary}: failed')}"
    )


# The same steps as install.sh's step_<name> functions (a test holds the two lists equal).
STEP_SUMMARIES = {
    "reload": "reload systemd units",
    "sysctl": "apply sysctl.d",
    "tmpfiles": "write sysfs values",
    "modules": "load modules",
    "udev": "apply I/O scheduler rules",
    "tuned": "switch tuned to the profile",
    "runtime": "apply the unit drop-ins, container runtime and kubelet files",
    "bootloader": "refresh the boot loader configuration",
}
# Steps install.sh runs as its own phases, live and offline, from the list's ``tuned`` and
# ``kernel-arg`` lines (layering tuned, adding and removing boot arguments per mechanism);
# cloud-init runs the same functions of install.sh at first boot (firstboot.py), not a command
# of STEP_COMMANDS.
INSTALL_SH_PHASES = ("tuned", "bootloader")
STEP_COMMANDS = {
    "reload": "systemctl daemon-reload",
    "sysctl": "sysctl --system >/dev/null",
    "tmpfiles": "systemd-tmpfiles --create {word}",
    "modules": "systemctl restart systemd-modules-load.service",
    "udev": "udevadm control --reload && udevadm trigger --action=change --subsystem-match=block",
    # {word}: the parts the plan configures (containerd,docker,kubelet,persistenced); see
    # runtime_parts
    "runtime": "parts={word}; "
    'case ",$parts," in *,containerd,*) systemctl try-restart containerd.service;; esac; '
    'case ",$parts," in *,persistenced,*) '
    "systemctl try-restart nvidia-persistenced.service;; esac; "
    'case ",$parts," in *,docker,*) '
    "echo '{tool}: restart docker.service when its containers may stop';; esac; "
    'case ",$parts," in *,kubelet,*) echo '
    "'{tool}: kubelet: drain the node, remove /var/lib/kubelet/cpu_manager_state and "
    "memory_manager_state, restart kubelet';; esac",
    # services: enable/disable skip a unit the machine lacks; mask needs no unit file
    "enable": "if systemctl cat {word} >/dev/null 2>&1; then systemctl enable --now {word}; "
    "else echo '{tool}:' {word} 'is not installed; skipped'; fi",
    "disable": "if systemctl cat {word} >/dev/null 2>&1; then systemctl disable --now {word}; "
    "else echo '{tool}:' {word} 'is not installed; skipped'; fi",
    "mask": "systemctl mask --now {word}",
}


def pending_command() -> str:
    """Write REBOOT_MARKER when /proc/cmdline lacks one of ``$kernel_args`` (the first-boot
    script's words; in a subshell: the ``set -f`` must not reach the lines after it)."""
    marker = layout.REBOOT_MARKER
    return (
        '( set -f; running=" $(cat /proc/cmdline) "; for arg in $kernel_args; do '
        'case $running in *" $arg "*) ;; *) '
        f"mkdir -p {sh_quote(marker.rsplit('/', 1)[0])} && : >{sh_quote(marker)};; esac; done )"
    )


def overlay_files(files: Mapping[str, tuple[bytes, int]]) -> list[OverlayFile]:
    return [
        OverlayFile(path, target, f"{mode:04o}", content.decode("utf-8"))
        for path, (content, mode) in sorted(files.items())
        if (target := target_of(path)) is not None
    ]


def install_steps(plan: Plan) -> list[Step]:
    """What a live system runs after the files are in place, in order (cloud-init's runcmd),
    before install.sh's own phases (first_boot_command)."""
    steps = [Step("reload"), *service_steps(plan), *activation_steps(plan)]
    return [step for step in steps if step.name not in INSTALL_SH_PHASES]


FIRST_BOOT_SUMMARY = "remove stale files, layer tuned, add and remove kernel arguments"


def first_boot_command() -> str:
    """runcmd's last line: the first-boot script (firstboot.py), announced, a failure reported."""
    return (
        f"echo {sh_quote(f'{TOOL}: {FIRST_BOOT_SUMMARY}')}; sh {layout.FIRST_BOOT_SCRIPT} "
        f"|| echo {sh_quote(f'{TOOL}: {FIRST_BOOT_SUMMARY}: failed')}"
    )


def first_boot_text(plan: Plan, install_sh: str, overlay: list[OverlayFile]) -> FirstBootScript:
    """The first-boot script of this plan, as its body and its main (first_boot_parts):
    install.sh's functions and the plan's words; the install record it keeps is install.sh's
    for this bundle (install.list's file lines, all of the overlay), so that either path removes
    what the other installed and this one lacks."""
    tuned = layout.tuned_profile(plan.profile_name) if plan.of_kind("tuned") else ""
    cmdline = kernel_cmdline(plan)
    words = first_boot_words(cmdline, tuned, [item.target for item in overlay])
    merged = [
        (item.mode, item.target)
        for item in overlay
        if item.target in layout.INSTALLED_AT_FIRST_BOOT
    ]
    return first_boot_parts(install_sh, words, pending_command() if cmdline else "", merged)


def service_steps(plan: Plan) -> list[Step]:
    """Mask and disable before enable: irqbalance must be gone before interrupts are pinned."""
    return [Step(s.value, s.key, s) for s in ordered_services(plan)]


def ordered_services(plan: Plan) -> list[Setting]:
    return sorted(plan.of_kind("service"), key=lambda s: s.value == "enable")


def kernel_cmdline(plan: Plan) -> str:
    return " ".join(kernel_arg_text(s) for s in plan.of_kind("kernel-arg"))


def runtime_parts(plan: Plan) -> str:
    """What the runtime step acts on: ``containerd`` is restarted only if running (its shims keep
    the containers alive); ``docker`` and ``kubelet`` are never restarted, the step says what to
    do: dockerd stops its containers unless live-restore is on, and kubelet refuses to start with
    a new CPU or memory manager policy while its old checkpoint files are there.
    ``persistenced`` (the daemon's drop-in) is restarted only if running: a daemon started with
    the packaged --no-persistence-mode keeps persistence off until it restarts."""
    units = {s.key.split(" ", 1)[0] for s in plan.of_kind("unit-dropin")}
    parts = []
    if layout.CONTAINERD_UNIT in units or plan.of_kind("containerd"):
        parts.append("containerd")
    if layout.DOCKER_UNIT in units or plan.of_kind("docker"):
        parts.append("docker")
    if plan.of_kind("kubelet"):
        parts.append("kubelet")
    if layout.PERSISTENCED_UNIT in units:
        parts.append("persistenced")
    return ",".join(parts)


# The word a live step acts on, for the steps that take one.
STEP_WORDS: dict[str, Callable[[Plan], str]] = {
    "tmpfiles": lambda plan: layout.TMPFILES_FILE,
    "runtime": runtime_parts,
}


def needs_step(spec: KindSpec, plan: Plan) -> bool:
    settings = plan.of_kind(spec.kind)
    if spec.kind == Kind.MODULE_LOAD:  # driver modules are loaded by the GPU unit, not modules-load
        return any(not is_driver_module(s.key) for s in settings)
    return bool(settings)


def activation_steps(plan: Plan) -> list[Step]:
    """Apply the non-service files on a live system, as the kinds table names the steps.

    Each step stands alone; they run in the order of STEP_SUMMARIES (the same as install.sh's).
    """
    names = {spec.live_step for spec in KINDS if spec.live_step and needs_step(spec, plan)}
    ordered = [name for name in STEP_SUMMARIES if name in names]
    return [
        Step(name, STEP_WORDS[name](plan)) if name in STEP_WORDS else Step(name) for name in ordered
    ]


def _label_word(text: str) -> str:
    return "".join(c if c.isascii() and (c.isalnum() or c in "_.-") else "_" for c in text) or "_"


# The units the runtime parts run as (runtime_parts): the plan's files for them take effect only
# in an image that has the runtime.
RUNTIME_PART_UNITS = {
    "containerd": layout.CONTAINERD_UNIT,
    "docker": layout.DOCKER_UNIT,
    "kubelet": layout.KUBELET_UNIT,
    "persistenced": layout.PERSISTENCED_UNIT,
}


# The settings that name the program a container runtime execs for a runtime: containerd's
# runtimes.<name>.options.BinaryName (the runc shim runs it) and daemon.json's
# runtimes.<name>.path. The program must be in the image, or every container of that runtime fails
# to start (issue 26: an absent default runtime fails every pod sandbox).
RUNTIME_PROGRAM_KEY = re.compile(r"(?:^|\.)runtimes\.[^.]+\.(?:options\.BinaryName|path)$")
# install.sh's is_command_name: a program name looked up in the target's bin directories
COMMAND_NAME = re.compile(r"[A-Za-z0-9_+-][A-Za-z0-9_.+-]*")


def runtime_programs(plan: Plan) -> list[DataLine]:
    """``require command <name>`` for each runtime program the plan names (the last part of the
    path: install.sh looks the command up in the target's bin directories)."""
    lines = []
    for s in (*plan.of_kind("containerd"), *plan.of_kind("docker")):
        name = s.value.strip('"').rsplit("/", 1)[-1]
        if RUNTIME_PROGRAM_KEY.search(s.key) and COMMAND_NAME.fullmatch(name):
            why = (
                f"{s.rule}: {s.kind} {s.key} runs {s.value.strip(chr(34))}; without it every "
                "container of that runtime fails to start"
            )
            lines.append(fixed_line(why, ("require", "command", name)))
    return lines


def image_requirements(plan: Plan, overlay: list[OverlayFile]) -> list[DataLine]:
    """install.list's ``require`` lines: what the target must already carry for the plan to take
    effect. ``install.sh --strict`` fails naming each one it lacks, so an image pipeline that runs
    install.sh before the NVIDIA packages (fabric manager, persistenced, the driver's nvidia-smi)
    stops there instead of baking an image whose units were "not installed: enable skipped"."""
    own_units = {item.target.rsplit("/", 1)[-1] for item in overlay}
    lines = [
        setting_line(s, ("require", "unit", s.key))
        for s in ordered_services(plan)
        # an optional unit (Setting.optional: DCGM) is enabled where it is, required nowhere
        if s.value == "enable" and s.key not in own_units and not s.optional
    ]
    if plan.of_kind("gpu"):
        lines.append(
            fixed_line(
                f"gpu: {layout.GPU_UNIT} applies the GPU settings with the driver's nvidia-smi",
                ("require", "command", NVIDIA.smi_tool),
            )
        )
    if plan.of_kind("tuned"):
        lines.append(
            fixed_line(
                "tuned: the bundle's profile is loaded by tuned",
                ("require", "unit", "tuned.service"),
            )
        )
    lines += runtime_programs(plan)
    for part in filter(None, runtime_parts(plan).split(",")):
        lines.append(
            fixed_line(
                f"runtime: the plan configures {part}",
                ("require", "unit", RUNTIME_PART_UNITS[part]),
            )
        )
    unique: dict[tuple[str, ...], DataLine] = {}
    for line in lines:
        unique.setdefault(line.fields, line)
    return list(unique.values())


def install_lines(plan: Plan, overlay: list[OverlayFile]) -> list[DataLine]:
    """install.list: what install.sh installs, in order, then the services and live steps."""
    lines = [
        fixed_line("layout: the tool's name (messages, stale files)", ("tool", TOOL)),
        fixed_line(
            "layout: the bundle",
            ("bundle", _label_word(plan.hardware_name), _label_word(plan.profile_name)),
        ),
        fixed_line(
            "layout: the list of installed files in the target", ("record", layout.INSTALL_RECORD)
        ),
    ]
    lines += [
        fixed_line(f"overlay: {item.bundle_path}", ("file", item.mode, item.target))
        for item in overlay
    ]
    lines += [setting_line(s, ("service", s.value, s.key)) for s in ordered_services(plan)]
    lines += image_requirements(plan, overlay)
    lines += [
        fixed_line(f"live: {step.summary}", step.fields)
        for step in activation_steps(plan)
        if step.name not in INSTALL_SH_PHASES
    ]
    if plan.of_kind("tuned"):
        lines.append(
            fixed_line(
                "tuned: layer the profile on the selected one (live and offline)",
                ("tuned", layout.tuned_profile(plan.profile_name)),
            )
        )
    # Always the bundle's whole set: install.sh removes what an earlier bundle added and this
    # one lacks, by the mechanism the target boots with.
    lines += [
        setting_line(s, ("kernel-arg", kernel_arg_text(s))) for s in plan.of_kind("kernel-arg")
    ]
    return lines


def check_user_data(content: bytes, overlay: list[OverlayFile]) -> None:
    """The cloud-config must parse and carry every overlay file byte for byte."""
    text = content.decode("utf-8")
    if not text.startswith("#cloud-config\n"):
        raise GenerationError("cloud-init/user-data: must begin with #cloud-config")
    try:
        # the C-accelerated safe loader where PyYAML has it (the renderer reads its own output)
        loader = getattr(yaml, "CSafeLoader", yaml.SafeLoader)
        data = yaml.load(text, Loader=loader)  # noqa: S506 - a safe loader
    except yaml.YAMLError as error:
        raise GenerationError(f"cloud-init/user-data: not valid YAML: {error}") from error
    written = {entry["path"]: entry for entry in data.get("write_files", [])}
    for item in overlay:
        entry = written.get(item.target)
        if (
            entry is None
            or entry.get("content") != item.text
            or entry.get("permissions") != item.mode
        ):
            raise GenerationError(
                f"cloud-init/user-data: {item.target} does not round-trip through YAML"
            )


# --- cloud-init at cloud scale (issue 13) -------------------------------------------------------

# cloud-init merges each cloud-config part into what the earlier parts built with that part's
# own mergers (cloudinit/handlers/cloud_config.py, _merge_part); without one it uses
# "dict(replace)+list()+str()", under which a later part's write_files and runcmd replace the
# earlier ones. With these, a key both parts set keeps the earlier value (no_replace) and the
# lists of both are kept, this part's after the earlier ones (list(append), recurse_list); see
# cloud-init's "Merging user data sections" documentation (docs/rtd/reference/merging.rst).
MERGE_HOW = "list(append)+dict(no_replace,recurse_list)+str()"

MIME_BOUNDARY = f"=={TOOL}-user-data=="


def first_boot_files(overlay: list[OverlayFile]) -> list[OverlayFile]:
    """The overlay files the user-data writes: all but the verify-side collector and its data
    (layout.VERIFY_ONLY_TARGETS), which first-boot tuning never runs; each without its comment
    lines where layout.compact_in_user_data says so (EC2's 16 KB)."""
    return [
        staged_at_first_boot(
            item._replace(text=without_comment_lines(item.text))
            if layout.compact_in_user_data(item.target)
            else item
        )
        for item in overlay
        if item.target not in layout.VERIFY_ONLY_TARGETS
    ]


def staged_at_first_boot(item: OverlayFile) -> OverlayFile:
    """A file the first-boot script installs (layout.INSTALLED_AT_FIRST_BOOT: daemon.json, merged)
    is written where the script reads it, not at its target."""
    if item.target in layout.INSTALLED_AT_FIRST_BOOT:
        return item._replace(target=layout.first_boot_staged(item.target))
    return item


# --- the gzip forms: the user-data deflated once for both ---------------------------------------

# zlib's default level, and its smallest output (see compressed_forms).
FAST_LEVEL = 6
SMALLEST_LEVEL = 9


def gzip_header(level: int) -> bytes:
    """gzip's member header (RFC 1952, 2.3): deflate, no flags, mtime 0 (byte-identical run to
    run), XFL 2 at level 9 ("maximum compression") and 0 at the levels between, OS 3 (Unix): what
    gzip.compress(..., mtime=0) writes through zlib."""
    extra_flags = b"\x02" if level == SMALLEST_LEVEL else b"\x00"
    return b"\x1f\x8b\x08\x00\x00\x00\x00\x00" + extra_flags + b"\x03"


# How far back a deflate match reaches (RFC 1951, 2.2: distances up to 32768 bytes).
WINDOW = 32 * 1024
# The user-data's first bytes get a deflate block of their own, which the MIME form deflates
# again after its head: zlib puts a whole user-data in one block, one set of Huffman codes, and
# its first part (the small config files) is not like the rest (the scripts). Measured over the
# 267 bundles of every shipped system x profile, distro, and docker + Kubernetes variant: at
# 8-14 KiB both forms are 45-80 bytes smaller than one whole deflate; with the head alone in the
# MIME form's first block the plain form is 6-7 larger and the MIME form 56-74 (two of them then
# over EC2's 16 KB).
FIRST_BLOCK = 8 * 1024
# A final empty block (RFC 1951, 3.2.3 and 3.2.6: BFINAL 1, fixed codes, end-of-block 0000000).
FINAL_EMPTY_BLOCK = b"\x03\x00"


def compressed_forms(user_data: bytes, mime: bytes) -> tuple[bytes, bytes]:
    """gzip of the user-data and of its MIME form (mime_user_data), each one gzip member.

    cloud-init inflates gzip-compressed user-data before reading it ("Gzip compressed content",
    cloud-init's User-Data Formats documentation; ``util.decomp_gzip`` in user_data.py).

    The level: zlib's default (FAST_LEVEL), unless a form would then be larger than the smallest
    limit of a provider that takes the gzip forms (EC2's 16 KB, PROVIDER_LIMITS); then both are
    deflated again at SMALLEST_LEVEL. So a form fits every provider it would fit if it were
    always deflated at 9 (where the fast forms fit they are kept; where they do not, the level-9
    forms are written), and only bundles near that limit pay for the last bytes: on a shipped
    user-data (dgx-h100 inference, 58 KB) level 9 is 0.9 % smaller (117 bytes of 13.6 KB) and
    takes about three times the CPU. Of the 267 shipped system x profile x distro and docker
    bundles, the 8 docker + Kubernetes ones on 8-GPU systems get 9.
    """
    limit = gzip_forms_limit()
    forms = _compressed_forms(user_data, mime, FAST_LEVEL)
    if max(len(form) for form in forms) <= limit:
        return forms
    plain, mime_gz = _compressed_forms(user_data, mime, SMALLEST_LEVEL)
    # Spliced, a form can come out a few bytes larger than one whole deflate of its text (with
    # a large team part, up to 15 bytes in a review's 261 cases): over the limit, the smaller.
    return _smaller(plain, user_data, limit), _smaller(mime_gz, mime, limit)


def _smaller(form: bytes, text: bytes, limit: int) -> bytes:
    """``form``, or the whole level-9 deflate of ``text`` where that is smaller and ``form`` is
    over ``limit``."""
    if len(form) <= limit:
        return form
    whole = gzip.compress(text, compresslevel=SMALLEST_LEVEL, mtime=0)
    return whole if len(whole) < len(form) else form


def gzip_forms_limit() -> int:
    """The smallest user-data limit of a provider whose field takes the gzip forms (bytes)."""
    return min(limit.limit_bytes for limit in PROVIDER_LIMITS if limit.takes_bytes)


def _compressed_forms(user_data: bytes, mime: bytes, level: int) -> tuple[bytes, bytes]:
    """Both gzip forms at ``level``. A MIME form carrying the user-data verbatim (ASCII:
    `_mime_part`'s 7bit) reuses the user-data's deflate from its second block on, as pigz joins
    blocks compressed apart: the two forms cost one deflate of the user-data, not two. Any
    other MIME form (base64) is deflated whole."""
    first, rest = _deflated_user_data(user_data, level)
    plain = _gzip_member((first, rest, FINAL_EMPTY_BLOCK), user_data, level)
    at = mime.rfind(user_data)
    if at < 0:
        return plain, gzip.compress(mime, compresslevel=level, mtime=0)
    end = at + len(user_data)
    # what comes before the user-data (the MIME head, any team parts), then its first bytes
    head = mime[:at] + user_data[:FIRST_BLOCK]
    mime_first = _deflated(_deflater(level), head, zlib.Z_SYNC_FLUSH)
    # the closing boundary may match what the decoder's window holds: the bytes just before it
    window = mime[max(0, end - WINDOW) : end]
    tail = _deflated(_deflater(level, window), mime[end:], zlib.Z_FINISH)
    return plain, _gzip_member((mime_first, rest, tail), mime, level)


def _deflated_user_data(user_data: bytes, level: int) -> tuple[bytes, bytes]:
    """The user-data's raw deflate in two segments, each ending in a sync flush (the block ends,
    then an empty stored block: byte-aligned, not final; RFC 1951, 3.2.3-3.2.4): its first
    FIRST_BLOCK bytes, and the rest. The rest's matches reach no further back than the
    user-data's first byte, so it goes on any stream whose output so far ends with those first
    bytes: the plain form's, or the MIME form's (its head, then the same first bytes)."""
    deflater = _deflater(level)
    first = _deflated(deflater, user_data[:FIRST_BLOCK], zlib.Z_SYNC_FLUSH)
    return first, _deflated(deflater, user_data[FIRST_BLOCK:], zlib.Z_SYNC_FLUSH)


class Deflater(Protocol):
    """What ``zlib.compressobj`` returns, as far as the gzip forms use it."""

    def compress(self, data: bytes, /) -> bytes: ...

    def flush(self, mode: int = ..., /) -> bytes: ...


def _deflater(level: int, window: bytes = b"") -> Deflater:
    """Raw deflate (no zlib wrapper) at ``level``, zlib's default memory level as gzip.compress
    has it; ``window``: the output before this segment, which its matches may refer to."""
    if window:
        return zlib.compressobj(level, zlib.DEFLATED, -15, 8, zlib.Z_DEFAULT_STRATEGY, window)
    return zlib.compressobj(level, zlib.DEFLATED, -15)


def _deflated(deflater: Deflater, data: bytes, flush: int) -> bytes:
    return deflater.compress(data) + deflater.flush(flush)


def _gzip_member(segments: tuple[bytes, ...], content: bytes, level: int) -> bytes:
    """One gzip member of a deflate stream given in segments, the last one final: the header,
    the stream, then CRC-32 and ISIZE (the length modulo 2**32), little-endian (RFC 1952, 2.3.1)."""
    trailer = struct.pack("<II", zlib.crc32(content), len(content) & 0xFFFFFFFF)
    return gzip_header(level) + b"".join(segments) + trailer


class CloudInitOptions(NamedTuple):
    """What `gen` is asked for beyond the plan, for the cloud-init forms."""

    reboot: bool = False  # --cloud-init-reboot: power_state (power_state())
    parts: tuple[bytes, ...] = ()  # --cloud-init-part: other cloud-configs, checked (team_part())


# A part bigger than Azure's whole limit could only ever be delivered through GCP metadata.
TEAM_PART_LIMIT = 64 * 1024


def team_part(raw: bytes, source: str) -> bytes:
    """A team's own cloud-config for the MIME form, checked: UTF-8, ``#cloud-config`` first, a
    YAML mapping, no line that is our boundary. Problems name the file, never echo its text."""
    try:
        text = raw.decode("utf-8")
    except UnicodeDecodeError as error:
        raise InputError(Problem(source, "", f"not UTF-8 text (byte {error.start})")) from None
    if not text.startswith("#cloud-config\n"):
        raise InputError(
            Problem(source, "", "a cloud-config part begins with a #cloud-config line")
        )
    if any(line.startswith(f"--{MIME_BOUNDARY}") for line in text.splitlines()):
        raise InputError(Problem(source, "", "a line starts with the MIME form's boundary"))
    try:
        loaded = yaml.safe_load(text)
    except yaml.YAMLError as error:
        mark = getattr(error, "problem_mark", None)
        where = f"line {mark.line + 1}" if mark is not None else ""
        problem = getattr(error, "problem", None) or "not valid YAML"
        raise InputError(Problem(source, where, f"not valid YAML: {problem}")) from None
    if not isinstance(loaded, dict):
        raise InputError(Problem(source, "", "a cloud-config is a YAML mapping"))
    return raw


def _mime_part(content: bytes, filename: str) -> bytes:
    """One text/cloud-config part. ASCII is sent as it is (7bit), not base64 as `cloud-init
    devel make-mime` writes it: base64 hides the text's repetitions from gzip, and a composed
    delivery then no longer fits EC2 (tests/test_cloud_scale.py). Other bytes (a profile's
    reason) are base64: cloud-init 22.4 drops an 8bit utf-8 part (tried with its own handler)."""
    ascii_text = content.isascii()
    encoding = "7bit" if ascii_text else "base64"
    body = content if ascii_text else base64.encodebytes(content)
    head = [
        f"--{MIME_BOUNDARY}",
        'Content-Type: text/cloud-config; charset="utf-8"',
        "MIME-Version: 1.0",
        f"Content-Transfer-Encoding: {encoding}",
        f'Content-Disposition: attachment; filename="{filename}"',
        "",
        "",
    ]
    return "\n".join(head).encode("ascii") + body.rstrip(b"\n") + b"\n"


def mime_user_data(user_data: bytes, before: tuple[bytes, ...] = ()) -> bytes:
    """A MIME multi-part message: the ``before`` parts (a team's cloud-configs, in the order
    given), then the user-data as the last part. Last, with its ``merge_how``, it keeps the
    files and commands of every earlier part even when those carry no ``merge_how`` of their own
    (cloud-init merges a part with that part's mergers; see MERGE_HOW)."""
    head = f'Content-Type: multipart/mixed; boundary="{MIME_BOUNDARY}"\nMIME-Version: 1.0\n\n'
    parts = [_mime_part(part, f"part-{index}.cfg") for index, part in enumerate(before, 1)]
    parts.append(_mime_part(user_data, f"{TOOL}.cfg"))
    return head.encode("ascii") + b"".join(parts) + f"--{MIME_BOUNDARY}--\n".encode("ascii")


def power_state(plan: Plan, reboot: bool) -> dict[str, Any] | None:
    """cloud-init's power_state for ``gen --cloud-init-reboot``: reboot once the first boot's
    modules are done, only when the first-boot script reported (REBOOT_MARKER) that the running
    kernel lacks one of the plan's kernel arguments. cloud-init runs the condition after its own
    process exits and reboots only on exit 0 (cc_power_state_change.check_condition); the module
    runs once per instance. None when not asked for or the plan has no kernel argument."""
    if not reboot or not plan.of_kind("kernel-arg"):
        return None
    return {
        "mode": "reboot",
        "delay": "now",
        "message": f"{TOOL}: rebooting so that the kernel arguments take effect",
        "condition": ["test", "-e", layout.REBOOT_MARKER],
    }


class ProviderLimit(NamedTuple):
    provider: str
    limit_bytes: int  # of the user-data as given, before the API's own base64
    takes_bytes: bool  # the field carries any bytes (the gzip form), not only text
    source: str


PROVIDER_LIMITS = (
    ProviderLimit(
        "ec2",
        16 * 1024,
        True,
        "https://docs.aws.amazon.com/AWSEC2/latest/UserGuide/instancedata-add-user-data.html: "
        "'User data is limited to 16 KB, in raw form, before it is base64-encoded'",
    ),
    ProviderLimit(
        "azure",
        65535,
        True,
        "Azure Compute REST API, OSProfile.customData: 'a base-64 encoded string ... decoded "
        "to a binary array ... The maximum length of the binary array is 65535 bytes'",
    ),
    ProviderLimit(
        "gcp",
        256 * 1024,
        False,  # a metadata value is a string: the gzip form cannot be one
        "Compute Engine API, Metadata items[].value: 'free-form strings ... size must be less "
        "than or equal to 262144 bytes (256 KiB)' (the user-data key cloud-init's GCE source "
        "reads)",
    ),
)


def fits(limit: ProviderLimit, path: str, size: int) -> bool:
    return size <= limit.limit_bytes and (limit.takes_bytes or path not in layout.GZIP_FORMS)


def delivery_sizes(
    files: Mapping[str, tuple[bytes, int]], options: CloudInitOptions
) -> dict[str, Any]:
    """Each user-data form's size and, per provider, the forms that fit its limit; the digest of
    each --cloud-init-part in the MIME forms, and whether power_state was asked for."""
    forms = [path for path in layout.USER_DATA_FORMS if path in files]
    sizes = {path: len(files[path][0]) for path in forms}
    return {
        "parts": [hashlib.sha256(part).hexdigest() for part in options.parts],
        "reboot": options.reboot,
        "bytes": sizes,
        "fits": {
            limit.provider: [path for path in forms if fits(limit, path, sizes[path])]
            for limit in PROVIDER_LIMITS
        },
    }


def size_warnings(sizes: Mapping[str, Any]) -> list[str]:
    """A line per provider whose limit no form of the user-data fits."""
    smallest = min(sizes["bytes"].values(), default=0)
    limits = {limit.provider: limit for limit in PROVIDER_LIMITS}
    return [
        f"cloud-init user-data does not fit {provider}: the smallest form is {smallest} bytes, "
        f"the limit {limits[provider].limit_bytes} ({limits[provider].source}); deliver the "
        "bundle with install.sh in the image instead"
        for provider, fitting in sizes["fits"].items()
        if not fitting and provider in limits
    ]
