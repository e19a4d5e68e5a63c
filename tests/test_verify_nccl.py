"""gen verify for /etc/nccl.conf (issue 18): read as NCCL's setEnvFile reads it (the first
NAME=value of a name wins), live from the collector's records and in an image root."""

from __future__ import annotations

import hashlib
import os
import subprocess
from pathlib import Path

from test_verify_runtime import collector_functions

from generator.bundle.read import Bundle, ManifestFile
from generator.model import layout
from generator.model.layout import NCCL_CONF, RCCL_CONF
from generator.model.setting import Plan, Setting
from generator.verify import health, image, image_runtime, live
from generator.verify.snapshot import Snapshot
from generator.verify.verdicts import Check, Verdict

IFNAME = Setting("nccl", "NCCL_SOCKET_IFNAME", "=ens3", "because", rule="network.nccl")
HCA = Setting("nccl", "NCCL_IB_HCA", "=mlx5_0,mlx5_10", "because", rule="network.nccl")
BUNDLE = Bundle(Path("/nonexistent"), Plan("box", "training", (IFNAME, HCA)))
GOOD = "# why\nNCCL_SOCKET_IFNAME==ens3\nNCCL_IB_HCA==mlx5_0,mlx5_10\n"
# NCCL keeps the first assignment (setenv without overwrite): the later, right one is ignored
SHADOWED = "NCCL_SOCKET_IFNAME=ens\nNCCL_SOCKET_IFNAME==ens3\n"


def machine(state: str | None, text: str = "") -> live.Live:
    records: dict[str, list[tuple[str, str]]] = {}
    if state is not None:
        records["conf"] = [(NCCL_CONF, state)]
        records["conf-line"] = [(NCCL_CONF, line) for line in text.splitlines()]
    return live.Live.of(Snapshot(records=records), BUNDLE)


def test_live_nccl_conf_as_nccl_reads_it() -> None:
    assert live.check_nccl(IFNAME, machine("present", GOOD)).verdict == Verdict.OK
    assert live.check_nccl(HCA, machine("present", GOOD)).verdict == Verdict.OK
    shadowed = live.check_nccl(IFNAME, machine("present", SHADOWED))
    assert (shadowed.verdict, shadowed.actual) == (Verdict.DIFFERS, "ens")
    unset = live.check_nccl(HCA, machine("present", SHADOWED))
    assert unset.verdict == Verdict.MISSING and "does not set NCCL_IB_HCA" in unset.reason
    commented = live.check_nccl(HCA, machine("present", "#NCCL_IB_HCA==mlx5_0,mlx5_10\n"))
    assert commented.verdict == Verdict.MISSING
    assert live.check_nccl(IFNAME, machine("!absent")).verdict == Verdict.MISSING
    assert live.check_nccl(IFNAME, machine(None)).verdict == Verdict.NOT_APPLICABLE


def test_image_nccl_conf_as_nccl_reads_it(tmp_path: Path) -> None:
    (tmp_path / "etc").mkdir()
    conf = tmp_path / NCCL_CONF.lstrip("/")
    conf.write_text(GOOD)
    assert image_runtime.check_nccl(HCA, image.Image(tmp_path)).verdict == Verdict.OK
    conf.write_text(SHADOWED)
    assert image_runtime.check_nccl(IFNAME, image.Image(tmp_path)).verdict == Verdict.DIFFERS
    conf.unlink()
    assert image_runtime.check_nccl(IFNAME, image.Image(tmp_path)).verdict == Verdict.MISSING


def collect_confs(*paths: Path) -> list[list[str]]:
    script = (
        'rec() { printf \'%s\\t%s\\t%s\\n\' "$1" "$2" "$3"; }\nset -f\n'
        + collector_functions("collect_confs")
        + 'collect_confs "$@"\n'
    )
    result = subprocess.run(
        ["sh", "-c", script, "collect", *map(str, paths)],
        capture_output=True,
        text=True,
        timeout=20,
        check=True,
    )
    return [line.split("\t", 2) for line in result.stdout.splitlines()]


def test_the_collector_records_a_conf_file_line_by_line_and_reads_no_fifo_or_link(
    tmp_path: Path,
) -> None:
    conf = tmp_path / "nccl.conf"
    conf.write_text(GOOD + "NCCL_DEBUG=WARN\twith a tab")  # and no newline at the end
    os.mkfifo(tmp_path / "fifo.conf")
    (tmp_path / "link.conf").symlink_to(conf)
    records = collect_confs(
        conf, tmp_path / "fifo.conf", tmp_path / "link.conf", tmp_path / "absent.conf"
    )
    states = {key: value for section, key, value in records if section == "conf"}
    assert states == {
        str(conf): "present",
        str(tmp_path / "fifo.conf"): "!not a regular file",
        str(tmp_path / "link.conf"): "!not a regular file",
        str(tmp_path / "absent.conf"): "!absent",
    }
    lines = [value for section, key, value in records if section == "conf-line"]
    assert lines == [*GOOD.splitlines(), "NCCL_DEBUG=WARN\twith a tab"]
    files = [(key, value) for section, key, value in records if section == "file"]
    assert len(files) == 1 and files[0][0] == str(conf)
    assert files[0][1].endswith(f" {conf.stat().st_mode & 0o777:o}")


# --- a merged nccl.conf: the bundle's file, then install.sh's mark and the image's own lines ---

OURS = GOOD.encode()
OURS_FILE = ManifestFile("rootfs/etc/nccl.conf", hashlib.sha256(OURS).hexdigest(), 0o644)
MERGED_BUNDLE = Bundle(Path("/nonexistent"), BUNDLE.plan, files=(OURS_FILE,))
# what templates/scripts/install.sh's merge_nccl_conf writes after the bundle's lines
IMAGE_PART = (
    b"\n# The image's own lines, kept by goldtune after the bundle's: NCCL takes a name's first"
    b" value\nNCCL_TOPO_FILE=/opt/microsoft/ndv5/topo.xml\n"
)
# the image's lines first, then ours: NCCL would take the image's NCCL_SOCKET_IFNAME
NOT_OURS_FIRST = b"NCCL_SOCKET_IFNAME=eth0\n" + OURS + IMAGE_PART


def live_file_check(content: bytes) -> Check:
    digest = hashlib.sha256(content).hexdigest()
    records = {
        "file": [(NCCL_CONF, f"{digest} 644")],
        "conf": [(NCCL_CONF, "present")],
        "conf-line": [(NCCL_CONF, line) for line in content.decode().splitlines()],
    }
    [check] = health.check_files(MERGED_BUNDLE, Snapshot(records=records))
    return check


def image_file_check(tmp_path: Path, content: bytes) -> Check:
    (tmp_path / "etc").mkdir(exist_ok=True)
    conf = tmp_path / NCCL_CONF.lstrip("/")
    conf.write_bytes(content)
    conf.chmod(0o644)
    return image.check_file(OURS_FILE, image.Image(tmp_path))


def test_a_merged_nccl_conf_is_the_bundles_file_live_and_in_an_image(tmp_path: Path) -> None:
    for check in (
        live_file_check(OURS + IMAGE_PART),
        image_file_check(tmp_path, OURS + IMAGE_PART),
    ):
        assert check.verdict == Verdict.OK, check
        assert check.actual == "merged: the image's lines kept after the bundle's"
    for wrong in (NOT_OURS_FIRST, OURS.replace(b"ens3", b"ens4") + IMAGE_PART, OURS + b"x=1\n"):
        for check in (live_file_check(wrong), image_file_check(tmp_path, wrong)):
            assert check.verdict == Verdict.DIFFERS, (wrong, check)


def test_live_rccl_setting_is_judged_by_rccl_conf_not_nccl_conf() -> None:
    """An rccl setting reads /etc/rccl.conf's records (RCCL never reads nccl.conf); failed
    before: there was no rccl kind, and check_nccl read nccl.conf for every setting."""
    rccl = IFNAME._replace(kind="rccl")
    only_nccl = machine("present", GOOD)
    assert live.check_nccl(rccl, only_nccl).verdict == Verdict.NOT_APPLICABLE
    records = {
        "conf": [(RCCL_CONF, "present")],
        "conf-line": [(RCCL_CONF, line) for line in GOOD.splitlines()],
    }
    found = live.check_nccl(rccl, live.Live.of(Snapshot(records=records), BUNDLE))
    assert found.verdict == Verdict.OK
    absent = {"conf": [(RCCL_CONF, "!absent")]}
    missing = live.check_nccl(rccl, live.Live.of(Snapshot(records=absent), BUNDLE))
    assert missing.verdict == Verdict.MISSING and RCCL_CONF in missing.reason


# --- values resolved at boot (issue 38): the lines nccl-resolve writes between its marks ---

AT_BOOT = Setting(
    "nccl", "NCCL_IB_HCA", "boot/id=15b3:1021/gbps=400/count=2", "why", "network.nccl"
)
MARKS = f"{layout.NCCL_BOOT_BEGIN}\n{layout.NCCL_BOOT_END}\n"
BOOT_OURS = ("# why\nNCCL_SOCKET_IFNAME==ens3\n\n" + MARKS).encode()
BOOT_FILE = ManifestFile("rootfs/etc/nccl.conf", hashlib.sha256(BOOT_OURS).hexdigest(), 0o644)
WRITTEN = BOOT_OURS.replace(
    layout.NCCL_BOOT_END.encode(), b"NCCL_IB_HCA==mlx5_0,mlx5_3\n" + layout.NCCL_BOOT_END.encode()
)


def boot_machine(text: str) -> live.Live:
    records = {"conf": [(NCCL_CONF, "present")]}
    records["conf-line"] = [(NCCL_CONF, line) for line in text.splitlines()]
    return live.Live.of(Snapshot(records=records), Bundle(Path("/nonexistent"), BUNDLE.plan))


def test_a_value_resolved_at_boot_is_judged_by_the_lines_written_between_the_marks() -> None:
    """Fails before issue 38's verify: the plan's boot/... value was compared with the file."""
    check = live.check_nccl(AT_BOOT, boot_machine(WRITTEN.decode()))
    assert (check.verdict, check.actual) == (Verdict.OK, "=mlx5_0,mlx5_3"), check
    # none written: the unit found no port it could tell for sure; the journal says why
    none = live.check_nccl(AT_BOOT, boot_machine(BOOT_OURS.decode()))
    assert none.verdict == Verdict.MISSING and "journalctl -t goldtune-nccl-resolve" in none.reason
    # an earlier line NCCL reads first: the unit's list is not the one in effect
    shadowed = live.check_nccl(AT_BOOT, boot_machine("NCCL_IB_HCA=mlx5\n" + WRITTEN.decode()))
    assert (shadowed.verdict, shadowed.actual) == (Verdict.DIFFERS, "mlx5")
    # a file without the marks is not the bundle's
    assert live.check_nccl(AT_BOOT, boot_machine(GOOD)).verdict == Verdict.MISSING


def test_an_image_carries_the_marks_of_a_value_resolved_at_boot(tmp_path: Path) -> None:
    (tmp_path / "etc").mkdir()
    conf = tmp_path / NCCL_CONF.lstrip("/")
    conf.write_bytes(BOOT_OURS)
    check = image_runtime.check_nccl(AT_BOOT, image.Image(tmp_path))
    assert (check.verdict, check.actual) == (Verdict.OK, "resolved at boot"), check
    conf.write_text(GOOD)
    assert image_runtime.check_nccl(AT_BOOT, image.Image(tmp_path)).verdict == Verdict.MISSING


def test_nccl_conf_with_the_boot_lines_is_still_the_bundles_file(tmp_path: Path) -> None:
    """The file check takes the lines between the marks out, and only those."""
    bundle = Bundle(Path("/nonexistent"), BUNDLE.plan, files=(BOOT_FILE,))
    for content in (WRITTEN, WRITTEN + IMAGE_PART):
        records = {
            "file": [(NCCL_CONF, f"{hashlib.sha256(content).hexdigest()} 644")],
            "conf": [(NCCL_CONF, "present")],
            "conf-line": [(NCCL_CONF, line) for line in content.decode().splitlines()],
        }
        [check] = health.check_files(bundle, Snapshot(records=records))
        assert check.verdict == Verdict.OK, check
        (tmp_path / "etc").mkdir(exist_ok=True)
        conf = tmp_path / "etc/nccl.conf"
        conf.write_bytes(content)
        conf.chmod(0o644)
        assert image.check_file(BOOT_FILE, image.Image(tmp_path)).verdict == Verdict.OK
    # a line changed outside the marks is still a difference
    edited = WRITTEN.replace(b"==ens3", b"==ens4")
    conf.write_bytes(edited)
    assert image.check_file(BOOT_FILE, image.Image(tmp_path)).verdict == Verdict.DIFFERS
