"""NUMA counts kubelet will accept (issue 38): a superchip tray whose file omits
memory_only_numa_nodes gets no topology or memory manager, kubelet refusing either above 8 NUMA
nodes in all; the preflight checks the live count against what the kubelet file assumes.

A GB200 compute tray shows 34 NUMA nodes, 2 with CPUs and 8 per GPU without (hardware_db
GB200.yaml, cpu_less_numa_nodes); GB300's count is in no source read here, so unknown.
"""

from __future__ import annotations

from pathlib import Path

import pytest
import yaml
from click.testing import CliRunner
from test_install import make_bin
from test_node_cpus import hardware, machine, run_script

from generator.cli import main
from generator.inputs.catalog import load_catalog
from generator.inputs.hardware import load_facts
from generator.inputs.profile import load_profile
from generator.model import layout
from generator.model.layout import in_overlay
from generator.plan.build import build_plan

TRAY = "gb200-nvl72-tray"
MANAGERS = ("topologyManagerPolicy", "topologyManagerScope", "memoryManagerPolicy")


def tray_file(tmp_path: Path, model: str) -> Path:
    """The shipped GB200 tray's file with the GPU model MODEL and no memory_only_numa_nodes, as
    a user writes one (or an older gen detect wrote it)."""
    text = (Path(__file__).parents[1] / f"hardware_db/systems/{TRAY}.yaml").read_text()
    data = yaml.safe_load(text)
    del data["memory_only_numa_nodes"]
    data["gpus"][0]["model"] = model
    path = tmp_path / f"{model.lower()}-tray.yaml"
    path.write_text(yaml.safe_dump(data))
    return path


def render(hw: Path, tmp_path: Path) -> Path:
    out = tmp_path / "bundle"
    result = CliRunner().invoke(
        main, ["--hw", str(hw), "--profile", "training-k8s", "-o", str(out)]
    )
    assert result.exit_code == 0, result.output
    return out


def kubelet_file(out: Path) -> dict[str, object]:
    loaded = yaml.safe_load((out / in_overlay(layout.KUBELET_DROPIN)).read_text())
    assert isinstance(loaded, dict)
    return loaded


@pytest.mark.parametrize("model", ["GB300", "GB200"])
def test_a_tray_file_without_its_cpu_less_nodes_gets_a_kubelet_file_kubelet_accepts(
    tmp_path: Path, model: str
) -> None:
    """On main both trays got the topology and memory managers (2 NUMA nodes, as far as the file
    said), which kubelet refuses on the tray's 34 nodes: kubelet did not start."""
    out = render(tray_file(tmp_path, model), tmp_path)
    kubelet = kubelet_file(out)
    assert not [field for field in (*MANAGERS, "reservedMemory") if field in kubelet], kubelet
    assert kubelet["cpuManagerPolicy"] == "static"
    explain = (out / "EXPLAIN.md").read_text()
    if model == "GB300":  # the count is not known: said, not guessed
        assert "neither the hardware file (memory_only_numa_nodes" in explain
        assert "nor hardware_db says how many: no topology or memory manager" in explain
    else:
        assert (
            "34 NUMA nodes (2 with CPUs, 32 without CPUs, inferred from hardware_db (4 GB200 x 8"
            in explain
        )
    preflight = (out / in_overlay(layout.PREFLIGHT_DATA)).read_text()
    assert "numa.nodes_at_most" not in preflight  # nothing assumes a count there


def test_the_catalog_count_is_the_shipped_trays_stated_one() -> None:
    """The shipped tray states 32 (34 = 2 + 4 x 8), what the catalog infers; stated wins."""
    catalog = load_catalog()
    stated = load_facts(TRAY, catalog)[0]
    assert stated.memory_only_numa_nodes == 32 and not stated.memory_only_inferred
    assert stated.all_numa_nodes == 34


def test_an_inferred_count_is_the_catalogs(tmp_path: Path) -> None:
    facts = load_facts(str(tray_file(tmp_path, "GB200")), load_catalog())[0]
    assert (facts.memory_only_numa_nodes, facts.memory_only_inferred) == (32, "4 GB200 x 8")
    assert facts.memory_only_expected
    unknown = load_facts(str(tray_file(tmp_path, "GB300")), load_catalog())[0]
    assert (unknown.memory_only_numa_nodes, unknown.memory_only_expected) == (None, True)


def cpu_less_nodes(tree: Path, first: int, count: int) -> None:
    """COUNT NUMA nodes from FIRST on with no CPU (GPU memory on a tray): an empty cpulist."""
    for node in range(first, first + count):
        directory = tree / f"sys/devices/system/node/node{node}"
        directory.mkdir(parents=True)
        (directory / "cpulist").write_text("\n")


def k8s_bundle(tmp_path: Path) -> Path:
    """training-k8s of the 2-socket machine of test_node_cpus (no superchip, the CPU-less count
    not stated): the topology and memory managers are on, which assumes at most 8 nodes."""
    path = tmp_path / "machine.yaml"
    path.write_text(yaml.safe_dump(hardware()))
    out = render(path, tmp_path)
    assert kubelet_file(out)["topologyManagerPolicy"] == "best-effort"
    return out


def test_the_preflight_reports_a_node_with_more_nodes_than_the_kubelet_file_allows(
    tmp_path: Path,
) -> None:
    """34 nodes where the kubelet file's managers assume at most 8: a mismatch naming what
    was made from it; the same node with its 2 nodes matches. On main nothing was claimed."""
    out = k8s_bundle(tmp_path)
    data = out / in_overlay(layout.PREFLIGHT_DATA)
    claims = [line for line in data.read_text().splitlines() if line.startswith("claim\t")]
    (at_most,) = [line for line in claims if "\tnuma.nodes_at_most\t" in line]
    assert at_most.split("\t")[2] == "8" and "kubelet:topologyManagerPolicy" in at_most

    matching = machine(tmp_path / "two", "usual")
    result = run_script("preflight", data, matching, make_bin(tmp_path, {}))
    assert result.returncode == 0, result.stdout

    tray = machine(tmp_path / "tray", "usual")
    cpu_less_nodes(tray, 2, 32)
    result = run_script("preflight", data, tray, make_bin(tmp_path, {}, "b2"))
    assert result.returncode == 1, result.stdout
    assert "numa.nodes_at_most: the hardware file says 8, this node has 34; made from it: " in (
        result.stdout
    )
    assert "kubelet:topologyManagerPolicy" in result.stdout
    mismatches = (tray / layout.PREFLIGHT_RESULT.removeprefix("/")).read_text().splitlines()
    assert [line.split("\t")[1] for line in mismatches[1:]] == ["numa.nodes_at_most"]


def test_a_plan_without_kubelets_managers_claims_no_limit() -> None:
    inputs = load_profile("training")[0]
    facts = load_facts("dgx-h100", load_catalog())[0]
    names = {claim.name for claim in build_plan(facts, inputs).claims}
    assert "numa.nodes_at_most" not in names
