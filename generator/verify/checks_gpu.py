"""Live checks of the GPUs and what is pinned to them: nvidia-smi's settings and MIG layout (AMD's
through gpu_amd.py), NIC interrupt affinity and the PCIe ACS registers."""

from __future__ import annotations

from collections import Counter

from generator.model.cpulist import compress_cpus, expand_cpus
from generator.model.layout import (
    ACS_UNIT,
    GPU_UNIT,
)
from generator.model.probes import (
    AMD_ONLY_ACTIONS,
    Section,
    acs_word,
)
from generator.model.setting import Setting
from generator.verify.gpu_amd import SECTION as AMD_SECTION
from generator.verify.gpu_amd import check_gpu_amd
from generator.verify.live_state import (
    DIFFERS,
    MISSING,
    NA,
    NOT_COLLECTED,
    NOT_JUDGED,
    OK,
    Live,
    normal,
    own_unit_props,
)
from generator.verify.records import (
    AcsReading,
    GpuRecord,
    IrqRow,
    acs_reading,
    gpu_records,
    irq_local_cpus,
    irq_rows,
)
from generator.verify.snapshot import Why, timed_out, why_not
from generator.verify.verdicts import Check, check_of

# The GPU actions read back through nvidia-smi (gpu_actual, check_mig_layout); another action
# (a vendor's own) is not judged from these rows, never passed.
NVIDIA_GPU_ACTIONS = frozenset(
    {"persistence", "ecc", "mig", "mig-layout", "compute-mode", "clocks", "power-limit"}
)


def gpu_actual(action: str, row: GpuRecord, value: str) -> tuple[str, bool]:
    if action == "persistence":
        return row.persistence_mode, normal(row.persistence_mode) == normal(value)
    if action == "ecc":
        current, pending = row.ecc_current, row.ecc_pending
        return f"{current} (pending {pending})", normal(pending) == normal(value)
    if action == "mig":
        return row.mig_current, normal(row.mig_current) == normal(value)
    if action == "compute-mode":
        return row.compute_mode, row.compute_mode.upper() == value.upper()
    if action == "power-limit":
        try:
            limit, default = float(row.power_limit), float(row.power_default_limit)
        except ValueError:
            return row.power_limit, False
        target = float(value[:-1]) * default / 100 if value.endswith("%") else float(value)
        return f"{row.power_limit} W", abs(limit - target) <= 1
    return f"{row.clocks_gr} MHz now (max {row.clocks_max_gr})", True


def is_amd_gpu_setting(setting: Setting, live: Live) -> bool:
    """A gpu setting for AMD's GPUs: an action only they have, or any action on a machine whose
    snapshot has AMD GPUs and no NVIDIA ones (the gpu-amd section, nvidia-smi absent)."""
    if setting.key in AMD_ONLY_ACTIONS:
        return True
    amd = [key for key, _ in live.snapshot.section(AMD_SECTION) if key != "tool"]
    nvidia = live.snapshot.value(Section.GPU, "tool")
    return bool(amd) and (nvidia is None or live.snapshot.absent(Section.GPU, "tool"))


def mig_layout_actual(row: GpuRecord, live: Live, planned: Counter[str]) -> tuple[str, bool]:
    """One GPU against the planned MIG instances: (what it has, whether that is the plan)."""
    mode = row.mig_current
    if mode != "Enabled":
        return f"MIG {mode}", "N/A" in mode or "Supported" in mode
    found = live.snapshot.value(Section.GPU_MIG, row.gpu_index)
    if found is None:
        return "instances not collected", False
    if (why := why_not(found)) is not None:
        return why, False
    names = Counter() if found == "none" else Counter(found.split(","))
    return found, names == planned


def check_mig_layout(setting: Setting, live: Live) -> Check:
    """Each MIG-capable GPU has exactly the planned GPU instances (GPUs without MIG: skipped)."""
    planned = Counter(setting.value.split(","))
    rows = gpu_records(live.snapshot)
    results = [(row.gpu_index, *mig_layout_actual(row, live, planned)) for row in rows]
    text = "; ".join(f"GPU {index}: {actual}" for index, actual, _ in results)
    if not results:
        return check_of(setting, "no GPU rows", MISSING, NOT_COLLECTED)
    if all(ok for _, _, ok in results):
        return check_of(setting, text, OK)
    return check_of(
        setting, text, DIFFERS, f"{GPU_UNIT}'s log says why (a pending MIG mode, other instances)"
    )


def check_gpu(setting: Setting, live: Live) -> Check:
    if is_amd_gpu_setting(setting, live):
        return check_gpu_amd(setting, live.snapshot)
    if setting.key not in NVIDIA_GPU_ACTIONS:
        reason = f"this goldtune has no reading of {setting.key} through nvidia-smi"
        return check_of(setting, "not read", NOT_JUDGED, reason)
    tool = live.snapshot.value(Section.GPU, "tool")
    if tool is None:
        return check_of(setting, "?", MISSING, NOT_COLLECTED)
    why = why_not(tool)
    if why == Why.ABSENT:
        return check_of(
            setting, "no GPU", NA, "no NVIDIA GPU here (nvidia-smi is absent or lists none)"
        )
    if why is not None:
        hung = "nvidia-smi hung: nothing could be read" if timed_out(tool) else ""
        return check_of(setting, why, DIFFERS, hung or "nvidia-smi failed")
    if setting.key == "mig-layout":
        return check_mig_layout(setting, live)
    results = [gpu_actual(setting.key, row, setting.value) for row in gpu_records(live.snapshot)]
    if setting.key == "clocks":
        ok = own_unit_props(live, GPU_UNIT).get("Result") == "success"
        return check_of(
            setting,
            f"{'reset' if setting.value == 'reset' else 'locked'} by {GPU_UNIT}"
            if ok
            else "the GPU unit did not succeed",
            OK if ok else DIFFERS,
            "locked clocks are not readable through nvidia-smi --query-gpu",
        )
    text = "; ".join(f"GPU {i}: {actual}" for i, (actual, _) in enumerate(results))
    if results and all("N/A" in actual for actual, _ in results):
        return check_of(
            setting, text, NA, f"nvidia-smi reports {setting.key} as not supported by these GPUs"
        )
    return check_of(setting, text, OK if all(ok for _, ok in results) else DIFFERS)


def check_irq_local(setting: Setting, rows: list[IrqRow], local: tuple[int, ...] | None) -> Check:
    """A list resolved at boot: one list for every IRQ, within the device's local_cpulist
    where the collector read one (irq-affinity pins to it less CPU 0's core and offline CPUs;
    an IRQ outside it is on a remote node's CPU, whatever the firmware's numbering)."""
    lists = {row.cpus for row in rows}
    if len(lists) != 1 or any(row.cpu_list is None for row in rows):
        return check_of(
            setting, "; ".join(sorted(lists)[:4]), DIFFERS, "IRQs not on one boot-time CPU list"
        )
    (cpus,) = lists
    shown = f"{cpus} ({len(rows)} IRQs, read at boot)"
    if local is None:
        return check_of(setting, shown, OK)
    remote = set(rows[0].cpu_list or ()) - set(local)
    if remote:
        return check_of(
            setting,
            shown,
            DIFFERS,
            f"CPUs {compress_cpus(remote)} are outside the device's local_cpulist "
            f"{compress_cpus(local)}",
        )
    return check_of(setting, f"{shown} within the device's local_cpulist", OK)


def check_irq(setting: Setting, live: Live) -> Check:
    rows = irq_rows(live.snapshot, setting.key)
    if not rows:
        return check_of(setting, "?", MISSING, NOT_COLLECTED)
    why = live.snapshot.why_not(Section.IRQ, setting.key)
    if why == Why.ABSENT:
        return check_of(
            setting, "no such interface", NA, f"no interface {setting.key} on this machine"
        )
    if why == Why.NO_MSI_IRQS:
        return check_of(setting, "no MSI IRQs", NA, f"{setting.key} has no MSI interrupts to pin")
    if why is not None:  # a reason collect_irq does not print today: not a row to judge
        return check_of(setting, why, DIFFERS, "the collector read no interrupts")
    if setting.value == "local":
        return check_irq_local(setting, rows, irq_local_cpus(live.snapshot, setting.key))
    wanted = tuple(expand_cpus(setting.value))
    wrong = [f"IRQ {row.irq}: {row.cpus}" for row in rows if row.cpu_list != wanted]
    if wrong:
        return check_of(
            setting, "; ".join(wrong[:4]), DIFFERS, f"{len(wrong)} of {len(rows)} IRQs elsewhere"
        )
    return check_of(setting, f"{setting.value} ({len(rows)} IRQs)", OK)


# What pcie-acs logs when it wrote nothing on purpose (templates/scripts/pcie-acs).
ACS_SKIPPED = ("virtual machine", "setpci (pciutils) is not installed", "no GPU of vendor")


# The ACS Control register's bits (PCIe base spec 7.7.11.3); pcie-acs clears them all (0000).
ACS_CONTROL_BITS = (
    "source validation",
    "translation blocking",
    "P2P request redirect",
    "P2P completion redirect",
    "upstream forwarding",
    "P2P egress control",
    "direct translated P2P",
)


def acs_bits(control: int) -> str:
    """``0x001d`` -> ``source validation, P2P request redirect, …``: the ACS controls on."""
    named = [name for bit, name in enumerate(ACS_CONTROL_BITS) if control >> bit & 1]
    return ", ".join(named + (["other bits"] if control >> len(ACS_CONTROL_BITS) else []))


def check_acs_registers(setting: Setting, acs: AcsReading) -> Check:
    """The ACS Control register of each root and downstream port above the setting's devices,
    as the collector read it from config space: every bit pcie-acs cleared must still be clear."""
    if acs.absent:
        return check_of(setting, "no such device", NA, f"no {setting.key} on this machine")
    if acs.unreadable:
        return check_of(
            setting,
            "config space unreadable",
            NOT_JUDGED,
            "the ACS registers lie beyond the first 64 bytes of a port's config space, which "
            "only root may read: run the collector as root",
        )
    ports, left_on = acs.ports, acs.left_on  # left on: pcie-acs leaves ACS on there, on purpose
    wrong = [f"{p.port}: {p.control} ({acs_bits(p.bits)})" for p in ports if p.bits]
    if wrong:
        return check_of(
            setting,
            "; ".join(wrong[:4]),
            DIFFERS,
            f"{len(wrong)} of {len(ports)} ports have ACS on again (set after {ACS_UNIT} ran: a "
            "hot-plug, a reset of the port, firmware?)",
        )
    left_on_note = (
        f"ACS left on above {', '.join(left_on)}: the IOMMU translates its DMA" if left_on else ""
    )
    if not ports:
        why = "no root or downstream port above it has ACS"
        return check_of(
            setting, "no port with ACS", NA, "; ".join(filter(None, [why, left_on_note]))
        )
    return check_of(
        setting,
        f"ACS control 0000 on {len(ports)} ports (read from config space)",
        OK,
        left_on_note,
    )


def check_pcie_acs(setting: Setting, live: Live) -> Check:
    """ACS off above the devices: the ACS Control registers the collector read from each port's
    config space; with an older collector, the ACS unit's run (its result and what it logged)."""
    props = own_unit_props(live, ACS_UNIT)
    rows = live.snapshot.values(Section.ACS, acs_word(setting.key))
    if not props and not rows:
        return check_of(setting, "?", MISSING, NOT_COLLECTED)
    log = live.snapshot.values(Section.OWN_UNIT_LOG, ACS_UNIT)
    skipped = next((line for line in log for why in ACS_SKIPPED if why in line), None)
    if skipped is not None:
        return check_of(setting, skipped, NA, f"{ACS_UNIT} wrote nothing here, on purpose")
    if rows:
        return check_acs_registers(setting, acs_reading(rows))
    if props.get("Result") != "success" or props.get("ActiveState") != "active":
        state = f"{props.get('ActiveState', '?')}, result {props.get('Result', '?')}"
        return check_of(setting, f"{ACS_UNIT} {state}", DIFFERS, "the ACS unit did not succeed")
    summary = next((line for line in reversed(log) if "had ACS turned off" in line), "ran")
    return check_of(setting, f"{ACS_UNIT}: {summary}", OK)


def gpu_evidence(live: Live) -> str | None:
    """What in the snapshot shows an NVIDIA GPU on this machine, or None when nothing does.

    Facts the collector recorded, never a hostname or a SKU: nvidia-smi's rows; the NVIDIA
    display/3D functions on the PCI bus (``gpu-pci``: also without a driver, which is when the
    NVIDIA packages are most likely absent); the PCI ports above the GPUs that the ACS read found.
    """
    rows = gpu_records(live.snapshot) if live.snapshot.value(Section.GPU, "tool") == "ok" else []
    if rows:
        return f"nvidia-smi lists {len(rows)} GPU{'' if len(rows) == 1 else 's'}"
    on_pci = live.snapshot.value(Section.GPU_PCI, "count") or ""
    if on_pci.isdigit() and int(on_pci) > 0:
        return f"{on_pci} NVIDIA GPU{'' if on_pci == '1' else 's'} on the PCI bus"
    acs_rows = live.snapshot.values(Section.ACS, acs_word("gpus"))
    if acs_rows and not acs_reading(acs_rows).absent:
        return "NVIDIA GPUs on the PCI bus (the ACS read found them)"
    return None
