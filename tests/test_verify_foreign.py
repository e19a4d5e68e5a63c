"""Live `gen verify` on a foreign bundle (issue 29, family 2): it runs the collector as root, so
a bundle whose files do not match its manifest is refused, each collector word is held to what
its kind may read, and the collector reads only regular files, bounded, without waiting.

Each test fails on the integration base of issue 29: there one added line in collect.conf (and
plan.json) printed a 0600 file, and naming a FIFO or /dev/zero made the collector hang."""

from __future__ import annotations

import hashlib
import json
import os
import signal
import subprocess
from pathlib import Path

import pytest

from generator.bundle.write import write_bundle
from generator.errors import InputError
from generator.model.collect_data import check_collect_data
from generator.model.layout import COLLECT_DATA, MANIFEST, PLAN_FILE, in_overlay
from generator.model.setting import Plan, Setting
from generator.render.render import render_bundle
from generator.verify.run import collector_script, run_verify

SECRET = "the-secret-line-of-a-0600-file"
PLAN = Plan("test-hw", "inference", (Setting("sysctl", "vm.swappiness", "1", "r"),))


def secret_file(tmp_path: Path) -> Path:
    secret = tmp_path / "shadow"
    secret.write_text(SECRET + "\n")
    secret.chmod(0o600)
    return secret


def forge(bundle: Path, secret: Path, rehash: bool) -> None:
    """What a hostile author adds: a sysfs setting naming the secret in plan.json and its line in
    collect.conf; with ``rehash`` the manifest's digests are made to match again."""
    plan = json.loads((bundle / PLAN_FILE).read_text())
    plan["settings"].append(
        {**plan["settings"][0], "kind": "sysfs", "key": str(secret), "value": "x"}
    )
    (bundle / PLAN_FILE).write_text(json.dumps(plan))
    data = bundle / in_overlay(COLLECT_DATA)
    data.write_text(data.read_text() + f"sysfs\t{secret}\n")
    if rehash:
        manifest = json.loads((bundle / MANIFEST).read_text())
        for entry in manifest["files"]:
            entry["sha256"] = hashlib.sha256((bundle / entry["path"]).read_bytes()).hexdigest()
        (bundle / MANIFEST).write_text(json.dumps(manifest))


@pytest.mark.parametrize("rehash", [False, True], ids=["tampered", "rehashed"])
def test_live_verify_of_a_forged_bundle_prints_no_secret(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], rehash: bool
) -> None:
    """An edited bundle is refused by its manifest; one whose manifest was made to match is
    refused by the word's grammar (a sysfs word names a path under /sys). Nothing is collected."""
    bundle = write_bundle(render_bundle(PLAN), tmp_path / "bundle")
    forge(bundle, secret_file(tmp_path), rehash)
    with pytest.raises(InputError) as refused:
        run_verify(bundle, as_json=True)
    assert ("manifest" in str(refused.value)) is not rehash
    assert "/sys" in str(refused.value) or not rehash
    assert SECRET not in capsys.readouterr().out + str(refused.value)


@pytest.mark.parametrize(
    "line",
    [
        "sysfs\t/etc/shadow",
        "sysfs\t/sys/../etc/shadow",
        "sysfs\t/sys/.*/x",
        "sysfs\t/sys/*/*/*/*/*",  # a walk of all /sys
        "sysctl\t../../etc/shadow",
        "sysctl\tkernel/../../../etc/shadow",
        "sysctl\t/etc/shadow",
        "modparams\t../../../etc/shadow",
        "modparams\tnvidia/../../x",
        "modules\t-k",
        "irq\t..",
        "irq\t../../../etc",
        "acs\tnic:..",
        "confs\t/etc/shadow",
        "confs\t/proc/kmsg",
        "units\t--all",
        "limits\t-x",
        "manager\tA=B",
        "tool\te",
    ],
)
def test_each_word_is_held_to_what_its_kind_reads(line: str) -> None:
    data = render_bundle(PLAN)[in_overlay(COLLECT_DATA)][0].decode() + line + "\n"
    with pytest.raises(InputError):
        check_collect_data(data, "collect.conf")


def run_collector(
    tmp_path: Path, extra: str, script: list[str] | None = None
) -> subprocess.CompletedProcess[str]:
    """The collector (or ``script``) run in a session of its own, ended whole if it hangs."""
    data = render_bundle(PLAN)[in_overlay(COLLECT_DATA)][0].decode() + extra
    (tmp_path / "collect.conf").write_text(data)
    command = ["sh", *(script or [str(collector_script()), str(tmp_path / "collect.conf")])]
    # a session of its own: a collector that hangs (the base of issue 29) is ended whole
    with subprocess.Popen(
        command,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        stdin=subprocess.DEVNULL,
        text=True,
        start_new_session=True,
    ) as collector:
        try:
            out, err = collector.communicate(timeout=60)
        except subprocess.TimeoutExpired:
            os.killpg(collector.pid, signal.SIGKILL)
            collector.communicate()
            pytest.fail("the collector hung")
    return subprocess.CompletedProcess(command, collector.returncode, out, err)


def collector_function(name: str) -> str:
    """One function of the collector, from ``name() {`` to its closing brace."""
    lines = collector_script().read_text().splitlines(keepends=True)
    start = lines.index(f"{name}() {{\n")
    return "".join(lines[start : lines.index("}\n", start) + 1])


def test_the_collector_never_opens_a_fifo_a_device_or_a_link(tmp_path: Path) -> None:
    """read_value, through which the collector reads every sysctl, sysfs, module parameter and
    IRQ file: a FIFO is not waited on, /dev/zero not read without end, a link not followed (to
    the secret), a large file read only up to 64 KiB."""
    fifo = tmp_path / "fifo"
    os.mkfifo(fifo)
    link = tmp_path / "link"
    link.symlink_to(secret_file(tmp_path))
    large = tmp_path / "large"
    large.write_bytes(b"y" * (1 << 20))
    words = (fifo, Path("/dev/zero"), link, large)
    script = collector_function("squeeze") + collector_function("read_value")
    script += "".join(f"read_value '{word}'; printf '%s\\n' \"$value\"\n" for word in words)
    (tmp_path / "read.sh").write_text(script)
    result = run_collector(tmp_path, "", [str(tmp_path / "read.sh")])
    assert result.returncode == 0, result.stderr
    values = result.stdout.splitlines()
    assert values[:3] == ["!unreadable"] * 3
    assert SECRET not in result.stdout
    assert len(values[3]) == 65536


def test_a_genuine_bundle_is_still_verified_live(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    bundle = write_bundle(render_bundle(PLAN), tmp_path / "bundle")
    assert run_verify(bundle, as_json=True) in (0, 1)
    report = json.loads(capsys.readouterr().out)
    assert report["source"] == "live"
    assert any(c["key"] == "vm.swappiness" for c in report["checks"])


@pytest.mark.parametrize(
    "line",
    [
        "sysfs\t/etc/shadow",
        "sysfs\t/sys/../etc/shadow",
        "sysctl\t../../etc/shadow",
        "sysctl\t/etc/shadow",
        "modparams\tnvidia/../../x",
        "irq\t..",
        "acs\tnic:..",
        "confs\t/etc/shadow",
        "units\t--all",
    ],
)
def test_the_collector_itself_refuses_a_word_out_of_its_kind(tmp_path: Path, line: str) -> None:
    """The bundle's collector run by hand holds the words as verify does (nothing read)."""
    data = render_bundle(PLAN)[in_overlay(COLLECT_DATA)][0].decode() + line + "\n"
    (tmp_path / "collect.conf").write_text(data)
    result = subprocess.run(
        ["sh", str(collector_script()), "--check", str(tmp_path / "collect.conf")],
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
    )
    assert result.returncode == 2, result.stderr
    assert "not a word of what" in result.stderr
