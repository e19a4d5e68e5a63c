"""The boot scripts read every value with the shell's own builtins (issue 43: no sed, readlink or
subshell per value), so the edge cases a per-value process used to absorb are pinned here: fields
that are empty, whitespace only or padded with blanks and tabs, sysfs files that are empty or
lack their newline, ports that lack a capability. Each expectation is what the scripts did when
every value went through `sed`, `readlink -f` or `$(first_line ...)`."""

from __future__ import annotations

from pathlib import Path

from test_gpu_setup_amd import run_setup
from test_scripts import (
    ACS_DATA,
    BARE_METAL,
    BARE_ROOT,
    DOWN_GPU,
    GPU1,
    ROOT_PORT,
    UPSTREAM,
    pci_machine,
    run_acs,
    run_fake_gpus,
    writes,
)

# index, name, clocks.max.sm, power.min_limit, power.max_limit, power.default_limit, ECC, MIG,
# persistence: padded with blanks and tabs, empty, whitespace only
PADDED = "\t0 ,  NVIDIA L4\t, 2040 ,\t40.00, 72.00 ,   , Enabled\t, [N/A] ,  Enabled "
EMPTY = "1,,,,,,,,"
BLANK = " 2 , \t , \t, ,\t,  ,   ,  , \t"
NO_INDEX = " \t , NVIDIA L4, 2040, 40.00, 72.00, 72.00, Enabled, [N/A], Enabled"


def test_gpu_setup_reads_each_field_trimmed(tmp_path: Path) -> None:
    """A padded field is the value within it; an empty or whitespace-only one is unknown."""
    data = "ecc\ton\nclocks\tmax\npower-limit\t90%\n"
    result, made = run_fake_gpus(tmp_path, data, [PADDED, EMPTY, BLANK, NO_INDEX])
    assert result.returncode == 0, result.stdout
    # the row without an index is no GPU: nothing is said of it, nothing done to it
    assert made == ["-i 0 -lgc 2040,2040"], result.stdout
    said = result.stdout.splitlines()
    assert (
        "gt-gpu: GPU 0: NVIDIA L4; max SM clock 2040 MHz; power limit 40-72 W, default ? W; "
        "ECC Enabled; MIG [N/A]"
    ) in said
    assert "gt-gpu: GPU 0: ECC already Enabled" in said
    assert "gt-gpu: GPU 0: default power limit unknown; power limit unchanged" in said
    for index in (1, 2):
        assert (
            f"gt-gpu: GPU {index}: ; max SM clock ? MHz; power limit ?-? W, default ? W; ECC ; MIG "
        ) in said
        assert f"gt-gpu: GPU {index}: ECC not supported (); skipped" in said
        assert f"gt-gpu: GPU {index}: maximum SM clock unknown; clocks left to the driver" in said
    assert len([line for line in said if "max SM clock" in line]) == 3


def test_gpu_setup_counts_a_blank_persistence_mode_as_off(tmp_path: Path) -> None:
    result, made = run_fake_gpus(tmp_path, "persistence\ton\n", [PADDED, BLANK, NO_INDEX])
    assert result.returncode == 0, result.stdout
    assert made == ["-pm 1"]
    assert "persistence: off on 1 GPU(s) (nvidia-persistenced not active)" in result.stdout


def test_gpu_setup_amd_reads_empty_blank_and_unterminated_sysfs_files(tmp_path: Path) -> None:
    root = tmp_path / "root/sys/bus/pci/drivers/amdgpu"
    hwmon = root / "0000:05:00.0/hwmon/hwmon3"
    hwmon.mkdir(parents=True)
    (root / "0000:05:00.0/current_compute_partition").write_text("")
    (hwmon / "power1_cap_default").write_text("")  # empty: no default, no percentage of it
    (hwmon / "power1_cap_min").write_text("  \n")
    (hwmon / "power1_cap_max").write_text("750000000")  # no newline: still read
    second = root / "0000:25:00.0"
    (second / "hwmon/hwmon3").mkdir(parents=True)
    (second / "hwmon/hwmon3/power1_cap_default").write_text("750000000")
    (second / "hwmon/hwmon3/power1_cap_min").write_text(" \t")
    (second / "hwmon/hwmon3/power1_cap_max").write_text("600000000\n")
    result, calls = run_setup(tmp_path, "power-limit\t90%\ncompute-partition\tCPX\n", gpus=0)
    assert result.returncode == 0, result.stdout
    # the second card: 90 % of its 750 W default (read without a newline), capped at its 600 W
    assert calls == ["set --gpu 0000:25:00.0 --power-cap 600"], result.stdout
    said = result.stdout.splitlines()
    assert "gt-gpu: GPU 0000:05:00.0: default power cap unknown; power cap unchanged" in said
    absent = "no compute partition modes (current_compute_partition absent); skipped"
    assert f"gt-gpu: GPU 0000:05:00.0: {absent}" in said
    assert f"gt-gpu: GPU 0000:25:00.0: {absent}" in said


def test_gpu_setup_amd_caps_at_an_unterminated_maximum(tmp_path: Path) -> None:
    hwmon = tmp_path / "root/sys/bus/pci/drivers/amdgpu/0000:05:00.0/hwmon/hwmon3"
    hwmon.mkdir(parents=True)
    (hwmon / "power1_cap_default").write_text("750000000\n")
    (hwmon / "power1_cap_min").write_text("")
    (hwmon / "power1_cap_max").write_text("500000000")
    result, calls = run_setup(tmp_path, "power-limit\t700\n", gpus=0)
    assert result.returncode == 0, result.stdout
    assert calls == ["set --gpu 0000:05:00.0 --power-cap 500"], result.stdout


def test_pcie_acs_skips_a_gpu_with_an_empty_or_blank_vendor(tmp_path: Path) -> None:
    tree, pci = pci_machine(tmp_path / "tree")
    (tree / "sys/bus/pci/devices" / GPU1 / "vendor").write_text("")
    result = run_acs(tmp_path, tree, pci, BARE_METAL, ACS_DATA)
    assert result.returncode == 0, result.stdout
    assert f"{BARE_ROOT}" not in result.stdout  # GPU1's only port was never looked at
    assert sorted(writes(pci)) == [
        f"{ROOT_PORT} ECAP_ACS+0x6.w=0000",
        f"{DOWN_GPU} ECAP_ACS+0x6.w=0000",
    ]
    (tree / "sys/bus/pci/devices" / GPU1 / "vendor").write_text(" \n")
    (tmp_path / "again").mkdir()
    result = run_acs(tmp_path / "again", tree, pci, BARE_METAL, ACS_DATA)
    assert f"{BARE_ROOT}" not in result.stdout


def test_pcie_acs_leaves_a_port_without_a_pci_express_capability_alone(tmp_path: Path) -> None:
    """setpci reads both registers in one run; without the first it prints nothing."""
    tree, pci = pci_machine(tmp_path / "tree")
    (pci / ROOT_PORT / "CAP_EXP+0x2.w").unlink()
    (pci / UPSTREAM / "ECAP_ACS+0x6.w").unlink()  # an upstream port is never written anyway
    result = run_acs(tmp_path, tree, pci, BARE_METAL, ACS_DATA)
    assert result.returncode == 0, result.stdout
    assert f"gt-acs: {ROOT_PORT}: no PCI Express capability; left alone" in result.stdout
    assert writes(pci) == [f"{DOWN_GPU} ECAP_ACS+0x6.w=0000"]
    assert f"gt-acs: {BARE_ROOT}: no ACS capability; nothing to change" in result.stdout
    assert "gt-acs: 1 ports had ACS turned off" in result.stdout


def test_pcie_acs_reads_a_blank_acs_control_as_no_capability(tmp_path: Path) -> None:
    tree, pci = pci_machine(tmp_path / "tree")
    (pci / DOWN_GPU / "ECAP_ACS+0x6.w").write_text(" \n")
    result = run_acs(tmp_path, tree, pci, BARE_METAL, ACS_DATA)
    assert result.returncode == 0, result.stdout
    assert f"gt-acs: {DOWN_GPU}: no ACS capability; nothing to change" in result.stdout
    assert writes(pci) == [f"{ROOT_PORT} ECAP_ACS+0x6.w=0000"]
