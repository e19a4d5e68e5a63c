"""AMD GPU facts: ``amd-smi static --json`` (optional, bounded) and the KFD topology in sysfs.

Both are read the way the NVIDIA readers are (generator/detect/driver.py): amd-smi runs with a
timeout and its output is capped, and a fact it does not give stays unknown. What they add to the
PCI bus's answer is comments for the reader (name, memory, power range, partition modes), never a
field of the format: the GPU's model and count come from its PCI functions.

amd-smi's JSON, from amdsmi_cli/amdsmi_commands.py (ROCm/amdsmi) ``static_gpu``: one object per
GPU with ``asic`` (``market_name``, ``device_id`` "0x74a1"), ``bus`` (``bdf``), ``vram``
(``size`` {value, unit MB}), ``limit`` (``max_power``, ``min_power``, ``socket_power``: the power
cap now, each {value, unit W}) and ``partition`` (``compute_partition`` SPX/DPX/QPX/CPX,
``memory_partition`` NPS1/NPS4); "N/A" where the library could not say. Older releases print a
list of these objects, newer ones wrap it as ``{"gpu_data": [...]}``: both are read.

The KFD topology (drivers/gpu/drm/amd/amdkfd/kfd_topology.c ``node_show``) has one node per CPU
NUMA domain and one per GPU compute partition, each a ``properties`` file of ``name value`` lines
(decimal): a GPU node has ``simd_count`` > 0, its PCI function in ``domain`` and ``location_id``
(``pci_dev_id``: bus << 8 | devfn), and ``gpu_id`` beside it. A GPU in CPX mode is one PCI function
and several KFD nodes.
"""

from __future__ import annotations

import json
import shutil
import subprocess
from typing import Any, NamedTuple

from generator.detect.driver import DriverGpu, DriverReport, pci_address
from generator.detect.tree import Tree

AMD_SMI_TIMEOUT_S = 20
MAX_JSON_BYTES = 8 * 1024 * 1024
AMD_SMI_ARGS = ("static", "--asic", "--bus", "--vram", "--limit", "--partition", "--json")
KFD_NODES = "/sys/class/kfd/kfd/topology/nodes"
MAX_KFD_NODES = 1024


class KfdGpu(NamedTuple):
    """The KFD nodes of one PCI function: one per compute partition."""

    address: str
    gpu_ids: tuple[int, ...]
    simd_count: int


def run_amd_smi() -> bytes | str:
    """The JSON of ``amd-smi static`` on this machine, or why there is none."""
    binary = shutil.which("amd-smi")
    if binary is None:
        return "amd-smi: not installed"
    try:
        result = subprocess.run(
            [binary, *AMD_SMI_ARGS],
            capture_output=True,
            check=False,
            timeout=AMD_SMI_TIMEOUT_S,
            stdin=subprocess.DEVNULL,
        )
    except subprocess.TimeoutExpired:
        return f"amd-smi: no answer within {AMD_SMI_TIMEOUT_S} s"
    except OSError as error:
        return f"amd-smi: cannot run ({error.strerror})"
    if result.returncode != 0:
        return f"amd-smi: exit status {result.returncode}"
    return result.stdout


def parse_amd_smi(data: bytes, source: str = "amd-smi static --json") -> DriverReport | str:
    """The GPUs of amd-smi's JSON by PCI address, or why it cannot be read."""
    if len(data) > MAX_JSON_BYTES:
        return f"{source}: output over {MAX_JSON_BYTES // (1024 * 1024)} MiB; ignored"
    try:
        document = json.loads(data)
    except (ValueError, RecursionError) as error:
        return f"{source}: not valid JSON ({str(error)[:80]})"
    if isinstance(document, dict):
        document = document.get("gpu_data")
    if not isinstance(document, list):
        return f"{source}: neither a list of GPUs nor a gpu_data list"
    gpus = [_smi_gpu(item) for item in document if isinstance(item, dict)]
    return DriverReport(source, {gpu.address: gpu for gpu in gpus if gpu.address})


def _section(item: dict[str, Any], name: str) -> dict[str, Any]:
    value = item.get(name)
    return value if isinstance(value, dict) else {}


def _text(value: Any) -> str | None:
    return value.strip() if isinstance(value, str) and value.strip() not in ("", "N/A") else None


def _amount(value: Any, unit: str) -> int | None:
    """``{"value": 750, "unit": "W"}`` (JSON), or a bare number -> 750; None for N/A."""
    if isinstance(value, dict):
        if value.get("unit") not in (None, unit):
            return None
        value = value.get("value")
    if isinstance(value, bool) or not isinstance(value, int | float):
        return None
    return round(value) if value > 0 else None


def _smi_gpu(item: dict[str, Any]) -> DriverGpu:
    asic, limit = _section(item, "asic"), _section(item, "limit")
    partition = _section(item, "partition")
    device = (_text(asic.get("device_id")) or "").lower()
    return DriverGpu(
        address=pci_address(_text(_section(item, "bus").get("bdf")) or ""),
        name=_text(asic.get("market_name")),
        device_id=device[2:] if len(device) == 6 and device.startswith("0x") else None,
        memory_mib=_amount(_section(item, "vram").get("size"), "MB"),
        power_w=(None, _amount(limit.get("min_power"), "W"), _amount(limit.get("max_power"), "W")),
        power_cap_w=_amount(limit.get("socket_power"), "W"),
        compute_partition=_text(partition.get("compute_partition")),
        memory_partition=_text(partition.get("memory_partition")),
    )


def read_kfd(tree: Tree) -> dict[str, KfdGpu]:
    """The GPU nodes of the KFD topology, by the PCI address of their function."""
    found: dict[str, list[tuple[int, int]]] = {}
    names = tree.entries(KFD_NODES)
    for name in names[:MAX_KFD_NODES]:
        properties = _properties(tree.read(f"{KFD_NODES}/{name}/properties", limit=16384) or "")
        simds, location = properties.get("simd_count", 0), properties.get("location_id")
        gpu_id = _number(tree.value(f"{KFD_NODES}/{name}/gpu_id"))
        if simds <= 0 or location is None or not gpu_id:
            continue  # a CPU node (no SIMDs, gpu_id 0)
        domain = properties.get("domain", 0)
        bus, devfn = location >> 8 & 0xFF, location & 0xFF
        address = f"{domain & 0xFFFF:04x}:{bus:02x}:{devfn >> 3:02x}.{devfn & 7}"
        found.setdefault(address, []).append((gpu_id, simds))
    return {
        address: KfdGpu(address, tuple(sorted(g for g, _ in nodes)), sum(s for _, s in nodes))
        for address, nodes in found.items()
    }


def _number(text: str | None) -> int | None:
    return int(text) if text is not None and text.isdigit() and len(text) <= 12 else None


def _properties(text: str) -> dict[str, int]:
    values: dict[str, int] = {}
    for line in text.splitlines()[:256]:
        name, _, number = line.strip().partition(" ")
        value = _number(number.strip())
        if name and value is not None:
            values[name] = value
    return values
