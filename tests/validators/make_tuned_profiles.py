"""Record what tuned's shipped profiles set in the sections a goldtune bundle also decides.

    python3 tests/validators/make_tuned_profiles.py /usr/lib/tuned "tuned 2.20.0-1 (Debian 12)" \
        > hardware_db/tuned/profiles.yaml

A one-off step, run where the tuned package is installed (nothing is written but stdout). It
reads each ``<profile>/tuned.conf`` and keeps ``include=`` and the options of the plain
``[sysctl]``, ``[vm]`` and ``[cpu]`` sections: tuned merges an included profile's sections into
the including one option by option, so these are the values a profile layered on them inherits
(redhat-performance/tuned, tuned/profiles/merger.py). Instance sections (``[sysctl.thunderx]``
with ``type=sysctl``) are separate plugin instances and are listed by name only.
"""

from __future__ import annotations

import configparser
import sys
from pathlib import Path

SECTIONS = ("sysctl", "vm", "cpu")


def read_profile(path: Path) -> configparser.ConfigParser:
    parser = configparser.ConfigParser(interpolation=None, strict=False, delimiters=("=",))
    parser.optionxform = str  # type: ignore[assignment,method-assign]  # keys keep their case
    parser.read_string(path.read_text(encoding="utf-8", errors="replace"))
    return parser


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


def main() -> int:
    root, package = Path(sys.argv[1]), sys.argv[2]
    print("# What tuned's shipped profiles set in [sysctl], [vm] and [cpu], and what they include.")
    print("# Made by tests/validators/make_tuned_profiles.py; do not edit by hand.")
    print(f"source: {quoted(f'{package} {root}/<profile>/tuned.conf, read with configparser [P]')}")
    print("profiles:")
    for path in sorted(root.glob("*/tuned.conf")):
        print("\n".join(profile_lines(path.parent.name, read_profile(path))))
    return 0


if __name__ == "__main__":
    sys.exit(main())
