"""Compare a snapshot of a running machine (see ``generator.verify.snapshot``) with a bundle's plan.

One small function per setting kind reads what the collector recorded and says ok, differs,
missing, or not applicable here with the reason. What a kind measures:

- ``sysctl``: /proc/sys; ``kernel-arg``: /proc/cmdline, then its effect where the kernel shows it
  (module parameters, THP mode, "Unknown kernel command line parameters");
- ``limit``: /proc/self/limits inside a PAM session (runuser) of the domain's user, ``*`` as nobody;
- ``systemd-manager``: ``systemctl show`` of the manager; ``modprobe``: ``modprobe --showconfig``
  and /proc/modules; ``module-load``: /proc/modules; ``sysfs``: the file, ``[selected]`` value;
- ``udev``: the scheduler of every disk of that kind that the bundle's rules match;
- ``tuned``: the active profile, the live value where tuned's option has one, else
  ``tuned-adm verify``;
- ``gpu``: ``nvidia-smi --query-gpu``, and ``nvidia-smi mig -lgi`` for a MIG layout; ``irq``:
  smp_affinity_list of the interface's MSI IRQs;
- ``service``: ``systemctl is-enabled``, and ``is-active`` for a daemon of the bundle's own;
- ``unit-dropin``: ``systemctl show`` of the runtime's unit, then its process's /proc/<pid>/limits;
  a daemon's ExecStart: the arguments of its running process (/proc/<pid>/cmdline); WantedBy:
  ``systemctl is-enabled``;
  ``containerd``: ``containerd config dump``; ``docker``: ``docker info``'s default runtime;
  ``kubelet``: kubelet started with ``--config-dir`` on the drop-in directory, then the
  configuration it merged from the files it read and its flags (its /configz, rebuilt).
"""

from __future__ import annotations

from collections.abc import Callable

from generator.bundle.read import Bundle
from generator.model.kinds import KIND_SPECS
from generator.model.setting import Setting
from generator.verify.checks_gpu import check_gpu, check_irq, check_pcie_acs
from generator.verify.checks_host import (
    check_kernel_arg,
    check_limit,
    check_manager,
    check_modprobe,
    check_module_load,
    check_sysctl,
    check_sysfs,
    check_tuned,
    check_udev,
)
from generator.verify.checks_runtime import (
    check_containerd,
    check_docker,
    check_kubelet,
    check_nccl,
    check_service,
    check_unit_dropin,
)
from generator.verify.live_state import MISSING, Live
from generator.verify.snapshot import Snapshot
from generator.verify.verdicts import Check, check_of

# Check name (``live_check`` of a row of generator.model.kinds.KINDS) -> how a snapshot judges it.
CHECKS: dict[str, Callable[[Setting, Live], Check]] = {
    "sysctl": check_sysctl,
    "kernel-arg": check_kernel_arg,
    "limit": check_limit,
    "systemd-manager": check_manager,
    "modprobe": check_modprobe,
    "module-load": check_module_load,
    "sysfs": check_sysfs,
    "udev": check_udev,
    "tuned": check_tuned,
    "gpu": check_gpu,
    "irq": check_irq,
    "pcie-acs": check_pcie_acs,
    "service": check_service,
    "unit-dropin": check_unit_dropin,
    "containerd": check_containerd,
    "docker": check_docker,
    "kubelet": check_kubelet,
    "nccl": check_nccl,
}


def check_settings(bundle: Bundle, snapshot: Snapshot) -> list[Check]:
    live = Live.of(snapshot, bundle)
    return [check_live(setting, live) for setting in bundle.plan.settings]


def check_live(setting: Setting, live: Live) -> Check:
    spec = KIND_SPECS.get(setting.kind)
    check = CHECKS.get(spec.live_check) if spec else None
    if check is None:  # a plan.json of another goldtune version; tests/test_kinds.py covers ours
        return check_of(
            setting, "?", MISSING, f"this goldtune cannot judge a {setting.kind} setting"
        )
    return check(setting, live)
