"""cloud-init's delivery: the user-data's first-boot script and commands, its check, and the MIME
form that composes it with a team's own parts (cloud-configs, shell scripts, nodeadm's NodeConfig).

The user-data writes the overlay's files (``first_boot_files``), install-lib.sh and the
first-boot script, which ``runcmd`` runs: install.sh's run on a live system (stale files and the
record, units and activation steps, tuned layered on the selection found, boot arguments added
and removed per mechanism) as calls of install.sh's own functions (firstboot.py,
``first_boot_text``), not as a second copy.
"""

# No `from __future__ import annotations`: a NamedTuple turns each string annotation into
# a compiled ForwardRef, ~0.15 ms a record at import (bench/bench.py's cold gen).
import base64
import re
from collections.abc import Sequence
from typing import Any, NamedTuple

import yaml

from generator import TOOL
from generator.errors import GenerationError, InputError, Problem
from generator.foreign import YAML_VALUE_ERRORS
from generator.model import layout
from generator.model.setting import Plan
from generator.model.shellform import user_data_form
from generator.render.firstboot import FirstBootScript, first_boot_parts, first_boot_words
from generator.render.formats import sh_quote
from generator.render.overlay import OverlayFile, install_steps, kernel_cmdline


def pending_command() -> str:
    """Write REBOOT_MARKER when /proc/cmdline lacks one of ``$kernel_args`` (the first-boot
    script's words; in a subshell: the ``set -f`` must not reach the lines after it)."""
    marker = layout.REBOOT_MARKER
    return (
        '( set -f; running=" $(cat /proc/cmdline) "; for arg in $kernel_args; do '
        'case $running in *" $arg "*) ;; *) '
        f"mkdir -p {sh_quote(marker.rsplit('/', 1)[0])} && : >{sh_quote(marker)};; esac; done )"
    )


FIRST_BOOT_SUMMARY = "apply the bundle as install.sh does on a live system"


def first_boot_command() -> str:
    """runcmd's last line: the first-boot script (firstboot.py), announced, a failure reported."""
    return (
        f"echo {sh_quote(f'{TOOL}: {FIRST_BOOT_SUMMARY}')}; sh {layout.FIRST_BOOT_SCRIPT} "
        f"|| echo {sh_quote(f'{TOOL}: {FIRST_BOOT_SUMMARY}: failed')}"
    )


def first_boot_text(plan: Plan, install_lib: str, overlay: list[OverlayFile]) -> FirstBootScript:
    """The first-boot script of this plan and the library it sources (first_boot_parts):
    install-lib.sh's functions called with the plan's words; the install record it keeps is
    install.sh's for this bundle (install.list's file lines, all of the overlay), so that either
    path removes what the other installed and this one lacks. Not the preflight unit's enable:
    the user-data does not carry the unit (layout.IMAGE_ONLY_TARGETS)."""
    tuned = layout.tuned_profile(plan.profile_name) if plan.of_kind("tuned") else ""
    cmdline = kernel_cmdline(plan)
    words = first_boot_words(cmdline, tuned, [item.target for item in overlay])
    merged = [
        (item.mode, item.target) for item in overlay if layout.installed_at_first_boot(item.target)
    ]
    dropin = next((item.target for item in overlay if item.target == layout.CONTAINERD_DROPIN), "")
    steps = [
        step
        for step in install_steps(plan)
        if layout.unit_file(step.word) not in layout.IMAGE_ONLY_TARGETS
    ]
    pending = pending_command() if cmdline else ""
    return first_boot_parts(install_lib, words, pending, merged, dropin, steps)


# The bytes a literal block scalar ("content: |", six spaces in, clip chomping) gives back
# unchanged, wherever in a line: printable ASCII and the tab. Not "\r", NEL, LS or PS (YAML
# breaks lines there too, and jinja's indent, splitting lines as str.splitlines does, writes
# them as "\n") nor a character PyYAML's reader refuses.
PLAIN_BYTES = b"\t\n" + bytes(range(0x20, 0x7F))
MODE = re.compile(r"[0-7]{3,4}")


def plain_text(text: str) -> bool:
    """Whether ``text`` is of PLAIN_BYTES only (in C: 0.05 ms for 55 KB)."""
    return text.isascii() and not text.encode("ascii").translate(None, PLAIN_BYTES)


def carried_unchanged(text: str) -> bool:
    """Whether the template's literal block gives back ``text`` byte for byte: plain text
    (plain_text), its first character not a blank or a line break (the first line sets the
    block's indentation), one final newline (clip keeps one and drops more). A line of blanks is
    kept: jinja's indent indents it, so its blanks are past the block's indentation.
    tests/test_user_data_form.py parses random texts (each condition here fails it when
    dropped) and every shipped bundle's user-data to hold it."""
    return (
        text[:1] not in ("", " ", "\t", "\n")
        and text.endswith("\n")
        and not text.endswith("\n\n")
        and plain_text(text)
    )


def in_block_form(files: Sequence[OverlayFile], texts: Sequence[str], header: str) -> bool:
    """Whether every value the user-data template writes from the plan is in the form it is
    carried unchanged in: each file's text (carried_unchanged), path (plain text: yaml_string
    writes it with JSON's quoting, which is YAML's) and mode (MODE, written between quotes),
    the first-boot script and library (``texts``) and the header comment (one plain line)."""
    return (
        all(
            carried_unchanged(item.text) and plain_text(item.target) and MODE.fullmatch(item.mode)
            for item in files
        )
        and all(carried_unchanged(text) for text in texts)
        and plain_text(header)
        and "\n" not in header
    )


def check_user_data(content: bytes, overlay: list[OverlayFile], plain: bool = False) -> None:
    """The cloud-config must parse and carry every overlay file byte for byte. ``plain``:
    every value the template wrote from the plan is in the form a literal block carries
    unchanged (in_block_form), so the document is the template's with those values and is not
    parsed again (~1.3 ms a bundle)."""
    text = content.decode("utf-8")
    if not text.startswith("#cloud-config\n"):
        raise GenerationError("cloud-init/user-data: must begin with #cloud-config")
    if plain:
        return
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
    (layout.VERIFY_ONLY_TARGETS), which first-boot tuning never runs, and the preflight unit
    (layout.IMAGE_ONLY_TARGETS), which does not fit; each without its comment lines where
    layout.compact_in_user_data says so (EC2's 16 KB)."""
    return [
        staged_at_first_boot(
            item._replace(text=user_data_form(item.target, item.text))
            if layout.compact_in_user_data(item.target)
            else item
        )
        for item in overlay
        if item.target not in layout.VERIFY_ONLY_TARGETS | layout.IMAGE_ONLY_TARGETS
    ]


def boot_scripts_last(items: list[OverlayFile]) -> tuple[list[OverlayFile], list[OverlayFile]]:
    """The user-data's files split in two: the configuration files, written first, and the boot
    scripts (layout.LIBEXEC), written after the first-boot script and install-lib.sh. Only the
    size of the compressed form depends on this order (write_files writes every file before
    runcmd runs): gzip finds a repeat only within 32 KiB, and this order keeps the shell the
    scripts share closest together (the largest shipped user-data ~230 bytes smaller than with
    the scripts in path order before the library, measured on the 50 shipped bundles)."""
    scripts = [item for item in items if item.target.startswith(f"{layout.LIBEXEC}/")]
    return [item for item in items if item not in scripts], scripts


def staged_at_first_boot(item: OverlayFile) -> OverlayFile:
    """A file the first-boot script installs (layout.installed_at_first_boot: daemon.json, merged;
    the tuned profile, placed) is written where the script reads it, not at its target."""
    if layout.installed_at_first_boot(item.target):
        return item._replace(target=layout.first_boot_staged(item.target))
    return item


class CloudInitOptions(NamedTuple):
    """What `gen` is asked for beyond the plan, for the cloud-init forms."""

    reboot: bool = False  # --cloud-init-reboot: power_state (power_state())
    parts: tuple[bytes, ...] = ()  # --cloud-init-part: a team's parts, checked (team_part())


# A part bigger than Azure's whole limit could only ever be delivered through GCP metadata.
TEAM_PART_LIMIT = 64 * 1024
# The parts' MIME file names carry their place (part-01 ...): cloud-init runs the shell-script
# parts in the order of their names (handlers/shell_script.py writes each to the instance's
# scripts/ under its file name; cc_scripts_user runs subp.runparts, which sorts the names).
MAX_TEAM_PARTS = 99


class PartKind(NamedTuple):
    """A kind of --cloud-init-part: what it is called, its MIME type, its file name's suffix."""

    name: str
    content_type: str
    suffix: str


# cloud-init's User-Data Formats: a MIME multi-part archive's text/cloud-config and
# text/x-shellscript parts (cloudinit/handlers/__init__.py, INCLUSION_TYPES_MAP: the same
# "#cloud-config" and "#!" first lines name them outside MIME); a part of another type is
# logged and skipped ("Unhandled unknown content-type", walker_callback). nodeadm (Amazon EKS
# AMIs, awslabs/amazon-eks-ami nodeadm/internal/configprovider): userdata.go's Provide inflates
# a gzip user-data, mime.go's ParseMultipart reads the application/node.eks.aws parts as
# NodeConfig objects (api group node.eks.aws) and merges them in order, ignoring other parts.
CLOUD_CONFIG = PartKind("cloud-config", "text/cloud-config", "cfg")
SHELL_SCRIPT = PartKind("shell script", "text/x-shellscript", "sh")
NODE_CONFIG = PartKind("nodeadm NodeConfig", "application/node.eks.aws", "yaml")
NODE_CONFIG_GROUP = "node.eks.aws/"


def part_kind(content: bytes) -> PartKind:
    """The kind of a part team_part() accepted, by its first bytes as cloud-init tells them: a
    "#cloud-config" line, a "#!" line, else (team_part() checked it) a NodeConfig."""
    if content.startswith(b"#cloud-config\n"):
        return CLOUD_CONFIG
    if content.startswith(b"#!"):
        return SHELL_SCRIPT
    return NODE_CONFIG


def team_part(raw: bytes, source: str) -> bytes:
    """A team's own part for the MIME form, checked: UTF-8 text, no line that is our boundary,
    and one of the kinds: a cloud-config (``#cloud-config`` first, a YAML mapping), a shell
    script (``#!`` first), a nodeadm NodeConfig (a YAML mapping of apiVersion node.eks.aws/...
    and kind NodeConfig). Problems name the file, never echo its text."""
    try:
        text = raw.decode("utf-8")
    except UnicodeDecodeError as error:
        raise InputError(Problem(source, "", f"not UTF-8 text (byte {error.start})")) from None
    if any(line.startswith(f"--{MIME_BOUNDARY}") for line in text.splitlines()):
        raise InputError(Problem(source, "", "a line starts with the MIME form's boundary"))
    if text.startswith("#!"):
        return raw
    loaded = _yaml_mapping(text, source)
    if text.startswith("#cloud-config\n"):
        return raw
    if str(loaded.get("apiVersion", "")).startswith(NODE_CONFIG_GROUP) and (
        loaded.get("kind") == "NodeConfig"
    ):
        return raw
    raise InputError(
        Problem(
            source,
            "",
            "a part is a cloud-config (a #cloud-config line first), a shell script (#! first) or "
            f"a nodeadm NodeConfig (apiVersion: {NODE_CONFIG_GROUP}..., kind: NodeConfig)",
        )
    )


def _yaml_mapping(text: str, source: str) -> dict[Any, Any]:
    try:
        loaded = yaml.safe_load(text)
    except yaml.YAMLError as error:
        mark = getattr(error, "problem_mark", None)
        where = f"line {mark.line + 1}" if mark is not None else ""
        problem = getattr(error, "problem", None) or "not valid YAML"
        raise InputError(Problem(source, where, f"not valid YAML: {problem}")) from None
    except YAML_VALUE_ERRORS:
        why = "not valid YAML: nested too deeply, or a value its type cannot hold"
        raise InputError(Problem(source, "", why)) from None
    if not isinstance(loaded, dict):
        what = "a cloud-config" if text.startswith("#cloud-config\n") else "a part"
        raise InputError(Problem(source, "", f"{what} is a YAML mapping"))
    return loaded


def _mime_part(content: bytes, filename: str, content_type: str) -> bytes:
    """One part. ASCII is sent as it is (7bit), not base64 as `cloud-init devel make-mime`
    writes it: base64 hides the text's repetitions from gzip, and a composed delivery then no
    longer fits EC2 (tests/test_cloud_scale.py). Other bytes (a profile's reason) are base64:
    cloud-init 22.4 drops an 8bit utf-8 part (tried with its own handler)."""
    ascii_text = content.isascii()
    encoding = "7bit" if ascii_text else "base64"
    body = content if ascii_text else base64.encodebytes(content)
    head = [
        f"--{MIME_BOUNDARY}",
        f'Content-Type: {content_type}; charset="utf-8"',
        "MIME-Version: 1.0",
        f"Content-Transfer-Encoding: {encoding}",
        f'Content-Disposition: attachment; filename="{filename}"',
        "",
        "",
    ]
    return "\n".join(head).encode("ascii") + body.rstrip(b"\n") + b"\n"


def mime_user_data(user_data: bytes, before: tuple[bytes, ...] = ()) -> bytes:
    """A MIME multi-part message: the ``before`` parts (a team's parts, in the order given, each
    with the MIME type of its kind and a file name that sorts in that order), then the user-data
    as the last part. Last, with its ``merge_how``, it keeps the files and commands of every
    earlier cloud-config even when those carry no ``merge_how`` of their own (cloud-init merges
    a part with that part's mergers; see MERGE_HOW)."""
    head = f'Content-Type: multipart/mixed; boundary="{MIME_BOUNDARY}"\nMIME-Version: 1.0\n\n'
    parts = []
    for index, part in enumerate(before, 1):
        kind = part_kind(part)
        parts.append(_mime_part(part, f"part-{index:02d}.{kind.suffix}", kind.content_type))
    parts.append(_mime_part(user_data, f"{TOOL}.cfg", CLOUD_CONFIG.content_type))
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
