"""Read a bundle back: its manifest, its plan, and whether its files still match the manifest.

A bundle may come from anyone, so it is read as hostile: every file through
``generator.foreign.read_beneath`` (a regular file, no symbolic link anywhere below the bundle
directory, a size cap), the JSON files checked for shape before use, and the directory walked
without following links. Readers (``gen diff``) check ``tampered``/``unlisted`` before they show
any file's content.
"""

# No `from __future__ import annotations`: a NamedTuple turns each string annotation into
# a compiled ForwardRef, ~0.15 ms a record at import (bench/bench.py's cold gen).
import functools
import hashlib
import json
import os
import re
import stat
from pathlib import Path
from typing import Any, NamedTuple

from generator import TOOL
from generator.errors import InputError, Problem
from generator.foreign import read_beneath, read_beneath_with_mode, relative_parts
from generator.model.layout import (
    MANIFEST,
    PLAN_FILE,
    SEALS,
    TUNED_PROFILES_DIRS,
    UDEV_FILE,
    UNIT_DIR,
    in_overlay,
    target_of,
)
from generator.model.planio import FORMAT, plan_from_data
from generator.model.setting import Plan
from generator.textsafe import decoded, printable, short_key

# The files named when a bundle does not match its manifest; the rest are counted.
MAX_TAMPERED_LINES = 10
# Far above any real bundle file (the largest, EXPLAIN.md of a big machine, is about 100 KiB).
MAX_BUNDLE_FILE_BYTES = 16 * 1024 * 1024
# A bundle is some 70 files at most 8 directories deep (rootfs/etc/systemd/system/…): far more
# is not a bundle, and is refused before it is walked to its end.
MAX_BUNDLE_DEPTH = 32
MAX_BUNDLE_ENTRIES = 10_000
# A file's mode as manifest.json writes it (render.manifest.manifest_entry: 0644, 0755).
OCTAL = re.compile(r"[0-7]{1,6}")


class ManifestFile(NamedTuple):
    """One file a bundle's manifest.json lists (a NamedTuple, as the other records read on
    every run: a frozen dataclass compiles its methods at import)."""

    path: str  # in the bundle: rootfs/etc/sysctl.d/90-goldtune.conf
    sha256: str
    mode: int
    # the file's digest as the cloud-init user-data writes it, without its comment lines
    # (layout.compact_in_user_data); either form is the bundle's file
    first_boot_sha256: str | None = None

    def is_bundles(self, digest: str) -> bool:
        return digest == self.sha256 or (
            self.first_boot_sha256 is not None and digest == self.first_boot_sha256
        )

    @property
    def mode_text(self) -> str:
        """The mode as manifest.json writes it (0644)."""
        return f"{self.mode:04o}"

    @property
    def target(self) -> str | None:
        """Where the file lands on the machine, or None for a delivery file (install.sh…)."""
        return target_of(self.path)


class Manifest(NamedTuple):
    """A bundle's manifest.json, as every reader of it sees it."""

    files: tuple[ManifestFile, ...]
    tool_name: str  # "" where the manifest names none (not a string)
    tool_version: str
    # each cloud-init form's size and the providers it fits (render.providers.delivery_sizes)
    user_data: dict[str, Any]


class Bundle:
    """A bundle directory read back: its plan, its manifest, and the overlay files verify judges
    against. Nothing here says the files match the manifest: ``tampered``/``unlisted`` are
    computed when first asked (``check_intact``).

    A plain class, not a frozen dataclass: this module is loaded by every `gen` (the size
    warnings read the manifest written), and the dataclass compiled its methods at import,
    ~1.2 ms of each run."""

    def __init__(
        self,
        root: Path,
        plan: Plan,
        files: tuple[ManifestFile, ...] = (),
        tool_version: str = "",
        udev_rules: str | None = None,
        tuned_profile: str | None = None,
        units: dict[str, str] | None = None,
    ) -> None:
        self.root = root
        self.plan = plan
        self.files = files
        self.tool_version = tool_version  # the goldtune version manifest.json records
        self.udev_rules = udev_rules  # the bundle's own I/O scheduler rules, None when it has none
        self.tuned_profile = tuned_profile
        self.units = {} if units is None else units  # own unit name -> its text

    @property
    def entries(self) -> dict[str, ManifestFile]:
        return {entry.path: entry for entry in self.files}

    def overlay_files(self) -> list[ManifestFile]:
        return [f for f in self.files if f.target is not None]

    def data(self, path: str) -> bytes:
        return read_beneath(self.root, path, MAX_BUNDLE_FILE_BYTES)

    def text(self, path: str) -> str:
        """The file as text to show: a byte that is not UTF-8 is kept (``textsafe.decoded``),
        for the report's escaping to show as ``\\xNN``."""
        return decoded(self.data(path))

    @functools.cached_property
    def tampered(self) -> tuple[str, ...]:
        """Files whose content or mode differs from the manifest, or are missing."""
        return tuple(sorted(e.path for e in self.files if not _file_state(self.root, e)))

    @functools.cached_property
    def unlisted(self) -> tuple[str, ...]:
        """Files in the directory the manifest does not list (but the manifest and the provenance
        files, which describe the others)."""
        listed = {entry.path for entry in self.files}
        return tuple(sorted(present_entries(self.root) - listed - SEALS))


def read_bundle_file(root: Path, name: str) -> bytes:
    """``root/name``; a missing, linked or huge file: InputError."""
    try:
        return read_beneath(root, name, MAX_BUNDLE_FILE_BYTES)
    except InputError as error:
        if error.problems[0].message == "no such file":
            raise InputError(Problem(str(root), "", f"not a goldtune bundle: no {name}")) from None
        raise


def load_bundle_json(root: Path, name: str) -> Any:
    """``root/name`` parsed as JSON; a missing, linked, huge, deep or broken file: InputError."""
    return parse_bundle_json(read_bundle_file(root, name), str(root / name))


def parse_bundle_json(raw: bytes, source: str) -> Any:
    """A bundle's JSON file ``raw`` parsed; a broken, deep or huge-number one: InputError."""
    try:
        return json.loads(raw.decode("utf-8"))
    except UnicodeDecodeError as error:
        why = f"not UTF-8 (byte {error.start})"
    except json.JSONDecodeError as error:
        why = f"{error.msg} at line {error.lineno}"
    except (ValueError, RecursionError):  # a 5,000-digit number; nesting past the parser's stack
        why = "numbers too long or nested too deeply"
    raise InputError(Problem(source, "", f"unreadable {source.rsplit('/', 1)[-1]}: {why}"))


def _is_list_of_mappings(value: Any) -> bool:
    return isinstance(value, list) and all(isinstance(item, dict) for item in value)


def check_plan_shape(data: Any) -> None:
    """What ``plan_from_data`` assumes of plan.json's containers; ValueError where it fails."""
    if not isinstance(data, dict):
        raise ValueError("plan.json is not a JSON object")
    for name in ("settings", "notes", "warnings", "nics"):
        if name in data and not _is_list_of_mappings(data[name]):
            raise ValueError(f"'{name}' is not a list of objects")
    for item in data.get("settings", []):
        for optional in ("original_value", "original_rule"):
            if item.get(optional) is not None and not isinstance(item[optional], str):
                raise ValueError(f"setting field {optional!r} is not a string")
        if not isinstance(item.get("optional", False), bool):
            raise ValueError("setting field 'optional' is not true or false")


def load_plan(root: Path) -> Plan:
    data = load_bundle_json(root, PLAN_FILE)
    try:
        check_plan_shape(data)
        return plan_from_data(data)
    except ValueError as error:
        raise InputError(
            Problem(
                str(root / PLAN_FILE),
                "",
                short_key(str(error), 120),
                "regenerate the bundle with this goldtune",
            )
        ) from None


def _manifest_file(entry: Any, index: int, source: str) -> ManifestFile:
    """One entry of the manifest's list: a plain relative path, a sha256, an octal mode."""
    valid = (
        isinstance(entry, dict)
        and all(isinstance(entry.get(name), str) for name in ("path", "sha256", "mode"))
        and OCTAL.fullmatch(entry["mode"]) is not None
        and isinstance(entry.get("first_boot_sha256", ""), str)
    )
    if not valid:
        raise InputError(Problem(source, f"files[{index}]", "needs path, sha256 and an octal mode"))
    try:
        relative_parts(entry["path"])
    except ValueError:
        why = "not a plain relative path inside the bundle"
        raise InputError(Problem(source, f"files[{index}].path", why)) from None
    return ManifestFile(
        entry["path"], entry["sha256"], int(entry["mode"], 8), entry.get("first_boot_sha256")
    )


def parse_manifest(raw: bytes, source: str) -> Manifest:
    """manifest.json's bytes as a Manifest; not JSON, or a shape no goldtune wrote: InputError."""
    data = parse_bundle_json(raw, source)
    entries = data.get("files") if isinstance(data, dict) else None
    if not isinstance(entries, list):
        raise InputError(Problem(source, "files", "a manifest has a list of files"))
    files = tuple(_manifest_file(entry, index, source) for index, entry in enumerate(entries))
    tool = data.get("tool")
    tool = tool if isinstance(tool, dict) else {}
    user_data = data.get("user_data")
    return Manifest(
        files,
        _text(tool.get("name")),
        _text(tool.get("version")),
        user_data if isinstance(user_data, dict) else {},
    )


def _text(value: Any) -> str:
    return value if isinstance(value, str) else ""


def read_manifest(root: Path) -> Manifest:
    """The one reader of a bundle's manifest.json: read as foreign, then checked for shape."""
    return parse_manifest(read_bundle_file(root, MANIFEST), str(root / MANIFEST))


def read_user_data_sizes(root: Path) -> dict[str, Any]:
    """manifest.json's ``user_data`` record alone (Manifest.user_data), read as foreign: what
    `gen` and `gen matrix` warn from just after writing the bundle. Its files' list is not
    checked entry by entry (read_manifest's 1 ms a bundle): no file is read through it."""
    data = parse_bundle_json(read_bundle_file(root, MANIFEST), str(root / MANIFEST))
    user_data = data.get("user_data") if isinstance(data, dict) else None
    return user_data if isinstance(user_data, dict) else {}


def _file_state(root: Path, entry: ManifestFile) -> bool:
    """True when the file is regular, below ``root`` (no link on the way), of its digest, mode."""
    try:
        content, mode = read_beneath_with_mode(root, entry.path, MAX_BUNDLE_FILE_BYTES)
    except InputError:
        return False
    return hashlib.sha256(content).hexdigest() == entry.sha256 and mode == entry.mode


def present_entries(root: Path) -> set[str]:
    """Every non-directory entry below ``root``, every link to a directory (not followed), and
    every directory with nothing in it to list, or that cannot be listed (``name/``): a bundle
    has none, so a hidden or empty directory left in a committed bundle is unlisted.

    Walked with a list, not recursion (os.walk of Python 3.11 recurses, and 1,100 nested
    directories raised RecursionError in diff, package and matrix --check), and bounded: a tree
    deeper or larger than any bundle is refused as bad input before it is walked further.
    """
    found: set[str] = set()
    pending = [("", os.fspath(root), 0)]
    seen = 0
    while pending:
        prefix, folder, depth = pending.pop()
        if depth > MAX_BUNDLE_DEPTH:
            why = f"directories nested more than {MAX_BUNDLE_DEPTH} deep; not a {TOOL} bundle"
            raise InputError(Problem(f"{root}/{printable(prefix[:200])}", "", why))
        empty = True
        try:
            with os.scandir(folder) as entries:
                for entry in entries:
                    empty = False
                    seen += 1
                    if seen > MAX_BUNDLE_ENTRIES:
                        why = f"more than {MAX_BUNDLE_ENTRIES} entries; not a {TOOL} bundle"
                        raise InputError(Problem(str(root), "", why))
                    if entry.is_dir(follow_symlinks=False):
                        pending.append((f"{prefix}{entry.name}/", entry.path, depth + 1))
                    else:
                        found.add(prefix + entry.name)
        except OSError:
            pass  # a folder that cannot be listed: its name stands for what it holds
        if empty and prefix:
            found.add(prefix)  # an empty or unreadable directory is an entry no manifest lists
    return found


def holds_own_plan(root: Path, files: tuple[ManifestFile, ...]) -> bool:
    """True when ``files`` (a manifest's list) has plan.json with the sha256 of ``root/plan.json``,
    and that file is a goldtune plan: what a hand-made manifest naming goldtune does not have."""
    entry = next((e for e in files if e.path == PLAN_FILE), None)
    if entry is None:
        return False
    try:
        raw = read_beneath(root, PLAN_FILE, MAX_BUNDLE_FILE_BYTES)
        data = json.loads(raw)
    except (InputError, ValueError, RecursionError):
        return False
    return (
        hashlib.sha256(raw).hexdigest() == entry.sha256
        and isinstance(data, dict)
        and data.get("tool") == TOOL
        and data.get("format") == FORMAT
    )


def read_bundle(root: Path, *, manifest_required: bool = True) -> Bundle:
    """Load a bundle directory; bad or foreign directories raise InputError (exit 2).

    ``gen verify`` reads a bundle without a manifest.json too (``manifest_required=False``):
    its checks of settings need only the plan, and the overlay files it judges are read here."""
    if not root.is_dir():
        why = "not a directory"
        raise InputError(Problem(str(root), "", why, hint="give the bundle directory (gen -o DIR)"))
    if manifest_required or os.path.lexists(root / MANIFEST):
        manifest = read_manifest(root)
    else:
        manifest = Manifest((), "", "", {})
    plan = load_plan(root)
    rules = overlay_texts(root, in_overlay(UDEV_FILE.rsplit("/", 1)[0]), ".rules")
    tuned = tuned_profiles(root)
    bundle = Bundle(
        root=root,
        plan=plan,
        files=manifest.files,
        tool_version=manifest.tool_version,
        udev_rules="\n".join(rules.values()) if rules else None,
        tuned_profile=tuned[0] if tuned else None,
        units=overlay_texts(root, in_overlay(UNIT_DIR), ".service"),
    )
    if manifest_required:
        # Walked now: a tree deeper or larger than any bundle is refused as the bundle is read,
        # not taken for a bundle whose files differ from its manifest (gen matrix --check).
        _ = bundle.unlisted
    return bundle


def _plain_directory(bundle_dir: Path, subdir: str) -> bool:
    """``bundle_dir/subdir`` exists and every component of ``subdir`` is a directory, not a link."""
    current = bundle_dir
    for part in subdir.split("/"):
        current = current / part
        try:
            if not stat.S_ISDIR(os.lstat(current).st_mode):
                return False
        except OSError:
            return False
    return True


def overlay_texts(bundle_dir: Path, subdir: str, suffix: str) -> dict[str, str]:
    """name -> text of each regular file ``subdir/*suffix`` of the bundle, in name order.

    No link is followed: a linked directory or file is not read (``read_beneath``).
    """
    if not _plain_directory(bundle_dir, subdir):
        return {}
    with os.scandir(bundle_dir / subdir) as entries:
        names = sorted(
            entry.name
            for entry in entries
            if entry.name.endswith(suffix) and entry.is_file(follow_symlinks=False)
        )
    texts = {
        name: read_beneath(bundle_dir, f"{subdir}/{name}", MAX_BUNDLE_FILE_BYTES) for name in names
    }
    return {name: content.decode("utf-8", "replace") for name, content in texts.items()}


def tuned_profiles(bundle_dir: Path) -> list[str]:
    """The bundle's tuned profile directories that hold a tuned.conf, in name order, in each
    directory a tuned reads (layout.TUNED_PROFILES_DIRS: /etc/tuned, /etc/tuned/profiles)."""
    found: set[str] = set()
    for profiles_dir in TUNED_PROFILES_DIRS:
        tuned_dir = in_overlay(profiles_dir)
        if not _plain_directory(bundle_dir, tuned_dir):
            continue
        with os.scandir(bundle_dir / tuned_dir) as entries:
            names = [e.name for e in entries if e.is_dir(follow_symlinks=False)]
        found.update(
            name for name in names if overlay_texts(bundle_dir, f"{tuned_dir}/{name}", "tuned.conf")
        )
    return sorted(found)


def check_intact(bundle: Bundle) -> None:
    """Refuse a bundle whose files are not exactly its manifest's, before any of it is read."""
    bad = [*bundle.tampered, *bundle.unlisted]
    if not bad:
        return
    why = "does not match the bundle's manifest.json (modified, missing, linked or unlisted)"
    problems = [
        Problem(f"{bundle.root}/{printable(path)}", "", why)
        for path in sorted(bad)[:MAX_TAMPERED_LINES]
    ]
    if len(bad) > MAX_TAMPERED_LINES:
        more = len(bad) - MAX_TAMPERED_LINES
        problems.append(Problem(str(bundle.root), "", f"and {more} more such files"))
    raise InputError(problems)


def check_set_intact(set_dir: Path) -> None:
    """Refuse a bundle set whose files are not exactly its manifest's (the members' image
    copies included, which their own manifests do not cover), as check_intact a bundle."""
    files = read_manifest(set_dir).files
    tampered = {entry.path for entry in files if not _file_state(set_dir, entry)}
    bad = sorted(tampered | (present_entries(set_dir) - {e.path for e in files} - SEALS))
    why = "does not match the set's manifest.json (modified, missing, linked or unlisted)"
    problems = [Problem(f"{set_dir}/{printable(path)}", "", why) for path in bad]
    if len(bad) > MAX_TAMPERED_LINES:
        more = len(bad) - MAX_TAMPERED_LINES
        problems[MAX_TAMPERED_LINES:] = [Problem(str(set_dir), "", f"and {more} more such files")]
    if problems:
        raise InputError(problems)
