"""An image's configuration files read the way their consumers read them (``gen verify --root``):
comment lines skipped, files in the order given, the last assignment winning; INI sections as
systemd reads them. ``verdict_of`` turns what was found into a setting's check."""

from __future__ import annotations

import configparser
from collections.abc import Callable

from generator.model.setting import Setting
from generator.verify.verdicts import Check, Verdict, check_of

OK, DIFFERS, MISSING = Verdict.OK, Verdict.DIFFERS, Verdict.MISSING


def config_lines(text: str) -> list[str]:
    return [
        line.strip()
        for line in text.splitlines()
        if line.strip() and not line.lstrip().startswith(("#", ";"))
    ]


def last_assignment(
    files: list[tuple[str, str]], match: Callable[[str], str | None]
) -> tuple[str, str] | None:
    """(value, file) of the last line for which ``match`` returns a value."""
    found = None
    for path, text in files:
        for line in config_lines(text):
            value = match(line)
            if value is not None:
                found = (value, path)
    return found


def verdict_of(
    setting: Setting, found: tuple[str, str] | None, expected: str | None = None
) -> Check:
    if found is None:
        return check_of(setting, "not configured", MISSING, "no file of the image sets it")
    value, path = found
    good = " ".join(value.split()) == " ".join(
        (setting.value if expected is None else expected).split()
    )
    return check_of(
        setting,
        f"{value} ({path})",
        OK if good else DIFFERS,
        "" if good else f"{path} sets another value and is read last",
    )


def ini_value(files: list[tuple[str, str]], section: str, option: str) -> tuple[str, str] | None:
    found = None
    for path, text in files:
        parser = configparser.ConfigParser(
            strict=False, interpolation=None, comment_prefixes=("#", ";")
        )
        parser.optionxform = str  # type: ignore[assignment,method-assign]
        try:
            parser.read_string(text)
        except configparser.Error:
            continue
        if parser.has_option(section, option):
            found = (parser.get(section, option), path)
    return found
