"""manifest.json: the tool, the inputs' digests, every file's digest and mode, the user-data's
sizes; no timestamps."""

from __future__ import annotations

import functools
import hashlib

from generator import TOOL, __version__
from generator.model import layout
from generator.model.jsontext import dumps_indented
from generator.model.layout import compact_in_user_data, target_of
from generator.model.setting import Plan
from generator.model.shellform import user_data_form
from generator.render.cloudinit import CloudInitOptions
from generator.render.outputs import FIXED_SCRIPTS, RenderedFiles
from generator.render.providers import delivery_sizes

MANIFEST_FORMAT = f"{TOOL}-bundle/1"


def manifest_entry(path: str, content: bytes, mode: int) -> dict[str, str]:
    """A file's manifest entry; a file the user-data carries without its comment lines also has
    the digest of that form (``first_boot_sha256``), which gen verify accepts on the machine."""
    digests = fixed_file_digests if path in FIXED_SCRIPT_PATHS else file_digests
    return {"path": path, "mode": f"{mode:04o}", **digests(path, content)}


def file_digests(path: str, content: bytes) -> dict[str, str]:
    """``sha256`` of the file, and ``first_boot_sha256`` where its user-data form differs."""
    digests = {"sha256": hashlib.sha256(content).hexdigest()}
    target = target_of(path)
    if (
        target is not None
        and target not in layout.VERIFY_ONLY_TARGETS
        and compact_in_user_data(target)
    ):
        compact = user_data_form(target, content.decode("utf-8")).encode("utf-8")
        if compact != content:
            digests["first_boot_sha256"] = hashlib.sha256(compact).hexdigest()
    return digests


FIXED_SCRIPT_PATHS = frozenset(output.path for output in FIXED_SCRIPTS)


# The fixed scripts are the same bytes in every bundle (fixed_script keeps one copy each): they
# are digested once a process. Keyed by the content, so bytes that are not the shipped script
# are digested on their own.
@functools.lru_cache(maxsize=2 * len(FIXED_SCRIPTS))
def _fixed_digests(path: str, content: bytes) -> tuple[tuple[str, str], ...]:
    return tuple(file_digests(path, content).items())


def fixed_file_digests(path: str, content: bytes) -> dict[str, str]:
    return dict(_fixed_digests(path, content))


def manifest_entries(files: RenderedFiles) -> list[dict[str, str]]:
    """Every file's manifest entry, in path order."""
    return [manifest_entry(path, content, mode) for path, (content, mode) in sorted(files.items())]


def render_manifest(
    plan: Plan,
    files: RenderedFiles,
    options: CloudInitOptions,
    entries: list[dict[str, str]] | None = None,
) -> bytes:
    """Tool, inputs' digests and every other file with its sha256 and mode; no timestamps.
    ``entries``: manifest_entries(files), where the caller has them already."""
    data = {
        "format": MANIFEST_FORMAT,
        "tool": {"name": TOOL, "version": __version__},
        "hardware": plan.hardware_name,
        "profile": plan.profile_name,
        "inputs": {role: {"sha256": digest} for role, digest in sorted(plan.inputs.items())},
        # each cloud-init form's size and the providers whose user-data limit it fits
        "user_data": delivery_sizes(files, options),
        "files": manifest_entries(files) if entries is None else entries,
    }
    return (dumps_indented(data) + "\n").encode("utf-8")
