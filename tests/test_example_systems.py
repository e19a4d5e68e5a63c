"""The shipped example hardware files (examples/) and the Arm CPU entries of the catalog (issue 12).

Each example passes `gen check` with the profile its header names (its reviewed files are
snapshot-tested in tests/test_snapshots.py). The Ampere and Graviton CPU entries resolve by the
names people and tools write and fill in what a hardware file leaves out.
"""

from __future__ import annotations

import re
from pathlib import Path

import pytest
from click.testing import CliRunner

from generator.cli import main
from generator.inputs.catalog import load_catalog

EXAMPLES = sorted((Path(__file__).resolve().parents[1] / "examples").glob("*.yaml"))


def header_profile(path: Path) -> str:
    match = re.search(r"^#\s+gen check --hw \S+ --profile (\S+)$", path.read_text(), re.MULTILINE)
    assert match, f"{path.name}: its header names no `gen check` command"
    return match.group(1)


def test_there_is_an_example() -> None:
    assert EXAMPLES


@pytest.mark.parametrize("path", EXAMPLES, ids=[p.stem for p in EXAMPLES])
def test_example_passes_gen_check(path: Path) -> None:
    result = CliRunner().invoke(
        main, ["check", "--hw", str(path), "--profile", header_profile(path)]
    )
    assert result.exit_code == 0, result.output


@pytest.mark.parametrize(
    ("name", "key", "vendor", "cores"),
    [
        ("Ampere Altra Q80-30", "Altra-Q80-30", "ampere", 80),
        ("Ampere Altra Q80-30 80-Core Processor", "Altra-Q80-30", "ampere", 80),
        ("AmpereOne A192-32X", "AmpereOne-A192-32X", "ampere", 192),
        ("AWS Graviton2", "Graviton2", "other", 64),
    ],
)
def test_arm_cpu_entries_resolve_by_their_names(
    name: str, key: str, vendor: str, cores: int
) -> None:
    entry = load_catalog().cpus.find(name)
    assert entry is not None, name
    assert (entry.key, entry.vendor, entry.arch) == (key, vendor, "aarch64")
    assert (entry.cores_per_socket, entry.threads_per_core) == (cores, 1)
    assert entry.source, f"{key}: every fact needs a source"


def minimal(tmp_path: Path, cpu: str) -> Path:
    path = tmp_path / "box.yaml"
    path.write_text(
        f"name: box\ncpu:\n{cpu}memory_gib: 256\ngpus:\n  - model: A100-PCIe-80GB\n"
        "    count: 1\nnics: []\ndisks:\n  - {name: nvme0n1, kind: nvme, role: os}\n"
    )
    return path


def test_an_altra_box_takes_cores_and_threads_from_the_catalog(tmp_path: Path) -> None:
    box = minimal(tmp_path, "  model: Q80-30\n  vendor: ampere\n  sockets: 2\n")
    result = CliRunner().invoke(main, ["check", "--hw", str(box), "--profile", "training"])
    assert result.exit_code == 0, result.output
    assert "2x ampere 80 cores" in result.output


def test_a_vendor_that_contradicts_the_catalog_entry_is_refused(tmp_path: Path) -> None:
    box = minimal(tmp_path, "  model: Altra-Q80-30\n  vendor: intel\n  sockets: 1\n")
    result = CliRunner().invoke(main, ["check", "--hw", str(box), "--profile", "training"])
    assert result.exit_code == 2
    assert "contradicts model Altra-Q80-30 (ampere)" in result.output
