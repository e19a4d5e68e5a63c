"""Reviewable diffs (issue 30, item 7): tables wrapped to the terminal, NICs paired by role and
position, one definition of equal for `gen diff` and the fleet gate, notes filtered like settings.

Each test here failed before its fix."""

from __future__ import annotations

import os
import pty
import re
import subprocess
import sys

from generator.commands.diff import compute_diff, format_terminal
from generator.table import format_table
from tests.conftest import REPO

ESCAPE = re.compile(r"\x1b\[[0-9;]*m")


def gen_on_terminal(*args: str, columns: int) -> tuple[int, str]:
    """Run gen with stdout on a pseudo-terminal of ``columns`` columns; its text, escapes off."""
    leader, follower = pty.openpty()
    env = {**os.environ, "PYTHONPATH": str(REPO), "COLUMNS": str(columns)}
    process = subprocess.Popen(
        [sys.executable, "-m", "generator", *args],
        stdout=follower,
        stderr=subprocess.DEVNULL,
        cwd=REPO,
        env=env,
    )
    os.close(follower)
    chunks = []
    while True:
        try:
            chunk = os.read(leader, 65536)
        except OSError:  # the other end closed
            break
        if not chunk:
            break
        chunks.append(chunk)
    os.close(leader)
    code = process.wait(timeout=120)
    text = b"".join(chunks).decode("utf-8").replace("\r\n", "\n")
    return code, ESCAPE.sub("", text)


def test_diff_on_a_terminal_fits_its_width():
    code, text = gen_on_terminal(
        "diff", "--hw", "dgx-a100", "--hw", "dgx-h100", "--profile", "training", columns=100
    )
    assert code == 1
    lines = text.splitlines()
    assert max(map(len, lines)) <= 100, max(lines, key=len)
    assert "intel_iommu" in text  # the rows are all there, wrapped


def test_verify_on_a_terminal_fits_its_width(tmp_path):
    from generator.commands.generate import generate_bundle

    bundle = generate_bundle("dgx-h100", "training", tmp_path / "b")
    (tmp_path / "root").mkdir()
    code, text = gen_on_terminal(
        "verify", str(bundle), "--root", str(tmp_path / "root"), columns=90
    )
    assert code == 1
    table = text.split("\n\n", 1)[0].splitlines()  # the summary line after it is prose
    assert any(line.startswith("missing") for line in table)
    assert max(map(len, table)) <= 90, max(table, key=len)


def test_table_to_a_pipe_is_not_wrapped():
    rows = [["a", "x" * 300]]
    assert format_table(["K", "V"], rows) == "K  V\n" + "a  " + "x" * 300


def test_wrapped_rows_keep_their_columns():
    table = format_table(["KEY", "WHY"], [["k", "word " * 30]], width=40).splitlines()
    assert len(table) > 2 and all(len(line) <= 40 for line in table)
    assert all(line.startswith("     ") for line in table[2:])  # continuation under WHY


def test_format_terminal_wraps_to_the_given_width():
    difference = compute_diff((), ("dgx-a100", "dgx-h100"), ("training",))
    wide = format_terminal(difference, colour=False)
    narrow = format_terminal(difference, colour=False, width=120)
    assert max(map(len, wide.splitlines())) > 120
    assert max(map(len, narrow.splitlines())) <= 120


def explain_notes(capsys, *, kinds: tuple[str, ...] = (), keys: tuple[str, ...] = ()) -> list[str]:
    from generator.commands.explain import run_explain

    run_explain("dgx-h100", "inference", keys, kinds, as_json=False)
    return [line for line in capsys.readouterr().out.splitlines() if line.startswith("note (")]


def test_explain_filters_notes_by_kind(capsys):
    every = explain_notes(capsys)
    assert any(line.startswith("note (gpu.compute-mode)") for line in every)
    irq_only = explain_notes(capsys, kinds=("irq",))
    assert irq_only != every
    assert not any(line.startswith("note (gpu.compute-mode)") for line in irq_only)


def test_explain_filters_notes_by_key(capsys):
    notes = explain_notes(capsys, keys=("ibp24s0",))
    assert notes and all("ibp24s0" in line for line in notes)


def reworded(plan, rule: str):
    """The plan with the reasons of one rule's settings reworded: what a new goldtune that
    explains a value better writes, with no value changed."""
    settings = tuple(
        s._replace(reason=s.reason + " (reworded)") if s.rule == rule else s for s in plan.settings
    )
    return plan._replace(settings=settings)


def test_stale_in_the_gate_is_never_no_change_in_the_diff(tmp_path):
    from generator.bundle.read import read_bundle
    from generator.commands import fleet_check
    from generator.commands.diff import diff_bundles, format_markdown
    from generator.commands.generate import generate_bundle, plan_for
    from generator.render.render import render_bundle

    committed = read_bundle(generate_bundle("dgx-h100", "training", tmp_path / "b"))
    plan = plan_for("dgx-h100", "training", None)
    assert fleet_check.compare("b", committed, plan, render_bundle(plan)).state == "current"
    newer = reworded(plan, "irq.pin-nics")
    files = render_bundle(newer)
    state = fleet_check.compare("b", committed, newer, files)
    assert state.state == "stale" and state.difference is not None
    assert not state.difference.same
    assert "No change." not in format_markdown(state.difference)
    assert "(reworded)" in format_markdown(state.difference)
    # gen diff of the same two bundles agrees with the gate.
    difference = diff_bundles(committed, fleet_check.rendered_bundle(tmp_path, newer, files))
    assert not difference.same


def test_a_version_stamp_alone_is_equal_for_both(tmp_path):
    from generator.bundle.equal import differing_paths
    from generator.bundle.read import read_bundle
    from generator.commands.diff import diff_bundles
    from generator.commands.generate import generate_bundle

    root = generate_bundle("dgx-h100", "training", tmp_path / "b")
    other = generate_bundle("dgx-h100", "training", tmp_path / "c")
    for path in (root / "manifest.json", root / "plan.json"):
        text = path.read_text()
        import generator

        path.write_text(text.replace(f'"{generator.__version__}"', '"0.0.1"'))
    # plan.json's digest in the manifest no longer matches: refresh it as a release would.
    import hashlib
    import json

    manifest = json.loads((root / "manifest.json").read_text())
    for entry in manifest["files"]:
        if entry["path"] == "plan.json":
            entry["sha256"] = hashlib.sha256((root / "plan.json").read_bytes()).hexdigest()
    (root / "manifest.json").write_text(json.dumps(manifest, indent=2, sort_keys=True) + "\n")
    old, new = read_bundle(root), read_bundle(other)
    assert differing_paths(old, new) == []
    assert diff_bundles(old, new).same


def test_generation_diff_pairs_renamed_nics_by_role_and_position():
    difference = compute_diff((), ("dgx-a100", "dgx-h100"), ("training",))
    by_target = {(c.kind, c.key): c for c in difference.changes}
    first = by_target[("irq", "ibp24s0")]
    assert (first.status, first.old_key, first.nic) == ("changed", "ib0", "compute NIC 1")
    # every NIC's list is read on the node (irq.py), so the pair is the same value renamed
    assert (first.old, first.new) == ("local", "local")
    assert first.shown_key == "ib0 → ibp24s0 (compute NIC 1)"
    acs = by_target[("pcie-acs", "nic ibp24s0")]
    assert (acs.status, acs.old_key) == ("changed", "nic ib0")  # same value, renamed key
    # No setting of a renamed NIC is one removed and one added.
    assert not any(
        c.status == "removed" and c.key.startswith(("ib", "nic ib")) for c in difference.changes
    )
    text = format_terminal(difference, colour=False)
    assert "ib0 → ibp24s0 (compute NIC 1)" in text


def test_bundles_carry_their_nics_for_the_pairing(tmp_path):
    from generator.bundle.read import read_bundle
    from generator.commands.diff import diff_bundles
    from generator.commands.generate import generate_bundle

    old = read_bundle(generate_bundle("dgx-a100", "training", tmp_path / "a"))
    new = read_bundle(generate_bundle("dgx-h100", "training", tmp_path / "h"))
    assert old.plan.nics[0] == ("ib0", "compute")
    changes = {(c.kind, c.key): c for c in diff_bundles(old, new).changes}
    assert changes[("irq", "ibp24s0")].old_key == "ib0"


def test_pairing_keeps_names_on_both_sides_and_pairs_the_rest_in_order():
    from generator.commands.nicpair import key_translator, pair_nics
    from generator.model.setting import NicRole

    old = tuple(NicRole(n, "compute") for n in ("a", "b", "ib1"))
    new = tuple(NicRole(n, "compute") for n in ("b", "ib1", "ib10"))
    pairs = pair_nics(old, new)
    assert [(p.old, p.new, p.where) for p in pairs] == [("a", "ib10", "compute NIC 3")]
    translate = key_translator(pair_nics((NicRole("ib1", "compute"),), (NicRole("x", "compute"),)))
    assert translate("nic ib1")[0] == "nic x"
    assert translate("nic ib10") == ("nic ib10", None)  # ib1 is not the start of ib10
    assert translate("net.ipv4.conf.ib1.arp_ignore")[0] == "net.ipv4.conf.x.arp_ignore"
