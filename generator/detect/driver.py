"""GPU facts from the NVIDIA driver: NVML (nvidia-ml-py) first, then ``nvidia-smi -q -x``.

Both are optional. NVML is imported only when asked for, so `gen detect` works without the
``detect`` extra and without a GPU; every NVML call that fails (old driver, unsupported on this
board) leaves its fact unknown. nvidia-smi runs with a timeout and its output is capped; its
XML is parsed with the standard library after refusing entity declarations.
"""

from __future__ import annotations

import importlib
import math
import shutil
import subprocess
from collections.abc import Callable
from types import ModuleType
from typing import Any, NamedTuple
from xml.etree import ElementTree

NVIDIA_SMI_TIMEOUT_S = 20
MAX_XML_BYTES = 8 * 1024 * 1024
NVML_NVLINK_DEVICE_TYPE_SWITCH = 2  # nvml.h nvmlNvLinkDeviceType_t [P]
# MiB, W and MHz of a real GPU are below a million; a larger number in the XML is forged
MAX_SMI_NUMBER = 10**9


class AbsurdNumberError(ValueError):
    """A number of nvidia-smi's XML that no GPU reports: the whole XML is ignored, with why."""


class DriverGpu(NamedTuple):
    """What the driver says about one GPU; None where it did not say."""

    address: str  # PCI address as sysfs writes it: 0000:07:00.0
    name: str | None = None
    device_id: str | None = None  # 4 hex digits
    memory_mib: int | None = None
    power_w: tuple[int | None, int | None, int | None] = (None, None, None)  # default, min, max
    max_clocks_mhz: tuple[int | None, int | None] = (None, None)  # graphics, memory
    mig_mode: str | None = None  # enabled | disabled
    nvlinks_active: int | None = None
    nvswitch: bool | None = None
    # amd-smi's (generator/detect/driver_amd.py): the power cap now, and the partition modes
    power_cap_w: int | None = None
    compute_partition: str | None = None  # SPX | DPX | QPX | CPX
    memory_partition: str | None = None  # NPS1 | NPS4


class DriverReport(NamedTuple):
    source: str  # NVML | nvidia-smi -q -x | amd-smi static --json
    gpus: dict[str, DriverGpu]


def pci_address(bus_id: str) -> str:
    """NVML and nvidia-smi write 8 hex digits of domain (00000000:07:00.0); sysfs writes 4."""
    domain, _, rest = bus_id.strip().lower().partition(":")
    return f"{domain[-4:]}:{rest}" if rest else bus_id.strip().lower()


def _text(value: Any) -> str:
    return value.decode("utf-8", "replace") if isinstance(value, bytes) else str(value)


def _ask(call: Callable[..., Any], *args: Any) -> Any:
    """One NVML answer, or None when the call fails on this driver or board."""
    try:
        return call(*args)
    except Exception:
        return None


def _watts(milliwatts: Any) -> int | None:
    return round(milliwatts / 1000) if isinstance(milliwatts, int) and milliwatts > 0 else None


def _nvml_gpu(nvml: ModuleType, index: int) -> DriverGpu | None:
    handle = _ask(nvml.nvmlDeviceGetHandleByIndex, index)
    pci = _ask(nvml.nvmlDeviceGetPciInfo, handle) if handle is not None else None
    if pci is None:
        return None
    memory = _ask(nvml.nvmlDeviceGetMemoryInfo, handle)
    limits = _ask(nvml.nvmlDeviceGetPowerManagementLimitConstraints, handle) or (None, None)
    mig = _ask(nvml.nvmlDeviceGetMigMode, handle)
    links = _nvlinks(nvml, handle)
    return DriverGpu(
        address=pci_address(_text(pci.busId)),
        name=_text(_ask(nvml.nvmlDeviceGetName, handle) or "") or None,
        device_id=f"{(pci.pciDeviceId >> 16) & 0xFFFF:04x}",
        memory_mib=memory.total // (1024 * 1024) if memory is not None else None,
        power_w=(
            _watts(_ask(nvml.nvmlDeviceGetPowerManagementDefaultLimit, handle)),
            _watts(limits[0]),
            _watts(limits[1]),
        ),
        max_clocks_mhz=(
            _ask(nvml.nvmlDeviceGetMaxClockInfo, handle, nvml.NVML_CLOCK_GRAPHICS),
            _ask(nvml.nvmlDeviceGetMaxClockInfo, handle, nvml.NVML_CLOCK_MEM),
        ),
        mig_mode=None if mig is None else ("enabled" if mig[0] else "disabled"),
        nvlinks_active=links[0],
        nvswitch=links[1],
    )


def _nvlinks(nvml: ModuleType, handle: Any) -> tuple[int | None, bool | None]:
    """(active NVLinks, whether one leads to an NVSwitch); None where NVML cannot say."""
    active = 0
    switch: bool | None = None
    for link in range(getattr(nvml, "NVML_NVLINK_MAX_LINKS", 18)):
        if _ask(nvml.nvmlDeviceGetNvLinkState, handle, link) != 1:
            continue
        active += 1
        remote = getattr(nvml, "nvmlDeviceGetNvLinkRemoteDeviceType", None)
        kind = _ask(remote, handle, link) if remote is not None else None
        if kind is not None:
            switch = bool(switch) or kind == NVML_NVLINK_DEVICE_TYPE_SWITCH
    return (active, switch) if active else (0, None)


def query_nvml(load: Callable[[str], ModuleType] = importlib.import_module) -> DriverReport | str:
    """GPUs by PCI address from NVML, or why NVML did not answer."""
    try:
        nvml = load("pynvml")
    except ImportError:
        return "NVML: nvidia-ml-py is not installed (pip install 'goldtune[detect]')"
    try:
        nvml.nvmlInit()
    except Exception:
        return "NVML: no driver answered (nvmlInit failed)"
    try:
        count = _ask(nvml.nvmlDeviceGetCount) or 0
        gpus = [gpu for gpu in (_nvml_gpu(nvml, index) for index in range(count)) if gpu]
    finally:
        _ask(nvml.nvmlShutdown)
    return DriverReport("NVML", {gpu.address: gpu for gpu in gpus})


def run_nvidia_smi() -> bytes | str:
    """The XML of ``nvidia-smi -q -x`` from this machine, or why there is none."""
    binary = shutil.which("nvidia-smi")
    if binary is None:
        return "nvidia-smi: not installed"
    try:
        result = subprocess.run(
            [binary, "-q", "-x"],
            capture_output=True,
            check=False,
            timeout=NVIDIA_SMI_TIMEOUT_S,
            stdin=subprocess.DEVNULL,
        )
    except subprocess.TimeoutExpired:
        return f"nvidia-smi: no answer within {NVIDIA_SMI_TIMEOUT_S} s"
    except OSError as error:
        return f"nvidia-smi: cannot run ({error.strerror})"
    if result.returncode != 0:
        return f"nvidia-smi: exit status {result.returncode}"
    return result.stdout


def parse_nvidia_smi(xml: bytes, source: str = "nvidia-smi -q -x") -> DriverReport | str:
    if len(xml) > MAX_XML_BYTES:
        return f"{source}: output over {MAX_XML_BYTES // (1024 * 1024)} MiB; ignored"
    if b"<!ENTITY" in xml:
        return f"{source}: declares XML entities; ignored"
    try:
        root = ElementTree.fromstring(xml)  # noqa: S314 -- size capped and entities refused above
    except ElementTree.ParseError as error:
        return f"{source}: not valid XML ({error})"
    except RecursionError:
        return f"{source}: nested too deep; ignored"
    try:
        gpus = [_smi_gpu(element) for element in root.findall("gpu")]
    except AbsurdNumberError as error:
        return f"{source}: {error}; ignored"
    return DriverReport(source, {gpu.address: gpu for gpu in gpus if gpu.address})


def _number(element: ElementTree.Element, path: str) -> int | None:
    """``700.00 W`` or ``1980 MHz`` -> 700 / 1980; None for N/A or absent."""
    words = (element.findtext(path) or "").split()
    try:
        value = float(words[0]) if words else None
    except ValueError:
        return None  # N/A, [Not Supported]
    if value is None:
        return None
    if not math.isfinite(value) or abs(value) > MAX_SMI_NUMBER:
        shown = words[0][:20] + ("..." if len(words[0]) > 20 else "")
        raise AbsurdNumberError(f"{path} is {shown!r}, no GPU reports that")
    return round(value)


def _smi_gpu(gpu: ElementTree.Element) -> DriverGpu:
    power = "gpu_power_readings" if gpu.find("gpu_power_readings") is not None else "power_readings"
    device = (gpu.findtext("pci/pci_device_id") or "").lower()
    mig = (gpu.findtext("mig_mode/current_mig") or "").strip().lower()
    return DriverGpu(
        address=pci_address(gpu.get("id", "")),
        name=(gpu.findtext("product_name") or "").strip() or None,
        device_id=device[2:6] if device.startswith("0x") and len(device) == 10 else None,
        memory_mib=_number(gpu, "fb_memory_usage/total"),
        power_w=(
            _number(gpu, f"{power}/default_power_limit"),
            _number(gpu, f"{power}/min_power_limit"),
            _number(gpu, f"{power}/max_power_limit"),
        ),
        max_clocks_mhz=(
            _number(gpu, "max_clocks/graphics_clock"),
            _number(gpu, "max_clocks/mem_clock"),
        ),
        mig_mode=mig if mig in {"enabled", "disabled"} else None,
    )


def query_driver(
    nvml_loader: Callable[[str], ModuleType] = importlib.import_module,
    smi: Callable[[], bytes | str] = run_nvidia_smi,
) -> DriverReport | str:
    """NVML when it answers, else nvidia-smi, else the reasons both gave."""
    nvml = query_nvml(nvml_loader)
    if isinstance(nvml, DriverReport):
        return nvml
    xml = smi()
    if isinstance(xml, str):
        return f"{nvml}; {xml}"
    parsed = parse_nvidia_smi(xml)
    return parsed if isinstance(parsed, DriverReport) else f"{nvml}; {parsed}"
