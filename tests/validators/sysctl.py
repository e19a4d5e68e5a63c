"""sysctl.d as systemd-sysctl reads it, checked against the keys of reference kernels.

The parser follows systemd 252's ``parse_file`` (src/sysctl/sysctl.c) and sysctl.d(5): ``#`` and
``;`` start comments, ``key = value`` with optional spaces, a leading ``-`` ignores a failure,
``/`` or ``.`` separate the parts of a key (whichever comes first), and keys may be globs.
Reference kernels are the committed ``sysctl-keys-*.txt`` lists (see make_sysctl_keys.py), each
read from a booted kernel. Which of them judge a bundle is the distribution it was made for
(``plan.json``'s ``distro``, from ``--os``): every list its kernel lines name in
``hardware_db/distros/<distro>.yaml`` (``sysctl_keys``; where no kernel of that version was
booted, the nearer older and newer lists, whose common keys the kernel between them has). A
portable bundle may meet any distribution's kernel, so it is judged by every list any
distribution names. The table is read as plain YAML: nothing here imports goldtune.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from fnmatch import fnmatchcase
from functools import cache
from pathlib import Path

import yaml

HERE = Path(__file__).resolve().parent
PER_INTERFACE = re.compile(r"^(net\.(?:ipv4|ipv6|mpls)\.(?:conf|neigh)\.)([^.*?\[]+)(\..+)$")
INTEGER = re.compile(r"^-?\d+$")


@dataclass(frozen=True)
class Assignment:
    file: str
    number: int
    key: str
    value: str
    ignore_failure: bool


@dataclass(frozen=True)
class ReferenceKernel:
    name: str  # the list's file name
    shapes: dict[str, str]  # key -> int | int*N | text | -


DISTROS = HERE.parents[1] / "hardware_db" / "distros"


def reference_lists() -> tuple[Path, ...]:
    """Every committed list."""
    return tuple(sorted(HERE.glob("sysctl-keys-*.txt")))


def list_path(version: str) -> Path:
    return HERE / f"sysctl-keys-{version}.txt"


@cache
def distro_lists() -> dict[str, tuple[str, ...]]:
    """Distribution key -> the list versions its kernel lines name, in table order."""
    found: dict[str, tuple[str, ...]] = {}
    for path in sorted(DISTROS.glob("*.yaml")):
        table = yaml.safe_load(path.read_text(encoding="utf-8"))
        versions = [str(v) for kernel in table["kernels"] for v in kernel.get("sysctl_keys", [])]
        found[str(table["key"])] = tuple(dict.fromkeys(versions))
    return found


def lists_for(distro: str) -> tuple[Path, ...] | None:
    """The lists that judge a bundle for ``distro`` ("" = portable: every distribution's);
    None for a distribution the table does not know."""
    table = distro_lists()
    if distro and distro not in table:
        return None
    chosen = table[distro] if distro else tuple(v for vs in table.values() for v in vs)
    return tuple(list_path(version) for version in sorted(set(chosen), key=_version_order))


def _version_order(version: str) -> tuple[int, ...]:
    return tuple(int(part) for part in version.split("."))


@cache
def load_reference(path: Path) -> ReferenceKernel:
    shapes: dict[str, str] = {}
    for line in path.read_text().splitlines():
        if line and not line.startswith("#"):
            key, shape = line.split()
            shapes[key] = shape
    return ReferenceKernel(path.name, shapes)


def normalize_key(key: str) -> str:
    """sysctl.d(5): if the first separator is '/', '/' separates and '.' is part of a name."""
    slash, dot = key.find("/"), key.find(".")
    if slash != -1 and (dot == -1 or slash < dot):
        return ".".join(part.replace(".", "/") for part in key.strip("/").split("/"))
    return key


def parse_sysctl(name: str, text: str) -> tuple[list[Assignment], list[str]]:
    assignments: list[Assignment] = []
    problems: list[str] = []
    for number, raw in enumerate(text.splitlines(), start=1):
        line = raw.strip()
        if not line or line[0] in "#;":
            continue
        if "=" not in line:
            if not line.startswith("-"):
                problems.append(
                    f"{name}:{number}: not 'key = value' (systemd-sysctl skips it): {line}"
                )
            continue
        key, value = (part.strip() for part in line.split("=", 1))
        ignore = key.startswith("-")
        key = normalize_key(key.lstrip("-"))
        if not key:
            problems.append(f"{name}:{number}: empty key")
            continue
        assignments.append(Assignment(name, number, key, value, ignore))
    return assignments, problems


def reference_key(key: str) -> str:
    """An interface name inside a per-interface key reads as 'default' (lists keep all/default)."""
    match = PER_INTERFACE.match(key)
    if match and match.group(2) not in {"all", "default"}:
        return f"{match.group(1)}default{match.group(3)}"
    return key


def matching_keys(key: str, kernel: ReferenceKernel) -> list[str]:
    wanted = reference_key(key)
    if any(char in wanted for char in "*?["):
        return [known for known in kernel.shapes if fnmatchcase(known, wanted)]
    return [wanted] if wanted in kernel.shapes else []


def check_shape(value: str, shape: str) -> str | None:
    fields = value.split()
    if shape == "int" and not (len(fields) == 1 and INTEGER.match(fields[0])):
        return "expects one integer"
    if shape.startswith("int*"):
        count = int(shape[4:])
        if len(fields) != count or not all(INTEGER.match(field) for field in fields):
            return f"expects {count} integers separated by spaces"
    if shape == "text" and not value:
        return "expects a value"
    return None


def check_assignment(assignment: Assignment, kernel: ReferenceKernel) -> list[str]:
    where = f"{assignment.file}:{assignment.number}"
    keys = matching_keys(assignment.key, kernel)
    if not keys:
        return [f"{where}: {assignment.key} does not exist on the reference kernel ({kernel.name})"]
    problems = []
    for key in keys:
        wrong = check_shape(assignment.value, kernel.shapes[key])
        if wrong:
            problems.append(
                f"{where}: {assignment.key} = {assignment.value!r}: {key} {wrong} ({kernel.name})"
            )
    return problems


def check_duplicates(assignments: list[Assignment]) -> list[str]:
    first: dict[str, Assignment] = {}
    problems = []
    for assignment in assignments:
        earlier = first.setdefault(assignment.key, assignment)
        if earlier is not assignment:
            problems.append(
                f"{assignment.file}:{assignment.number}: {assignment.key} is also set at "
                f"{earlier.file}:{earlier.number}; the later file wins silently"
            )
    return problems
