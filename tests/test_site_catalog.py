"""A site catalog beside the shipped one (issue 30 item 4): a fleet adds its own GPU, NIC, CPU or
system with `gen --catalog DIR` or $GOLDTUNE_CATALOG instead of editing hardware_db/ in the tool.
Same schema and validation; entries add models, never redefine a shipped one (a clash is exit 2,
one line naming the site file and the field); an overlay's `system:` may name a site system."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import yaml

from tests.conftest import REPO

SHIPPED = REPO / "hardware_db"
# A made-up card from the shipped L4 entry, with names and a PCI id of its own.
SITE_GPU = {
    **yaml.safe_load((SHIPPED / "gpus/L4.yaml").read_text()),
    "key": "Site-L4X",
    "name": "Site L4X",
    "aliases": ["Site L4X accelerator"],
    "pci_device_ids": ["0x2fff"],
}
SITE_SYSTEM = {
    **yaml.safe_load((SHIPPED / "systems/l4-inference.yaml").read_text()),
    "description": "a site's own one-card server",
    "gpus": [{"model": "Site-L4X", "count": 2}],
}


def gen(
    *args: str, env: dict[str, str] | None = None, cwd: Path = REPO
) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "generator", *args],
        cwd=cwd,
        capture_output=True,
        text=True,
        env={"PYTHONPATH": str(REPO), "PATH": "/usr/bin:/bin", **(env or {})},
        check=False,
    )


def site(tmp_path: Path, gpu: dict | None = None, system_name: str = "site-l4x") -> Path:
    root = tmp_path / "site"
    (root / "gpus").mkdir(parents=True)
    (root / "systems").mkdir()
    entry = gpu or SITE_GPU
    (root / f"gpus/{entry['key']}.yaml").write_text(yaml.safe_dump(entry))
    (root / f"systems/{system_name}.yaml").write_text(yaml.safe_dump(SITE_SYSTEM))
    return root


def test_a_site_system_and_gpu_make_a_bundle_by_option_and_by_environment(tmp_path: Path) -> None:
    catalog = site(tmp_path)
    by_option = tmp_path / "a"
    done = gen(
        "--catalog",
        str(catalog),
        "--hw",
        "site-l4x",
        "--profile",
        "inference",
        "-o",
        str(by_option),
    )
    assert done.returncode == 0, done.stderr
    assert "Site-L4X" in (by_option / "EXPLAIN.md").read_text()
    by_env = tmp_path / "b"
    done = gen(
        "--hw",
        "site-l4x",
        "--profile",
        "inference",
        "-o",
        str(by_env),
        env={"GOLDTUNE_CATALOG": str(catalog)},
    )
    assert done.returncode == 0, done.stderr
    assert (by_env / "plan.json").read_bytes() == (by_option / "plan.json").read_bytes()


def test_an_overlay_names_a_site_system(tmp_path: Path) -> None:
    catalog = site(tmp_path)
    overlay = tmp_path / "rack7.yaml"
    overlay.write_text("system: site-l4x\nmemory_gib: 256\n")
    out = tmp_path / "out"
    done = gen(
        "--catalog", str(catalog), "--hw", str(overlay), "--profile", "inference", "-o", str(out)
    )
    assert done.returncode == 0, done.stderr
    assert "Site-L4X" in (out / "EXPLAIN.md").read_text()


def test_without_the_site_catalog_its_names_are_unknown(tmp_path: Path) -> None:
    site(tmp_path)
    done = gen("--hw", "site-l4x", "--profile", "inference", "-o", str(tmp_path / "out"))
    assert done.returncode == 2 and "no shipped system" in done.stderr, done.stderr


def refused(tmp_path: Path, catalog: Path, *expected: str) -> None:
    out = tmp_path / "out"
    done = gen(
        "--catalog", str(catalog), "--hw", "site-l4x", "--profile", "inference", "-o", str(out)
    )
    assert done.returncode == 2, done.stdout + done.stderr
    lines = done.stderr.strip().splitlines()
    assert len(lines) == 1 and "Traceback" not in done.stderr, done.stderr
    assert all(word in lines[0] for word in expected), lines[0]
    assert not out.exists()


def test_a_site_entry_that_redefines_a_shipped_key_is_refused(tmp_path: Path) -> None:
    clash = {**SITE_GPU, "key": "L4", "name": "Our L4"}
    catalog = site(tmp_path, clash)
    refused(tmp_path, catalog, "gpus/L4.yaml", "key", "already the shipped GPU 'L4'")


def test_a_site_entry_answering_to_a_shipped_name_or_pci_id_is_refused(tmp_path: Path) -> None:
    catalog = site(tmp_path, {**SITE_GPU, "aliases": ["NVIDIA L4"]})
    refused(tmp_path, catalog, "gpus/Site-L4X.yaml", "aliases", "'nvidia-l4'")
    catalog = site(tmp_path / "pci", {**SITE_GPU, "pci_device_ids": ["0x27b8"]})
    refused(tmp_path / "pci", catalog, "gpus/Site-L4X.yaml", "0x27b8")


def test_a_site_system_with_a_shipped_name_is_refused(tmp_path: Path) -> None:
    catalog = site(tmp_path, system_name="dgx-h100")
    (catalog / "systems/site-l4x.yaml").write_text(yaml.safe_dump(SITE_SYSTEM))
    refused(tmp_path, catalog, "systems/dgx-h100.yaml", "already a shipped reference system")


def test_a_site_entry_is_validated_as_a_shipped_one(tmp_path: Path) -> None:
    catalog = site(tmp_path, {**SITE_GPU, "memory_gib": "lots"})
    refused(tmp_path, catalog, "gpus/Site-L4X.yaml", "memory_gib")


def test_a_catalog_that_is_not_a_directory_is_bad_input(tmp_path: Path) -> None:
    refused(tmp_path, tmp_path / "nowhere", "--catalog: not a directory")
    done = gen(
        "--hw",
        "l4-inference",
        "--profile",
        "inference",
        "-o",
        str(tmp_path / "o"),
        env={"GOLDTUNE_CATALOG": str(tmp_path / "nowhere")},
    )
    assert done.returncode == 2 and "$GOLDTUNE_CATALOG: not a directory" in done.stderr, done.stderr
    assert os.path.lexists(tmp_path / "o") is False
