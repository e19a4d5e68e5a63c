"""gen verify for /etc/nccl.conf (issue 18): read as NCCL's setEnvFile reads it (the first
NAME=value of a name wins), live from the collector's records and in an image root."""

from __future__ import annotations

import os
import subprocess
from pathlib import Path

from test_verify_runtime import collector_functions

from generator.model.layout import NCCL_CONF
from generator.model.setting import Plan, Setting
from generator.verify import image, live
from generator.verify.snapshot import Snapshot
from generator.verify.verdicts import Bundle, Verdict

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
    assert image.check_nccl(HCA, image.Image(tmp_path)).verdict == Verdict.OK
    conf.write_text(SHADOWED)
    assert image.check_nccl(IFNAME, image.Image(tmp_path)).verdict == Verdict.DIFFERS
    conf.unlink()
    assert image.check_nccl(IFNAME, image.Image(tmp_path)).verdict == Verdict.MISSING


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
