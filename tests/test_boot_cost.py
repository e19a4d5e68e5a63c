"""bench/boot_cost.py reads what systemd-analyze prints in the guest (no boot here: the boots are
`make bench BENCH_ARGS=--boot-only`, as root with QEMU)."""

from __future__ import annotations

import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "bench"))

import boot_cost

LOG = """console noise
goldtune-analyze-begin
Startup finished in 34.013s (kernel) + 3min 44.954s (userspace) = 4min 18.967s
multi-user.target reached after 3min 40.100s in userspace.
goldtune-blame
    1min 2.500s tuned.service
          812ms goldtune-preflight.service
         1.234s goldtune-irq-affinity.service
goldtune-chain
multi-user.target @3min 40.100s
\u2514\u2500goldtune-irq-affinity.service @3min 38.000s +1.234s
  \u2514\u2500basic.target @1min 2.000s
goldtune-analyze-end
"""


def test_spans_as_systemd_analyze_prints_them() -> None:
    assert boot_cost.span_seconds("3min 44.954s") == 224.954
    assert boot_cost.span_seconds("812ms") == 0.812
    assert boot_cost.span_seconds("1h 2min") == 3720.0


def test_a_boot_is_its_userspace_time_the_units_blame_and_the_chain() -> None:
    boot = boot_cost.parse_analyze(LOG, bundle=True)
    assert boot.userspace_s == 224.954
    assert boot.blame == {
        "goldtune-preflight.service": 0.812,
        "goldtune-irq-affinity.service": 1.234,
    }
    assert boot.on_chain == ["goldtune-irq-affinity.service"]
    assert boot_cost.parse_analyze("no markers", bundle=False).userspace_s is None


def test_each_unit_is_judged_against_a_tenth_of_the_base_userspace_time() -> None:
    base = boot_cost.Boot(False, 20.0, {}, [])
    slow = boot_cost.Boot(True, 25.0, {"goldtune-gpu.service": 2.5}, ["goldtune-gpu.service"])
    lines = boot_cost.table([base, slow])
    assert "goal: each unit under 0.10 x the base image's median userspace 20.0 s = 2.00 s" in lines
    (verdict,) = [line for line in lines if line.startswith("  goldtune-gpu.service")]
    assert verdict.endswith("0.125 x  NOT MET")
    assert "on the critical chain: goldtune-gpu.service" in lines[2]
