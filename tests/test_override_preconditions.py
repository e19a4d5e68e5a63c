"""Overrides under the same preconditions as the rules (issue 40): a huge page size the arm64
kernel does not have and CPU isolation that takes the housekeeping CPUs are refused (exit 2, one
line naming the override) unless the override accepts the risk with a reason; EXPLAIN.md then
marks the setting. Every refusal here passed into the plan on main."""

from __future__ import annotations

from pathlib import Path

import pytest
from generate import generate
from rules.helpers import DUAL_XEON, GRACE
from test_plan import override, plan_with

from generator.errors import InputError

GRACE_64K = {**GRACE, "memory_gib": 512, "os": {"page_size_kib": 64}}
RISK = {"accept_risk": "our kernel team measured it on this fleet"}


@pytest.mark.parametrize("key", ["hugepagesz", "default_hugepagesz"])
def test_a_1g_huge_page_on_a_64k_page_arm64_kernel_is_refused(key: str) -> None:
    with pytest.raises(InputError, match=f"{key}=1G: an arm64 kernel with 64 KiB pages") as found:
        plan_with(override("kernel-arg", key, "1G"), hw=GRACE_64K)
    assert "overrides: kernel-arg" in str(found.value)
    assert "2M, 512M, 16G" in str(found.value)


def test_a_size_the_kernel_offers_passes() -> None:
    built = plan_with(override("kernel-arg", "hugepagesz", "512M"), hw=GRACE_64K)
    assert ("kernel-arg", "hugepagesz", "512M") in {
        (s.kind, s.key, s.value) for s in built.settings
    }


@pytest.mark.parametrize(
    ("key", "value", "needle"),
    [
        ("isolcpus", "0-15", "takes the housekeeping CPUs 0"),
        ("nohz_full", "1-111,112", "takes the housekeeping CPUs 112"),  # CPU 0's SMT sibling
        ("isolcpus", "managed_irq,domain,4-7,500", "names CPUs 500, which this machine"),
    ],
)
def test_isolation_of_housekeeping_or_missing_cpus_is_refused(
    key: str, value: str, needle: str
) -> None:
    with pytest.raises(InputError, match=needle):
        plan_with(override("kernel-arg", key, value), hw=DUAL_XEON)


def test_isolation_that_leaves_the_housekeeping_core_passes() -> None:
    built = plan_with(override("kernel-arg", "isolcpus", "4-15"), hw=DUAL_XEON)
    assert ("kernel-arg", "isolcpus", "4-15") in {(s.kind, s.key, s.value) for s in built.settings}


def test_accept_risk_lets_the_override_through_marked_and_warned() -> None:
    built = plan_with({**override("kernel-arg", "isolcpus", "0-15"), **RISK}, hw=DUAL_XEON)
    (isolcpus,) = [s for s in built.settings if s.key == "isolcpus"]
    assert isolcpus.reason.startswith(f"RISK ACCEPTED ({RISK['accept_risk']})")
    assert any(w.check == "risk" and "housekeeping CPUs 0" in w.text for w in built.warnings)


def test_accept_risk_also_waives_a_known_trap() -> None:
    """AMD's MI300A guide asks transparent_hugepage=always, a trap elsewhere: the site may follow
    AMD by accepting the risk (the memory.apu-ttm note says so)."""
    with pytest.raises(InputError, match="known trap"):
        plan_with(override("kernel-arg", "transparent_hugepage", "always"))
    built = plan_with({**override("kernel-arg", "transparent_hugepage", "always"), **RISK})
    assert ("kernel-arg", "transparent_hugepage", "always") in {
        (s.kind, s.key, s.value) for s in built.settings
    }


def test_accept_risk_never_waives_the_grammar() -> None:
    with pytest.raises(InputError, match="cannot be written"):
        plan_with({**override("kernel-arg", "isolcpus", "0 1"), **RISK}, hw=DUAL_XEON)


def test_the_cli_refuses_on_one_line_and_explain_marks_an_accepted_risk(tmp_path: Path) -> None:
    refused = tmp_path / "refused.yaml"
    refused.write_text(
        "description: test\nextends: inference\noverrides:\n"
        '  - {kind: kernel-arg, key: isolcpus, value: "0-7", reason: "low latency"}\n'
    )
    result = generate("dgx-h100", refused, tmp_path / "a")
    assert result.exit_code == 2, result.output
    lines = result.output.strip().splitlines()
    assert len(lines) == 1 and "isolcpus=0-7 takes the housekeeping CPUs" in lines[0]
    assert not (tmp_path / "a").exists()
    accepted = tmp_path / "accepted.yaml"
    accepted.write_text(
        refused.read_text().replace('"low latency"}', '"low latency", accept_risk: "measured"}')
    )
    result = generate("dgx-h100", accepted, tmp_path / "b")
    assert result.exit_code == 0, result.output
    explain = (tmp_path / "b" / "EXPLAIN.md").read_text()
    assert "RISK ACCEPTED (measured)" in explain
