"""The hostile-input corpus: every file ends in exit 2, one line naming the problem, nothing
written."""

from __future__ import annotations

import hashlib
import os
import subprocess
import sys
from pathlib import Path

import pytest

from tests.conftest import REPO

CORPUS = REPO / "tests" / "bad_inputs"

# file -> text the single error line must contain (the field path, or the file-level problem)
EXPECTED = {
    "billion-laughs.yaml": "line 1, column 4: invalid YAML: YAML anchors and aliases",
    "binary-garbage.yaml": "binary data",
    "cpu-unknown.yaml": "cpu.model: unknown CPU model",
    "distro-shell.yaml": "os.distro: invalid value",
    "distro-unknown.yaml": (
        "os.distro: unknown distribution 'centos-7' (known: almalinux-10, almalinux-8,"
    ),
    "duplicate-keys.yaml": "line 3, column 1: invalid YAML: duplicate key 'memory_gib'",
    "gpu-count-billion.yaml": "gpus[0].count:",
    "gpu-count-zero.yaml": "gpus[0].count:",
    "gpu-numa-count-mismatch.yaml": "gpus[0].numa_nodes:",
    "gpu-numa-out-of-range.yaml": "gpus[0].numa_nodes[1]: NUMA node 7 out of range",
    "gpu-unknown.yaml": "gpus[0].model: unknown GPU model",
    "memory-only-numa-negative.yaml": "memory_only_numa_nodes:",
    "name-traversal.yaml": "name: invalid value",
    "negative-memory.yaml": "memory_gib:",
    "nic-backtick.yaml": "nics[0].name: invalid value",
    "nic-dotdot.yaml": "nics[0].name: invalid value",
    "nic-duplicate.yaml": "nics[1].name: duplicate name 'eth0'",
    "nic-rdma-device-duplicate.yaml": "nics[1].rdma_device: duplicate rdma device 'mlx5_0'",
    "nic-rdma-device-list.yaml": "nics[0].rdma_device: invalid value",
    "nic-pci-address-uppercase.yaml": "nics[0].pci_address: invalid value",
    "nic-rdma-device-without-rdma.yaml": "nics[0].rdma_device: names an RDMA device, but the NIC",
    "nic-numa-out-of-range.yaml": "nics[0].numa_node: NUMA node 9 out of range",
    "nic-semicolon.yaml": "nics[0].name: invalid value",
    "nic-space.yaml": "nics[0].name: invalid value",
    "nic-subshell.yaml": "nics[0].name: invalid value",
    "nic-too-long.yaml": "nics[0].name: invalid value",
    "nic-unknown.yaml": "nics[0].model: unknown NIC model",
    "not-a-mapping.yaml": "expected a YAML mapping",
    "quoted-number.yaml": "memory_gib: expected int, got string",
    "string-for-number.yaml": "cpu.sockets: expected int, got string",
    "tabs.yaml": "line 2, column 1: invalid YAML",
    "unknown-key.yaml": "colour: unknown field",
    "unknown-system.yaml": "system: unknown reference system",
}


def test_corpus_and_table_agree():
    assert sorted(p.name for p in CORPUS.iterdir()) == sorted(EXPECTED)


def run_gen(hw: Path, output: Path) -> subprocess.CompletedProcess[str]:
    env = {**os.environ, "PYTHONPATH": str(REPO)}
    return subprocess.run(
        [
            sys.executable,
            "-m",
            "generator",
            "--hw",
            str(hw),
            "--profile",
            "inference",
            "-o",
            str(output),
        ],
        capture_output=True,
        text=True,
        env=env,
        timeout=60,
    )


def tree_digest(root: Path) -> str:
    digest = hashlib.sha256()
    for path in sorted(root.rglob("*")):
        digest.update(str(path.relative_to(root)).encode())
        if path.is_file():
            digest.update(path.read_bytes())
    return digest.hexdigest()


def assert_refused(result: subprocess.CompletedProcess[str], hw: Path, needle: str) -> None:
    assert result.returncode == 2, result.stdout + result.stderr
    assert "Traceback" not in result.stderr
    lines = result.stderr.strip().splitlines()
    assert len(lines) == 1, result.stderr
    assert str(hw) in lines[0] and needle in lines[0], lines[0]


@pytest.mark.parametrize("name", sorted(EXPECTED))
def test_hostile_file_creates_nothing(name: str, tmp_path: Path):
    output = tmp_path / "bundle"
    result = run_gen(CORPUS / name, output)
    assert_refused(result, CORPUS / name, EXPECTED[name])
    assert not output.exists()


@pytest.fixture(scope="module")
def existing_bundle(tmp_path_factory) -> Path:
    output = tmp_path_factory.mktemp("existing") / "bundle"
    result = run_gen(REPO / "hardware_db" / "systems" / "l4-inference.yaml", output)
    assert result.returncode == 0, result.stderr
    return output


@pytest.mark.parametrize(
    "name", ["nic-subshell.yaml", "billion-laughs.yaml", "gpu-unknown.yaml", "binary-garbage.yaml"]
)
def test_hostile_file_leaves_existing_bundle_untouched(name: str, existing_bundle: Path):
    before = tree_digest(existing_bundle)
    result = run_gen(CORPUS / name, existing_bundle)
    assert_refused(result, CORPUS / name, EXPECTED[name])
    assert tree_digest(existing_bundle) == before
    assert sorted(p.name for p in existing_bundle.parent.iterdir()) == ["bundle"], (
        "no stray temporary directory"
    )


def test_ten_megabyte_file(tmp_path: Path):
    huge = tmp_path / "huge.yaml"
    huge.write_text("memory_gib: 256\n" + "# padding\n" * (1024 * 1024))
    assert huge.stat().st_size > 10 * 1024 * 1024
    output = tmp_path / "bundle"
    result = run_gen(huge, output)
    assert_refused(result, huge, "larger than 1024 KiB")
    assert not output.exists()
