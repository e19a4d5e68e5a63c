"""Record what tuned's shipped profiles set in the sections a goldtune bundle also decides.

    python3 tests/validators/make_tuned_profiles.py /usr/lib/tuned "tuned 2.20.0-1 (Debian 12)" \
        > hardware_db/tuned/profiles.yaml
    python3 tests/validators/make_tuned_profiles.py --git TUNED_REPO v2.24.0 \
        "tuned 2.24.0 (RHEL 9.5)" > hardware_db/tuned/rhel-9-tuned-2.24.yaml

A one-off step, run where the tuned package is installed, or on a clone of
github.com/redhat-performance/tuned at the tag a distribution ships (``--git``: the profiles are
read with ``git show TAG:profiles/<profile>/tuned.conf``, nothing is checked out); nothing is
written but stdout. Every ``hardware_db/tuned/*.yaml`` counts (generator/render/tuned.py): the
bundle restates the keys of every tuned version's profiles. It reads each
``<profile>/tuned.conf`` and keeps ``include=`` and the options of the plain ``[sysctl]``,
``[vm]``, ``[cpu]`` and ``[bootloader]`` sections: tuned merges an included profile's sections
into the including one option by option, so these are the values a profile layered on them inherits
(redhat-performance/tuned, tuned/profiles/merger.py). Instance sections (``[sysctl.thunderx]``
with ``type=sysctl``) are separate plugin instances and are listed by name only.
"""

from __future__ import annotations

import configparser
import re
import subprocess
import sys
from pathlib import Path

SECTIONS = ("sysctl", "vm", "cpu", "bootloader")


def parse_profile(text: str) -> configparser.ConfigParser:
    parser = configparser.ConfigParser(interpolation=None, strict=False, delimiters=("=",))
    parser.optionxform = str  # type: ignore[assignment,method-assign]  # keys keep their case
    parser.read_string(text)
    return parser


def installed_profiles(root: Path) -> dict[str, str]:
    """Profile name -> its tuned.conf, from an installed tree (/usr/lib/tuned)."""
    return {
        path.parent.name: path.read_text(encoding="utf-8", errors="replace")
        for path in sorted(root.glob("*/tuned.conf"))
    }


def git(repo: Path, *args: str) -> str:
    done = subprocess.run(
        ["git", "-C", str(repo), *args], capture_output=True, check=True, timeout=60
    )
    return done.stdout.decode("utf-8", errors="replace")


def tagged_profiles(repo: Path, tag: str) -> dict[str, str]:
    """Profile name -> its tuned.conf at ``tag`` of a tuned git tree (profiles/<name>/)."""
    paths = git(repo, "ls-tree", "-r", "-z", "--name-only", tag, "profiles").split("\0")
    names = sorted(
        path.split("/")[1] for path in paths if re.fullmatch(r"profiles/[^/]+/tuned\.conf", path)
    )
    return {name: git(repo, "show", f"{tag}:profiles/{name}/tuned.conf") for name in names}


def quoted(text: str) -> str:
    return '"' + text.replace("\\", "\\\\").replace('"', '\\"') + '"'


def profile_lines(name: str, parser: configparser.ConfigParser) -> list[str]:
    lines = [f"  {name}:"]
    include = parser.get("main", "include", fallback="")
    if include:
        lines.append(f"    include: {quoted(include)}")
    for section in SECTIONS:
        if parser.has_section(section) and parser.options(section):
            lines.append(f"    {section}:")
            lines += [
                f"      {quoted(option)}: {quoted(parser.get(section, option).strip())}"
                for option in parser.options(section)
            ]
    instances = [s for s in parser.sections() if s.split(".", 1)[0] in SECTIONS and "." in s]
    if instances:
        lines.append(f"    instances: [{', '.join(quoted(s) for s in instances)}]")
    return lines


def table(profiles: dict[str, str], source: str) -> str:
    lines = [
        "# What tuned's shipped profiles set in [sysctl], [vm], [cpu] and [bootloader], and what "
        "they include.",
        "# Made by tests/validators/make_tuned_profiles.py; do not edit by hand.",
        f"source: {quoted(source)}",
        "profiles:",
    ]
    for name, text in profiles.items():
        lines += profile_lines(name, parse_profile(text))
    return "\n".join(lines) + "\n"


def main(argv: list[str]) -> int:
    if argv[:1] == ["--git"]:
        repo, tag, package = Path(argv[1]), argv[2], argv[3]
        commit = git(repo, "rev-parse", f"{tag}^{{commit}}").strip()
        where = f"redhat-performance/tuned {tag} ({commit}) profiles/<profile>/tuned.conf"
        sys.stdout.write(
            table(tagged_profiles(repo, tag), f"{package}: {where}, read with configparser [P]")
        )
        return 0
    root, package = Path(argv[0]), argv[1]
    source = f"{package} {root}/<profile>/tuned.conf, read with configparser [P]"
    sys.stdout.write(table(installed_profiles(root), source))
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
