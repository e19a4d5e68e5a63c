"""The render path does not parse its own user-data again where every value the template writes
from the plan is in the form a literal block carries unchanged (cloudinit.in_block_form): these
tests hold that such a document parses and gives back each value, on random values and on every
shipped bundle."""

from __future__ import annotations

import random
from typing import Any

import yaml

from generator.model import layout
from generator.render.cloudinit import (
    MERGE_HOW,
    boot_scripts_last,
    carried_unchanged,
    first_boot_files,
    in_block_form,
    plain_text,
)
from generator.render.engine import make_environment
from generator.render.firstboot import FirstBootScript
from generator.render.overlay import OverlayFile, overlay_files
from tests.bundle_digest import rendered, shipped

# YAML's indicators, blanks, quotes and escapes; rarely a character outside the plain form (a
# line break of another kind, non-ASCII, a control character)
ASCII = "ab   \t#:-'\"|>{}[]%@`!&*?,\\"
ODD = ["é", "\r", "\u2028", "\x85", "\x00", "\ufeff"]


def random_text(chance: random.Random) -> str:
    """A few lines, mostly of ASCII, ending in zero, one or two newlines."""
    lines = [
        "".join(
            chance.choice(ODD) if chance.random() < 0.005 else chance.choice(ASCII)
            for _ in range(chance.randint(0, 12))
        )
        for _ in range(chance.randint(1, 4))
    ]
    return "\n".join(lines) + chance.choice(["", "\n", "\n", "\n", "\n\n"])


def user_data(files: list[OverlayFile], script: str, header: str) -> str:
    """The real template, given these values and the fixed ones."""
    context: dict[str, Any] = {
        "header": header,
        "merge_how": MERGE_HOW,
        "first_boot_overlay": files,
        "first_boot_scripts": files[:1],
        "layout": layout,
        "first_boot": FirstBootScript(library=script, script=script),
        "first_boot_command": "true",
        "power_state": None,
    }
    return str(make_environment().get_template("user-data.j2").render(context))


def random_path(chance: random.Random) -> str:
    return "/etc/" + "".join(
        chance.choice(ODD) if chance.random() < 0.02 else chance.choice(ASCII) for _ in range(6)
    )


def test_a_document_of_plain_values_gives_back_every_value() -> None:
    """Random values: each document that in_block_form lets pass unparsed is parsed here;
    every file's path, mode and text and the script come back byte for byte."""
    chance = random.Random(43)  # noqa: S311 - a test's texts, reproducible
    unparsed = 0
    for _ in range(5000):
        texts = [random_text(chance) for _ in range(2)]
        modes = chance.choices(["0644", "0755", "0644", '06"4', "0644\n", "644 "], k=2)
        files = [
            OverlayFile("", random_path(chance), mode, text)
            for mode, text in zip(modes, texts, strict=True)
        ]
        document = user_data(files, texts[0], "header")
        if not in_block_form(files, [texts[0]], "header"):
            continue
        unparsed += 1
        data = yaml.safe_load(document)
        written = [
            (entry["path"], entry["permissions"], entry["content"]) for entry in data["write_files"]
        ]
        assert written[: len(files)] == [(item.target, item.mode, item.text) for item in files]
        assert written[len(files)][2] == texts[0]
    assert unparsed > 100  # the form is not so narrow that the test proves nothing


def test_values_a_literal_block_would_change_are_refused() -> None:
    for text in ["  leading blank\n", "no newline", "two newlines\n\n", "\n", ""]:
        assert not carried_unchanged(text), repr(text)
    for content in ["a\rb\n", "a\u2028b\n", "\u00e9\n", "a\x00\n"]:
        assert not plain_text(content), repr(content)
    plain = OverlayFile("", "/etc/x", "0644", "x\n")
    assert in_block_form([plain], ["x\n"], "header")
    assert not in_block_form([plain._replace(mode="0644\n")], [], "header")
    assert not in_block_form([plain], ["x"], "header")
    assert not in_block_form([plain], [], "header\nwrite_files: []")
    assert not in_block_form([plain._replace(target="/etc/\u2028x")], [], "header")


def test_every_shipped_bundles_user_data_is_plain_and_parses_back() -> None:
    """What check_user_data would assert by parsing, asserted here once: every shipped bundle's
    user-data parses and carries each first-boot file byte for byte, and its values are in the
    block's form, so the render path takes them without parsing."""
    for name, hardware, profile, distro in shipped():
        files = rendered(hardware, profile, distro)
        content = files[layout.USER_DATA][0]
        text = content.decode("utf-8")
        data = yaml.safe_load(text)
        configs, scripts = boot_scripts_last(first_boot_files(overlay_files(files)))
        written = {entry["path"]: entry for entry in data["write_files"]}
        for item in configs + scripts:
            entry = written[item.target]
            assert (entry["content"], entry["permissions"]) == (item.text, item.mode), name
        first_boot = [
            written[path]["content"] for path in (layout.FIRST_BOOT_SCRIPT, layout.FIRST_BOOT_LIB)
        ]
        header = text.splitlines()[1]
        assert in_block_form(configs + scripts, first_boot, header), name
