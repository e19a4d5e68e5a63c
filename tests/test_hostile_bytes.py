"""Bytes that are not UTF-8 never reach a report raw (issue 41, family 4): a committed tree's
names and files in `gen matrix --check` and `gen diff --format markdown`, a node's os-release in
the preflight result and the goldtune.prom made from it, the live collector's output. Each
such byte is shown escaped (``\\xNN`` in the reports, ``?`` on the node). On main the report
carried the raw byte 0xff, and the node's result and textfile the os-release's bytes."""

from __future__ import annotations

import hashlib
import json
import subprocess
import sys
from pathlib import Path

from generator.textsafe import decoded, markdown_code, printable, printable_lines, utf8_text
from generator.verify.prometheus import escape_label_value
from tests.test_preflight import PREFLIGHT_DATA, RESULT, bundle, detected, dgx_tree, run_script
from tests.test_report_script import data_file, run_report

HOSTILE = b"bad \xff\xfe \xc3( bytes\x1b[2J\n"


def gen_bytes(*args: str, cwd: Path) -> subprocess.CompletedProcess[bytes]:
    """The real command, its output as bytes: what a CI log or a comment would carry."""
    return subprocess.run(
        [sys.executable, "-m", "generator", *args], capture_output=True, cwd=cwd, check=False
    )


def assert_utf8_text(raw: bytes) -> str:
    text = raw.decode("utf-8")  # raises on a raw byte that is not UTF-8
    assert "\x1b" not in text and "\ufffd" not in text
    return text


def add_listed_file(bundle_dir: Path, name: str, content: bytes) -> None:
    (bundle_dir / name).write_bytes(content)
    manifest = json.loads((bundle_dir / "manifest.json").read_text())
    digest = hashlib.sha256(content).hexdigest()
    manifest["files"].append({"path": name, "sha256": digest, "mode": "0644"})
    (bundle_dir / "manifest.json").write_text(json.dumps(manifest))


def test_escaping_shows_each_undecodable_byte_as_itself() -> None:
    text = decoded(HOSTILE)
    assert printable(text) == "bad \\xff\\xfe \\xc3( bytes\\x1b[2J\\x0a"
    assert printable_lines(text) == "bad \\xff\\xfe \\xc3( bytes\\x1b[2J\n"
    assert markdown_code(decoded(b"junk\xffname")) == "`junk\\xffname`"
    assert utf8_text("a\udcffb\ud800") == "a\\xffb\\ud800"
    escape_label_value(decoded(HOSTILE)).encode("utf-8")


def test_matrix_check_and_diff_markdown_write_utf8_only(tmp_path: Path) -> None:
    args = ["matrix", "--hw", "l4-inference", "--profile", "inference"]
    assert gen_bytes(*args, "-o", "bundles", cwd=tmp_path).returncode == 0
    committed = tmp_path / "bundles" / "l4-inference-inference"
    fresh = tmp_path / "fresh"
    assert gen_bytes(*args, "-o", str(fresh), cwd=tmp_path).returncode == 0
    add_listed_file(committed, "extra.conf", HOSTILE)
    (tmp_path / "bundles").joinpath(decoded(b"junk\xffname")).mkdir()
    done = gen_bytes(*args, "--check", "bundles", cwd=tmp_path)
    assert done.returncode == 1, done.stderr
    report = assert_utf8_text(done.stdout)
    assert report, done.stderr
    assert "junk\\xffname" in report and "bad \\xff\\xfe \\xc3( bytes" in report
    assert_utf8_text(done.stderr)
    old = fresh / "l4-inference-inference"
    diffed = gen_bytes("diff", str(old), str(committed), "--format", "markdown", cwd=tmp_path)
    assert diffed.returncode == 1, diffed.stderr
    assert "bad \\xff\\xfe \\xc3( bytes" in assert_utf8_text(diffed.stdout)
    terminal = gen_bytes("diff", str(old), str(committed), cwd=tmp_path)
    assert "bad \\xff\\xfe" in assert_utf8_text(terminal.stdout)


def test_a_node_os_release_that_is_not_utf8_keeps_goldtune_prom_utf8(tmp_path: Path) -> None:
    tree = dgx_tree(tmp_path / "tree")
    hardware = detected(tree)
    hardware.setdefault("os", {})["distro"] = "ubuntu-24.04"
    made = bundle(hardware, tmp_path, "node")
    (tree / "etc").mkdir(exist_ok=True)
    (tree / "etc/os-release").write_bytes(b'ID="ub\xffu\x1bntu"\nVERSION_ID="24.\xfe04"\n')
    _, output = run_script("preflight", made / PREFLIGHT_DATA, tree)
    result = (tree / RESULT).read_bytes()
    assert b"os.distro" in result, output
    assert result.decode("ascii").isprintable() or all(
        line.isprintable() for line in result.decode("ascii").replace("\t", " ").splitlines()
    )
    assert "ub?u?ntu-24.?04" in result.decode("ascii")
    report_dir = tmp_path / "report"
    report_dir.mkdir()
    (report_dir / "preflight").write_bytes(result)
    done = run_report(report_dir, "prometheus", str(data_file(report_dir)))
    assert done.returncode == 0, done.stderr
    textfile = (report_dir / "textfile" / "goldtune.prom").read_bytes()
    assert 'actual="ub?u?ntu-24.?04"' in assert_utf8_text(textfile)


def test_verify_prometheus_of_a_snapshot_with_foreign_bytes_is_utf8(tmp_path: Path) -> None:
    from generator.model import layout
    from tests.test_verify import make_bundle

    made = make_bundle(
        tmp_path, [("sysctl", "vm.swappiness", "1"), ("service", layout.PREFLIGHT_UNIT, "enable")]
    )
    from tests.test_verify import snapshot_text

    records = [
        ("sysctl", "vm.swappiness", "1"),
        ("unit-enabled", layout.PREFLIGHT_UNIT, "enabled"),
        ("preflight", "line", "state\tmismatch"),
        ("preflight", "line", "mismatch\tos.distro\tubuntu-24.04\tUBUNTU-24.04\t-"),
    ]
    snapshot = tmp_path / "snap.txt"
    text = snapshot_text(*records, noise=True).encode()
    snapshot.write_bytes(text.replace(b"UBUNTU", b"ub\xff\x1buntu"))
    args = ["verify", str(made), "--snapshot", str(snapshot), "--format", "prometheus"]
    done = gen_bytes(*args, cwd=tmp_path)
    assert done.returncode in (0, 1), done.stderr
    assert_utf8_text(done.stderr)
    done.stdout.decode("utf-8")


def test_matrix_check_json_and_yaml_keep_bytes_escaped(tmp_path: Path) -> None:
    """A name that is not UTF-8 in --json: JSON's own escape of it, the output ASCII."""
    args = ["matrix", "--hw", "l4-inference", "--profile", "inference"]
    assert gen_bytes(*args, "-o", "bundles", cwd=tmp_path).returncode == 0
    (tmp_path / "bundles").joinpath(decoded(b"x\xffy")).mkdir()
    done = gen_bytes(*args, "--check", "bundles", "--json", cwd=tmp_path)
    assert done.returncode == 1
    json.loads(done.stdout.decode("ascii"))
