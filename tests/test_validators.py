"""Every rendered file is accepted by the tool that really reads it (issue 5).

Two halves: each validator of tests/validators/ is first shown to *fail* on a deliberately broken
file and to pass its fixed twin (so a green matrix means something), then every validator runs on
the bundle of every shipped system x profile. A missing tool skips locally and fails in CI.
"""

from __future__ import annotations

import hashlib
import json
import os
import subprocess
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from pathlib import Path

import pytest

from tests.conftest import PROFILES, SYSTEMS, missing_tool
from tests.generate import generate
from tests.validators import tools
from tests.validators.checks_userland import TunedMachine, check_scripts_many, tuned_machine
from tests.validators.run import MissingTool, find_tool, run

pytestmark = pytest.mark.validators

BY_NAME = {validator.name: validator for validator in tools.VALIDATORS}


def judged(check: Callable[[Path], list[str]], bundle: Path) -> list[str]:
    try:
        return check(bundle)
    except MissingTool as missing:
        missing_tool(missing)
        raise


def make_bundle(root: Path, files: dict[str, str]) -> Path:
    """A fake bundle: bundle-relative path -> text; a text starting with #! is made executable."""
    for name, text in files.items():
        path = root / name
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(text)
        path.chmod(0o755 if text.startswith("#!") else 0o644)
    return root


# --- each validator can fail ---------------------------------------------------------------------


@dataclass(frozen=True)
class Case:
    validator: str
    id: str
    files: dict[str, str]
    expect: str  # a substring of one problem; "" = the sample is good


NFD_FILE = "rootfs/etc/kubernetes/node-feature-discovery/features.d/goldtune"
NFD_NS = "feature.node.kubernetes.io"
SCRIPT = "rootfs/usr/lib/goldtune/setup"
UNIT = "rootfs/etc/systemd/system/goldtune-test.service"
GOOD_SCRIPT = '#!/bin/sh\nset -eu\nprintf "%s\\n" "ok"\n'


def unit(body: str, exec_start: str = f"/{SCRIPT.removeprefix('rootfs/')}") -> dict[str, str]:
    text = (
        f"[Unit]\nDescription=test\n\n[Service]\nType=oneshot\nExecStart={exec_start}\n{body}\n"
        "[Install]\nWantedBy=multi-user.target\n"
    )
    return {UNIT: text, SCRIPT: GOOD_SCRIPT}


FIXED = Path(__file__).resolve().parents[1] / "templates" / "scripts"
GPU_READER = {"rootfs/usr/lib/goldtune/gpu-setup": (FIXED / "gpu-setup").read_text()}
IRQ_READER = {"rootfs/usr/lib/goldtune/irq-affinity": (FIXED / "irq-affinity").read_text()}
COLLECT_READER = {"rootfs/usr/lib/goldtune/collect": (FIXED / "collect").read_text()}
INSTALLER = {
    "install.sh": (FIXED / "install.sh").read_text(),
    "install-lib.sh": (FIXED / "install-lib.sh").read_text(),
    # install.sh sources the library only with the digest its manifest lists
    "manifest.json": json.dumps(
        {
            "files": [
                {
                    "mode": "0644",
                    "path": "install-lib.sh",
                    "sha256": hashlib.sha256((FIXED / "install-lib.sh").read_bytes()).hexdigest(),
                }
            ]
        },
        indent=2,
        sort_keys=True,
    ),
}
GPU_CONF = "rootfs/etc/goldtune/gpu.conf"
IRQ_CONF = "rootfs/etc/goldtune/irq.conf"
COLLECT_CONF = "rootfs/etc/goldtune/collect.conf"
INSTALL_LIST = (
    "tool\tgoldtune\nrecord\t/var/lib/goldtune/installed-files\nfile\t0644\t/etc/x.conf\n"
)

SYSTEM_CONF = "rootfs/etc/systemd/system.conf.d/90-test.conf"
TMPFILES = "rootfs/etc/tmpfiles.d/90-test.conf"
MODPROBE = "rootfs/etc/modprobe.d/90-test.conf"
MODULES_LOAD = "rootfs/etc/modules-load.d/90-test.conf"
SYSCTL = "rootfs/etc/sysctl.d/90-test.conf"
PLAN = "plan.json"
LIMITS = "rootfs/etc/security/limits.d/90-test.conf"
UDEV = "rootfs/etc/udev/rules.d/60-test.rules"
USER_DATA = "cloud-init/user-data"
TUNED = "rootfs/etc/tuned/goldtune-test/tuned.conf"
GRUB = "rootfs/etc/default/grub.d/90-test.cfg"
GRUB_GOOD = (
    'GRUB_CMDLINE_LINUX_DEFAULT="${GRUB_CMDLINE_LINUX_DEFAULT:+$GRUB_CMDLINE_LINUX_DEFAULT '
    '}iommu=pt"\n'
)
SCHEDULER_RULE = (
    'ACTION=="add|change", SUBSYSTEM=="block", KERNEL=="nvme[0-9]*n[0-9]*", '
    'ATTR{queue/scheduler}="none"\n'
)


def user_data(body: str) -> dict[str, str]:
    return {USER_DATA: body, SYSCTL: "vm.swappiness = 1\n"}


GOOD_USER_DATA = (
    '#cloud-config\nwrite_files:\n  - path: /etc/sysctl.d/90-test.conf\n    permissions: "0644"\n'
    "    content: |\n      vm.swappiness = 1\nruncmd:\n  - [sysctl, --system]\n"
)

# the sample bundle's install-lib.sh, and as the user-data carries it (without indentation)
FIRST_BOOT_LIBRARY = 'say() {\n    printf "%s\\n" "$*"\n}\n'
FIRST_BOOT_LIBRARY_FORM = 'say() {\nprintf "%s\\n" "$*"\n}\n'
FIRST_BOOT_PROLOGUE = "#!/bin/sh\nset -eu\numask 022\nLC_ALL=C\nexport LC_ALL\n"


def first_boot(
    main: str, library: str = FIRST_BOOT_LIBRARY_FORM, source: bool = True
) -> dict[str, str]:
    """A user-data that writes ``library`` where the first-boot script sources it (``source``)
    before ``main``; the bundle's install-lib.sh is FIRST_BOOT_LIBRARY."""
    script = FIRST_BOOT_PROLOGUE + (". /run/goldtune/install-lib.sh\n" if source else "")
    script += f"{main}\n"
    entries = "".join(
        f"  - path: {path}\n    content: |\n"
        + "".join(f"      {line}\n" for line in text.splitlines())
        for path, text in (
            ("/run/goldtune/install-lib.sh", library),
            ("/run/goldtune/first-boot", script),
        )
    )
    return {
        **user_data(GOOD_USER_DATA.replace("runcmd:", entries + "runcmd:")),
        "install.sh": GOOD_SCRIPT,
        "install-lib.sh": FIRST_BOOT_LIBRARY,
    }


CONTAINERD = "rootfs/etc/containerd/conf.d/90-test.toml"
CRI_TABLE = '[plugins."io.containerd.grpc.v1.cri".containerd]'
CRI_V3_TABLE = '[plugins."io.containerd.cri.v1.runtime".containerd]'
NVIDIA_V3 = (
    'default_runtime_name = "nvidia"\n'
    '[plugins."io.containerd.cri.v1.runtime".containerd.runtimes.nvidia]\n'
    'runtime_type = "io.containerd.runc.v2"\n'
    '[plugins."io.containerd.cri.v1.runtime".containerd.runtimes.nvidia.options]\n'
    'BinaryName = "/usr/bin/nvidia-container-runtime"\nSystemdCgroup = true\n'
)
DAEMON_JSON = "rootfs/etc/docker/daemon.json"
KUBELET = "rootfs/etc/kubernetes/kubelet.conf.d/90-test.conf"
# the --config-dir EKS's nodeadm passes, where an AL2023 bundle's drop-in goes
KUBELET_AGENT = "rootfs/etc/kubernetes/kubelet/config.json.d/90-test.conf"
KUBELET_HEAD = "apiVersion: kubelet.config.k8s.io/v1beta1\nkind: KubeletConfiguration\n"
RUNTIME_DROPIN = "rootfs/etc/systemd/system/containerd.service.d/90-test.conf"
NCCL_CONF = "rootfs/etc/nccl.conf"
RCCL_CONF = "rootfs/etc/rccl.conf"

CASES = [
    Case("units", "good", unit(""), ""),
    Case(
        "units",
        "runtime-dropin",
        {RUNTIME_DROPIN: "[Service]\nLimitMEMLOCK=infinity\nTasksMax=infinity\n"},
        "",
    ),
    Case(
        "units",
        "runtime-dropin-bad-limit",
        {RUNTIME_DROPIN: "[Service]\nLimitNOFILE=lots\n"},
        "Failed to parse resource value",
    ),
    Case(
        "containerd",
        "good",
        {CONTAINERD: f'version = 2\n{CRI_TABLE}\ndefault_runtime_name = "nvidia"\n'},
        "",
    ),
    Case(
        "containerd",
        "bare-word",
        {CONTAINERD: f"version = 2\n{CRI_TABLE}\ndefault_runtime_name = nvidia\n"},
        "failed to load TOML",
    ),
    Case(
        "containerd",
        "unknown-key",
        {CONTAINERD: f'version = 2\n{CRI_TABLE}\ndefault_runtime_nam = "nvidia"\n'},
        "containerd did not take",
    ),
    # containerd 2's version 3 form: read by containerd 2 only (1.6 would ignore its plugin ids)
    Case("containerd", "v3-good", {CONTAINERD: f"version = 3\n{CRI_V3_TABLE}\n{NVIDIA_V3}"}, ""),
    # version 3 with the version 2 table: nothing migrates it, the NVIDIA runtime is lost
    Case(
        "containerd",
        "v3-with-the-v2-table",
        {CONTAINERD: f'version = 3\n{CRI_TABLE}\ndefault_runtime_name = "nvidia"\n'},
        "containerd did not take",
    ),
    Case(
        "containerd",
        "v3-unknown-key",
        {CONTAINERD: f'version = 3\n{CRI_V3_TABLE}\ndefault_runtime_nam = "nvidia"\n'},
        "containerd did not take",
    ),
    Case(
        "containerd",
        "wrong-type",
        {CONTAINERD: f"version = 2\n{CRI_TABLE}\ndisable_snapshot_annotations = 3\n"},
        "containerd config dump",
    ),
    Case(
        "docker",
        "good",
        {
            DAEMON_JSON: '{"default-runtime": "nvidia", "default-shm-size": "8G", '
            '"runtimes": {"nvidia": {"path": "/usr/bin/nvidia-container-runtime"}}}'
        },
        "",
    ),
    Case(
        "docker",
        "unknown-key",
        {DAEMON_JSON: '{"default-shm": "8G"}'},
        "not a documented daemon.json key",
    ),
    Case("docker", "wrong-type", {DAEMON_JSON: '{"live-restore": "yes"}'}, "is not a bool"),
    Case(
        "docker",
        "unknown-runtime",
        {DAEMON_JSON: '{"default-runtime": "nvidia"}'},
        "neither runc nor in runtimes",
    ),
    Case("docker", "not-json", {DAEMON_JSON: '{"debug": true,}'}, "not JSON"),
    Case("nccl", "good", {NCCL_CONF: "# why: a reason\n\nNCCL_SOCKET_IFNAME==eth0\n"}, ""),
    Case("nccl", "comment-with-equals", {NCCL_CONF: "# iommu=pt\nNCCL_DEBUG=WARN\n"}, "older"),
    Case("nccl", "spaces", {NCCL_CONF: "NCCL_SOCKET_IFNAME = eth0\n"}, "not an NCCL_"),
    Case("nccl", "trailing-blank", {NCCL_CONF: "NCCL_DEBUG=WARN \n"}, "blanks at its ends"),
    Case("nccl", "twice", {NCCL_CONF: "NCCL_DEBUG=WARN\nNCCL_DEBUG=INFO\n"}, "keeps the first"),
    Case("nccl", "no-equals", {NCCL_CONF: "NCCL_DEBUG WARN\n"}, "NCCL skips it"),
    Case("nccl", "hca-good", {NCCL_CONF: "NCCL_IB_HCA==mlx5_0:1,mlx5_10\n"}, ""),
    Case(
        "nccl",
        "hca-too-many",
        {NCCL_CONF: "NCCL_IB_HCA==" + ",".join(f"mlx5_{i}" for i in range(17)) + "\n"},
        "older NCCL keeps the first 16",
    ),
    Case("nccl", "hca-port", {NCCL_CONF: "NCCL_IB_HCA=mlx5_0:x\n"}, "is not a number"),
    # RCCL's /etc/rccl.conf is read the same way (failed before: the validator did not look)
    Case("nccl", "rccl-comment-with-equals", {RCCL_CONF: "# iommu=pt\nNCCL_DEBUG=WARN\n"}, "older"),
    Case(
        "kubelet",
        "good",
        {
            KUBELET: KUBELET_HEAD + 'cpuManagerPolicy: "static"\nreservedMemory:\n'
            '  - numaNode: 0\n    limits:\n      memory: "1Gi"\n'
        },
        "",
    ),
    Case(
        "kubelet",
        "unknown-field",
        {KUBELET: KUBELET_HEAD + "cpuManagerPolicies: static\n"},
        "unknown field",
    ),
    Case(
        "kubelet",
        "bad-enum",
        {KUBELET: KUBELET_HEAD + "topologyManagerPolicy: single-numa\n"},
        "is not one of",
    ),
    Case("kubelet", "wrong-type", {KUBELET: KUBELET_HEAD + 'maxPods: "110"\n'}, "is not a int"),
    Case(
        "kubelet",
        "bad-quantity",
        {KUBELET: KUBELET_HEAD + "kubeReserved:\n  memory: 1.5 GiB\n"},
        "is not a quantity",
    ),
    Case(
        "kubelet",
        "no-header",
        {KUBELET: "cpuManagerPolicy: static\n"},
        "a drop-in needs apiVersion",
    ),
    # failed before: the validator looked in kubelet.conf.d only
    Case(
        "kubelet",
        "agent-dir-unknown-field",
        {KUBELET_AGENT: KUBELET_HEAD + "cpuManagerPolicies: static\n"},
        "unknown field",
    ),
    Case(
        "units",
        "unknown-key",
        unit("Afterr=network.target\n"),
        "Unknown key 'Afterr' in section [Service]",
    ),
    Case(
        "units",
        "bad-type",
        {**unit(""), UNIT: unit("")[UNIT].replace("oneshot", "oneshoot")},
        "Failed to parse service type",
    ),
    Case("units", "bad-boolean", unit("RemainAfterExit=maybe\n"), "Failed to parse boolean value"),
    Case(
        "units",
        "missing-script",
        unit("", exec_start="/usr/lib/goldtune/missing"),
        "is not executable",
    ),
    Case(
        "units",
        "dropin-of-driver-unit",
        {
            "rootfs/etc/systemd/system/nvidia-persistenced.service.d/50-test.conf": (
                "[Service]\nRestartt=always\n"
            )
        },
        "Unknown key 'Restartt'",
    ),
    # staged against Ubuntu's packaged unit (Type=forking, its own ExecStart): a drop-in that
    # does not reset ExecStart= first gives the service two, which systemd refuses
    Case(
        "units",
        "dropin-execstart-without-reset",
        {
            "rootfs/etc/systemd/system/nvidia-persistenced.service.d/90-goldtune.conf": (
                "[Service]\nExecStart=/usr/bin/nvidia-persistenced --persistence-mode\n"
            )
        },
        "more than one ExecStart=",
    ),
    Case(
        "units",
        "dropin-execstart-reset",
        {
            "rootfs/etc/systemd/system/nvidia-persistenced.service.d/90-goldtune.conf": (
                "[Service]\nExecStart=\nExecStart=/usr/bin/nvidia-persistenced --persistence-mode\n"
                "\n[Install]\nWantedBy=multi-user.target\n"
            )
        },
        "",
    ),
    Case(
        "system-conf",
        "good",
        {SYSTEM_CONF: "[Manager]\nDefaultLimitNOFILE=1048576\nDefaultLimitMEMLOCK=infinity\n"},
        "",
    ),
    Case(
        "system-conf",
        "bad-value",
        {SYSTEM_CONF: "[Manager]\nDefaultLimitNOFILE=lots\n"},
        "Failed to parse resource value, ignoring: lots",
    ),
    Case(
        "system-conf",
        "unknown-key",
        {SYSTEM_CONF: "[Manager]\nDefaultLimitMEMLOK=infinity\n"},
        "Unknown key 'DefaultLimitMEMLOK'",
    ),
    Case(
        "tmpfiles",
        "good",
        {TMPFILES: "w /sys/kernel/mm/transparent_hugepage/defrag - - - - defer+madvise\n"},
        "",
    ),
    Case(
        "tmpfiles",
        "unknown-type",
        {TMPFILES: "zz /sys/kernel/mm/x - - - - 1\n"},
        "Unknown modifiers in command 'zz'",
    ),
    Case("tmpfiles", "relative-path", {TMPFILES: "w sys/kernel/mm/x - - - - 1\n"}, "not absolute"),
    Case(
        "tmpfiles",
        "bad-age",
        {TMPFILES: "d /var/lib/goldtune 0755 root root soon -\n"},
        "Invalid age 'soon'",
    ),
    Case("modprobe", "good", {MODPROBE: "blacklist nouveau\noptions nouveau modeset=0\n"}, ""),
    Case(
        "modprobe",
        "misspelled-command",
        {MODPROBE: "blacklst nouveau\n"},
        "ignoring bad line starting with 'blacklst'",
    ),
    Case(
        "modprobe",
        "options-without-value",
        {MODPROBE: "options nouveau\n"},
        "ignoring bad line starting with 'options'",
    ),
    Case("modules-load", "good", {MODULES_LOAD: "# comment\nnvidia-peermem\n"}, ""),
    Case(
        "modules-load",
        "not-a-name",
        {MODULES_LOAD: "nvidia peermem\n"},
        "'nvidia peermem' is not a module name",
    ),
    Case(
        "modules-load",
        "disabled-by-modprobe",
        {MODULES_LOAD: "nouveau\n", MODPROBE: "install nouveau /bin/false\n"},
        "modprobe.d installs it as a no-op",
    ),
    Case(
        "sysctl",
        "good",
        {
            SYSCTL: "# c\n; c\nvm.swappiness = 1\nnet.ipv4.tcp_rmem = 4096 87380 16777216\n"
            "net.ipv4.conf.ibp24s0.arp_ignore = 1\nnet/ipv4/tcp_fastopen = 3\n"
        },
        "",
    ),
    Case(
        "sysctl",
        "unknown-key",
        {SYSCTL: "vm.swapiness = 10\n"},
        "vm.swapiness does not exist on the reference kernel",
    ),
    # net.core.skb_defer_max is new in mainline 5.19: Debian 12's 6.1 has it, RHEL 9 (judged by
    # the keys 5.10 and 6.1 both have, hardware_db/distros/rhel-9.yaml) is refused it
    Case(
        "sysctl",
        "newer-key-for-an-older-distribution",
        {PLAN: '{"distro": "rhel-9"}\n', SYSCTL: "net.core.skb_defer_max = 64\n"},
        "net.core.skb_defer_max does not exist on the reference kernel (sysctl-keys-5.10.txt)",
    ),
    Case(
        "sysctl",
        "newer-key-for-its-distribution",
        {PLAN: '{"distro": "debian-12"}\n', SYSCTL: "net.core.skb_defer_max = 64\n"},
        "",
    ),
    Case(
        "sysctl",
        "newer-key-portable",
        {PLAN: '{"distro": ""}\n', SYSCTL: "net.core.skb_defer_max = 64\n"},
        "net.core.skb_defer_max does not exist on the reference kernel (sysctl-keys-5.10.txt)",
    ),
    # removed in 5.13 (moved to debugfs): the 5.10 list has it, RHEL 9 is judged by 6.1 too
    Case(
        "sysctl",
        "removed-key-for-a-later-distribution",
        {PLAN: '{"distro": "rhel-9"}\n', SYSCTL: "kernel.sched_min_granularity_ns = 3000000\n"},
        "kernel.sched_min_granularity_ns does not exist on the reference kernel "
        "(sysctl-keys-6.1.txt)",
    ),
    Case(
        "sysctl",
        "unknown-distribution",
        {PLAN: '{"distro": "beos-5"}\n', SYSCTL: "vm.swappiness = 1\n"},
        "plan.json: distro 'beos-5' has no table in hardware_db/distros/",
    ),
    Case(
        "sysctl", "not-an-assignment", {SYSCTL: "vm.max_map_count 1048576\n"}, "not 'key = value'"
    ),
    Case(
        "sysctl",
        "real-systemd-sysctl",
        {SYSCTL: "vm.max_map_count 1048576\n"},
        "systemd-sysctl: rootfs/etc/sysctl.d/90-test.conf:1: Line is not an assignment, ignoring",
    ),
    Case(
        "sysctl",
        "text-for-number",
        {SYSCTL: "vm.swappiness = banana\n"},
        "vm.swappiness expects one integer",
    ),
    Case("sysctl", "short-vector", {SYSCTL: "net.ipv4.tcp_rmem = 10\n"}, "expects 3 integers"),
    Case(
        "sysctl",
        "set-twice",
        {SYSCTL: "vm.swappiness = 1\n", SYSCTL.replace("90", "91"): "vm.swappiness = 10\n"},
        "the later file wins silently",
    ),
    Case(
        "limits",
        "good",
        {
            LIMITS: (
                "*  soft nofile 1048576\n* hard nofile 1048576\n@gpu - memlock unlimited\n"
                "root - nproc -1\n"
                "1000: hard core 0\n%  - maxlogins 10\n"
            )
        },
        "",
    ),
    Case("limits", "unknown-type", {LIMITS: "* sotf nofile 1024\n"}, "unknown limit type 'sotf'"),
    Case(
        "limits",
        "unknown-item",
        {LIMITS: "* soft memlok unlimited\n"},
        "unknown limit item 'memlok'",
    ),
    Case("limits", "bad-value", {LIMITS: "* soft nofile lots\n"}, "wrong limit value 'lots'"),
    Case("limits", "trailing-garbage", {LIMITS: "* soft nofile 10k\n"}, "wrong limit value '10k'"),
    Case("limits", "incomplete-line", {LIMITS: "* hard\n"}, "invalid line '* hard' - skipped"),
    Case(
        "limits",
        "soft-above-hard",
        {LIMITS: "* soft nofile 4096\n* hard nofile 1024\n"},
        "is above its hard limit",
    ),
    Case(
        "limits", "above-nr-open", {LIMITS: "* hard nofile 2000000\n"}, "above fs.nr_open (1048576)"
    ),
    Case(
        "limits",
        "nr-open-raised",
        {LIMITS: "* hard nofile 2000000\n", SYSCTL: "fs.nr_open = 2097152\n"},
        "",
    ),
    Case("udev", "good", {UDEV: SCHEDULER_RULE}, ""),
    Case(
        "udev",
        "unknown-key",
        {UDEV: 'KERNL=="sda", ATTR{queue/scheduler}="none"\n'},
        "Invalid key 'KERNL'",
    ),
    Case(
        "udev",
        "assignment-for-match",
        {UDEV: 'ACTION="add", KERNEL=="sda", ATTR{queue/scheduler}="none"\n'},
        "Invalid operator for ACTION",
    ),
    Case(
        "udev",
        "missing-comma",
        {UDEV: 'KERNEL=="sda" ATTR{queue/scheduler}="none"\n'},
        "a comma between tokens is expected",
    ),
    Case(
        "udev",
        "unterminated-quote",
        {UDEV: 'KERNEL=="sda, ATTR{queue/scheduler}="none"\n'},
        "udev rules check failed",
    ),
    Case("cloud-init", "good", user_data(GOOD_USER_DATA), ""),
    Case(
        "cloud-init",
        "no-header",
        user_data(GOOD_USER_DATA.replace("#cloud-config\n", "")),
        'needs to begin with "#cloud-config"',
    ),
    Case(
        "cloud-init",
        "bad-property",
        user_data(GOOD_USER_DATA.replace("content:", "contents:")),
        "'contents' was unexpected",
    ),
    Case(
        "cloud-init",
        "octal-permissions",
        user_data(GOOD_USER_DATA.replace('"0644"', "0644")),
        "420 is not of type 'string'",
    ),
    Case(
        "cloud-init",
        "unknown-top-level-key",
        user_data(GOOD_USER_DATA + "write_file: []\n"),
        "unknown top-level key 'write_file'",
    ),
    Case(
        "cloud-init",
        "differs-from-rootfs",
        {**user_data(GOOD_USER_DATA), SYSCTL: "vm.swappiness = 10\n"},
        "write_files content of /etc/sysctl.d/90-test.conf differs",
    ),
    Case(
        "cloud-init",
        "misses-a-rootfs-file",
        {**user_data(GOOD_USER_DATA), LIMITS: "* - nofile 1024\n"},
        "write_files lacks /etc/security/limits.d/90-test.conf",
    ),
    Case("cloud-init", "first-boot-good", first_boot('say "ok"'), ""),
    Case(
        "cloud-init",
        "first-boot-own-function",
        first_boot('say() { rm -f /etc/x; }\nsay "ok"'),
        "defines a function: 'say() { rm -f /etc/x; }'",
    ),
    Case(
        "cloud-init",
        "first-boot-sources-nothing",
        first_boot('printf "%s\\n" "ok"', source=False),
        "does not start with install.sh's prologue and '. /run/goldtune/install-lib.sh'",
    ),
    Case(
        "cloud-init",
        "first-boot-library-not-the-bundles",
        first_boot('say "ok"', library=FIRST_BOOT_LIBRARY_FORM + "rm -f /etc/x\n"),
        "/run/goldtune/install-lib.sh is not the bundle's install-lib.sh without comments",
    ),
    Case(
        "cloud-init",
        "first-boot-unknown-profile",
        first_boot("tuned_profile='goldtune-missing'"),
        "selects 'goldtune-missing', not the bundle's",
    ),
    Case(
        "cloud-init",
        "first-boot-shellcheck",
        first_boot("echo $HOME/*"),
        "SC2086",
    ),
    Case(
        "cloud-init",
        "runcmd-shellcheck",
        user_data(GOOD_USER_DATA + "  - echo $HOME/*\n"),
        "SC2086",
    ),
    Case("scripts", "good", {"install.sh": GOOD_SCRIPT, SCRIPT: GOOD_SCRIPT}, ""),
    Case(
        "scripts",
        "unquoted",
        {"install.sh": "#!/bin/sh\nfor f in $(ls /etc); do echo $f; done\n"},
        "SC2045",
    ),
    Case(
        "scripts",
        "bashism-in-sh",
        {SCRIPT: "#!/bin/sh\nif [[ -e /x ]]; then echo y; fi\n"},
        "SC3010",
    ),
    Case(
        "scripts",
        "not-a-shell",
        {SCRIPT: "#!/usr/bin/python3\nprint(1)\n"},
        "is not a shell; no check covers it",
    ),
    Case(
        "tuned",
        "good",
        {
            TUNED: (
                "[main]\nsummary=test\ninclude=throughput-performance\n\n[cpu]\ngovernor=performance\n"
                "\n[sysctl]\nvm.dirty_background_ratio=3\n"
            )
        },
        "",
    ),
    Case(
        "tuned",
        "unknown-option",
        {TUNED: "[cpu]\ngoverner=performance\n"},
        "unknown option 'governer'",
    ),
    Case(
        "tuned",
        "unknown-plugin",
        {TUNED: "[vmm]\ntransparent_hugepages=madvise\n"},
        "no tuned plugin named 'vmm'",
    ),
    Case("tuned", "bad-syntax", {TUNED: "[main\nsummary=x\n"}, "Cannot parse"),
    Case(
        "tuned",
        "missing-include",
        {TUNED: "[main]\ninclude=throughput-performanc\n"},
        "Cannot find profile 'throughput-performanc'",
    ),
    Case(
        "tuned",
        "sysctl-overlap",
        {TUNED: "[sysctl]\nvm.swappiness=10\n", SYSCTL: "vm.swappiness = 1\n"},
        "sets sysctl vm.swappiness=10, but sysctl.d sets 1",
    ),
    Case(
        "tuned",
        "overlap-through-include",
        {TUNED: "[main]\ninclude=throughput-performance\n", SYSCTL: "vm.dirty_ratio = 7\n"},
        "sets sysctl vm.dirty_ratio=40, but sysctl.d sets 7",
    ),
    # install.sh selects "<base> <bundle profile>": throughput-performance's swappiness=10 is
    # merged in unless the bundle's profile restates sysctl.d's value (issue 16)
    Case(
        "tuned",
        "overlap-through-layering",
        {TUNED: "[cpu]\ngovernor=performance\n", SYSCTL: "vm.swappiness = 1\n"},
        "layered on throughput-performance sets sysctl vm.swappiness=10, but sysctl.d sets 1",
    ),
    Case(
        "tuned",
        "ratio-over-bytes-through-layering",
        {TUNED: "[cpu]\ngovernor=performance\n", SYSCTL: "vm.dirty_bytes = 8589934592\n"},
        "layered on throughput-performance sets sysctl vm.dirty_ratio=40, but sysctl.d sets "
        "vm.dirty_bytes",
    ),
    Case(
        "tuned",
        "restated-through-layering",
        {
            TUNED: "[sysctl]\nvm.swappiness=1\nnet.ipv4.tcp_rmem=4096 87380 268435456\n"
            "vm.dirty_ratio=0\n",
            SYSCTL: "vm.swappiness = 1\nnet.ipv4.tcp_rmem = 4096  87380 268435456\n"
            "vm.dirty_bytes = 8589934592\n",
        },
        "",
    ),
    Case("grub", "good", {GRUB: GRUB_GOOD, "kernel-cmdline": "iommu=pt\n"}, ""),
    Case(
        "grub",
        "unterminated-quote",
        {GRUB: 'GRUB_CMDLINE_LINUX_DEFAULT="iommu=pt\n', "kernel-cmdline": "iommu=pt\n"},
        "Unterminated quoted string",
    ),
    Case(
        "grub",
        "unquoted-assignment",
        {
            GRUB: "GRUB_CMDLINE_LINUX_DEFAULT=$GRUB_CMDLINE_LINUX_DEFAULT iommu=pt\n",
            "kernel-cmdline": "iommu=pt\n",
        },
        "SC2269",
    ),
    Case(
        "grub",
        "clobbers-default",
        {GRUB: 'GRUB_CMDLINE_LINUX_DEFAULT="iommu=pt"\n', "kernel-cmdline": "iommu=pt\n"},
        "expected 'quiet iommu=pt'",
    ),
    Case(
        "grub",
        "disagrees-with-kernel-cmdline",
        {GRUB: GRUB_GOOD, "kernel-cmdline": "iommu=pt nosmt\n"},
        "expected",
    ),
    Case(
        "grub",
        "changes-other-variables",
        {GRUB: GRUB_GOOD + "GRUB_TIMEOUT=0\n", "kernel-cmdline": "iommu=pt\n"},
        "the drop-ins also change GRUB_TIMEOUT",
    ),
    Case(
        "grub",
        "cmdline-without-dropin",
        {"kernel-cmdline": "iommu=pt\n"},
        "no GRUB drop-in carries them",
    ),
    # a distribution whose grub reads drop-ins needs one (debian-12.yaml boot_args.reads)...
    Case(
        "grub",
        "cmdline-without-dropin-debian",
        {PLAN: '{"distro": "debian-12"}\n', "kernel-cmdline": "iommu=pt\n"},
        "no GRUB drop-in carries them",
    ),
    # ...RHEL's does not (grub2-mkconfig sources only /etc/default/grub: rhel-8.yaml, rhel-9.yaml)
    Case(
        "grub",
        "cmdline-without-dropin-rhel",
        {PLAN: '{"distro": "rhel-8"}\n', "kernel-cmdline": "iommu=pt\n"},
        "",
    ),
    Case(
        "grub", "cmdline-too-long", {"kernel-cmdline": "x" * 2100 + "\n"}, "the kernel keeps 2047"
    ),
    Case(
        "data",
        "good",
        {
            **GPU_READER,
            GPU_CONF: "# r: x\nlog-as\tgt-gpu\n# r: y\necc\ton\n",
            **IRQ_READER,
            IRQ_CONF: "# r: x\npin\teth0\t0-3\n",
            **COLLECT_READER,
            COLLECT_CONF: "tool\tgoldtune\nbundle\tx_y\nsysctl\tvm.swappiness\n",
            **INSTALLER,
            "install.list": INSTALL_LIST,
            "rootfs/etc/x.conf": "x\n",
        },
        "",
    ),
    Case(
        "data",
        "gpu-bad-value",
        {**GPU_READER, GPU_CONF: "ecc\tmaybe\n"},
        "line 1: unknown key or value",
    ),
    Case(
        "data",
        "gpu-code-in-data",
        {**GPU_READER, GPU_CONF: "clocks\t$(reboot)\n"},
        "not one safe word",
    ),
    Case("data", "irq-bad-cpus", {**IRQ_READER, IRQ_CONF: "pin\teth0\tall\n"}, "not a CPU list"),
    Case(
        "data",
        "collect-unknown-section",
        {**COLLECT_READER, COLLECT_CONF: "tool\tgt\nbundle\tb\nsysctls\tx\n"},
        "unknown section",
    ),
    Case("data", "reader-missing", {GPU_CONF: "ecc\ton\n"}, "is not in the bundle"),
    Case(
        "data",
        "install-list-names-a-missing-file",
        {**INSTALLER, "install.list": INSTALL_LIST},
        "rootfs/etc/x.conf is missing",
    ),
    Case(
        "data",
        "install-list-bad-step",
        {**INSTALLER, "install.list": INSTALL_LIST + "step\treboot\n", "rootfs/etc/x.conf": "x\n"},
        "unknown step",
    ),
    Case(
        "data",
        "install-list-runtime-step",
        {
            **INSTALLER,
            "install.list": INSTALL_LIST + "step\truntime\tcontainerd,kubelet\n",
            "rootfs/etc/x.conf": "x\n",
        },
        "",
    ),
    Case(
        "data",
        "install-list-runtime-step-unknown-part",
        {
            **INSTALLER,
            "install.list": INSTALL_LIST + "step\truntime\tcontainerd,podman\n",
            "rootfs/etc/x.conf": "x\n",
        },
        "step runtime needs containerd, docker, kubelet or persistenced",
    ),
    Case(
        "nfd",
        "good",
        {NFD_FILE: "# why\nfeature.node.kubernetes.io/goldtune-digest=0123abcd\nvendor.io/x\n"},
        "",
    ),
    Case("nfd", "unprefixed", {NFD_FILE: "goldtune-digest=0123abcd\n"}, "no namespace"),
    Case("nfd", "long-value", {NFD_FILE: f"{NFD_NS}/d={'a' * 64}\n"}, "not a label value"),
    Case("nfd", "bad-end", {NFD_FILE: f"{NFD_NS}/state=ok-\n"}, "not a label value"),
    Case("nfd", "denied-ns", {NFD_FILE: "node.kubernetes.io/x=1\n"}, "kubernetes.io namespace"),
    Case("nfd", "directive", {NFD_FILE: f"# +because it is\n{NFD_NS}/x=1\n"}, "directive"),
    Case("nfd", "too-big", {NFD_FILE: f"# {'x' * 65536}\n{NFD_NS}/x=1\n"}, "NFD ignores"),
    Case("json", "good", {"manifest.json": '{"files": []}'}, ""),
    Case("json", "broken", {"manifest.json": '{"files": [}'}, "manifest.json: Expecting value"),
]


def test_every_validator_has_good_and_broken_cases() -> None:
    for validator in tools.VALIDATORS:
        expects = [case.expect for case in CASES if case.validator == validator.name]
        assert "" in expects and any(expects), (
            f"{validator.name} needs a good sample and a broken one"
        )


@pytest.mark.parametrize("case", CASES, ids=lambda case: f"{case.validator}-{case.id}")
def test_validator_judges_sample(case: Case, tmp_path: Path) -> None:
    bundle = make_bundle(tmp_path / "bundle", case.files)
    problems = judged(BY_NAME[case.validator].check, bundle)
    if case.expect:
        assert any(case.expect in problem for problem in problems), (
            "\n".join(problems) or "no problem reported"
        )
    else:
        assert problems == []


def test_system_conf_dropin_with_wrong_suffix_is_unclaimed(tmp_path: Path) -> None:
    """systemd reads only *.conf from system.conf.d: another suffix is silently ignored."""
    bundle = make_bundle(
        tmp_path / "bundle", {"rootfs/etc/systemd/system.conf.d/90-test.cfg": "[Manager]\n"}
    )
    assert tools.unclaimed_files(bundle) == ["rootfs/etc/systemd/system.conf.d/90-test.cfg"]


def test_cloud_init_cli_agrees_with_the_batch_check(tmp_path: Path) -> None:
    """`cloud-init schema --config-file` itself refuses what check_cloud_init refuses."""
    bundle = make_bundle(
        tmp_path / "bundle", user_data(GOOD_USER_DATA.replace("content:", "contents:"))
    )
    assert any(
        "'contents' was unexpected" in problem for problem in judged(tools.check_cloud_init, bundle)
    )
    result = run([find_tool("cloud-init"), "schema", "--config-file", str(bundle / USER_DATA)])
    assert result.returncode == 1 and "'contents' was unexpected" in result.stdout + result.stderr


def test_systemd_sysctl_never_writes(tmp_path: Path) -> None:
    """The real systemd-sysctl runs unprivileged: this machine's value stays as it was."""
    before = Path("/proc/sys/vm/swappiness").read_text()
    wanted = "17" if before.strip() != "17" else "18"
    bundle = make_bundle(tmp_path / "bundle", {SYSCTL: f"vm.swappiness = {wanted}\n"})
    assert judged(tools.check_sysctl, bundle) == []
    assert Path("/proc/sys/vm/swappiness").read_text() == before


# --- every shipped system x profile --------------------------------------------------------------

COMBOS = [(system, profile) for system in SYSTEMS for profile in PROFILES]


@pytest.fixture(scope="session")
def shipped_bundles(tmp_path_factory: pytest.TempPathFactory) -> dict[tuple[str, str], Path | str]:
    """Each shipped combination generated once per session: its bundle, or gen's error text."""
    root = tmp_path_factory.mktemp("shipped")
    bundles: dict[tuple[str, str], Path | str] = {}
    for system, profile in COMBOS:
        result = generate(system, profile, root / f"{system}-{profile}")
        bundles[(system, profile)] = (
            root / f"{system}-{profile}" if result.exit_code == 0 else result.output
        )
    return bundles


@pytest.fixture(scope="session")
def verdicts(
    shipped_bundles: dict[tuple[str, str], Path | str],
) -> dict[str, dict[Path, list[str]] | MissingTool]:
    """Every validator over every generated bundle, validators side by side on the CPUs."""
    bundles = [bundle for bundle in shipped_bundles.values() if isinstance(bundle, Path)]

    def judge(validator: tools.Validator) -> dict[Path, list[str]] | MissingTool:
        try:
            return validator.run_many(bundles)
        except MissingTool as missing:
            return missing

    with ThreadPoolExecutor(max_workers=max(2, os.cpu_count() or 2)) as pool:
        return dict(zip(BY_NAME, pool.map(judge, tools.VALIDATORS), strict=True))


def shipped_bundle(
    shipped_bundles: dict[tuple[str, str], Path | str], system: str, profile: str
) -> Path:
    bundle = shipped_bundles[(system, profile)]
    assert isinstance(bundle, Path), f"gen failed for {system} x {profile}:\n{bundle}"
    return bundle


@pytest.mark.parametrize("validator", sorted(BY_NAME))
@pytest.mark.parametrize(("system", "profile"), COMBOS)
def test_shipped_bundle_is_accepted(
    system: str, profile: str, validator: str, shipped_bundles, verdicts
) -> None:
    bundle = shipped_bundle(shipped_bundles, system, profile)
    verdict = verdicts[validator]
    if isinstance(verdict, MissingTool):
        missing_tool(verdict)
    assert verdict[bundle] == [], (
        f"{BY_NAME[validator].consumer} rejects {system} x {profile}:\n"
        + "\n".join(verdict[bundle])
    )


@pytest.mark.parametrize(("system", "profile"), COMBOS)
def test_shipped_bundle_has_no_unchecked_file(system: str, profile: str, shipped_bundles) -> None:
    assert tools.unclaimed_files(shipped_bundle(shipped_bundles, system, profile)) == []


# --- the docker variant of the runtime layer (no shipped profile uses it) ------------------------

DOCKER_PROFILE = "extends: training\ncontainers: docker\nkubernetes: false\n"


@pytest.mark.parametrize("validator", ["units", "docker", "cloud-init", "json"])
@pytest.mark.parametrize(("system", "runtime"), [("dgx-h100", "nvidia"), ("mi300x-8x-epyc", "amd")])
def test_docker_bundle_is_accepted(
    validator: str, system: str, runtime: str, tmp_path: Path
) -> None:
    """NVIDIA's runtime, and AMD's as amd-ctk runtime configure writes it (issue 31)."""
    (tmp_path / "training-docker.yaml").write_text(DOCKER_PROFILE)
    result = generate(system, tmp_path / "training-docker.yaml", tmp_path / "bundle")
    assert result.exit_code == 0, result.output
    bundle = tmp_path / "bundle"
    daemon = json.loads((bundle / "rootfs/etc/docker/daemon.json").read_text())
    assert runtime in daemon["runtimes"]
    assert (bundle / "rootfs/etc/systemd/system/docker.service.d/90-goldtune.conf").is_file()
    assert judged(BY_NAME[validator].check, bundle) == []
    assert tools.unclaimed_files(bundle) == []


# --- the node's report to the fleet (issue 28; no shipped profile turns it on) ------------------

REPORT_PROFILE = "extends: training-k8s\nprometheus_textfile: true\nnfd_features: true\n"


@pytest.mark.parametrize("validator", ["units", "data", "nfd", "scripts", "cloud-init", "json"])
def test_report_bundle_is_accepted(validator: str, tmp_path: Path) -> None:
    """The metrics service and timer (systemd-analyze verify), report.conf (the report script's
    --check), the NFD feature file (NFD's parser and label rules): a bundle with both knobs."""
    (tmp_path / "training-report.yaml").write_text(REPORT_PROFILE)
    result = generate("dgx-h100", tmp_path / "training-report.yaml", tmp_path / "bundle")
    assert result.exit_code == 0, result.output
    bundle = tmp_path / "bundle"
    for unit in (
        "goldtune-metrics.service",
        "goldtune-metrics.timer",
        "goldtune-node-labels.service",
    ):
        assert (bundle / "rootfs/etc/systemd/system" / unit).is_file()
    assert (bundle / NFD_FILE).is_file()
    assert judged(BY_NAME[validator].check, bundle) == []
    assert tools.unclaimed_files(bundle) == []


# --- RHEL 9's own tuned (its code and profiles at the upstream tag it ships) ---------------------

# RHEL 9's tuned releases (hardware_db/tuned/rhel-9-*.yaml), each as a tree of its own code and
# profiles (tuned/, profiles/): Debian's trixie and forky packages of 2.25.1 and 2.27.0, unpacked
# by tests/tools/install-tools.sh (CI has them), or any tag of a clone of
# github.com/redhat-performance/tuned named by GOLDTUNE_TUNED_GIT (2.24.0 has no Debian package).
TUNED_GIT = Path(os.environ.get("GOLDTUNE_TUNED_GIT", "/nonexistent"))
TUNED_TREES = (
    Path(os.environ.get("GOLDTUNE_TOOLS_DIR", "/usr/local/lib/goldtune-tools")) / "tuned-trees"
)
RHEL_9_TUNED_TAGS = ("v2.24.0", "v2.25.1", "v2.27.0")


def tuned_tree(tag: str, target: Path) -> Path:
    """tuned/ and profiles/ of ``tag``: the unpacked Debian package of that release, else the
    tag of the clone, unpacked with git archive (nothing is checked out); skipped with neither."""
    unpacked = TUNED_TREES / tag.removeprefix("v")
    if (unpacked / "tuned").is_dir() and (unpacked / "profiles").is_dir():
        return unpacked
    if not TUNED_GIT.is_dir():
        pytest.skip(f"tuned {tag}: not unpacked by install-tools.sh and no GOLDTUNE_TUNED_GIT")
    target.mkdir(parents=True)
    archive = subprocess.run(
        ["git", "-C", str(TUNED_GIT), "archive", tag, "tuned", "profiles"],
        capture_output=True,
        check=True,
        timeout=120,
    )
    subprocess.run(["tar", "-x", "-C", str(target)], input=archive.stdout, check=True, timeout=120)
    return target


# Whether throughput-performance's [sysctl.thunderx] (uname_regex=aarch64, cpuinfo_regex of the
# ThunderX parts: kernel.numa_balancing=0) counts on a machine: tuned creates it only on a match.
THUNDERX_GATE: dict[str, tuple[TunedMachine | None, bool]] = {
    "ThunderX (Cavium 0x43, part 0x0a1)": (tuned_machine("aarch64", "0x43", "0x0a1"), True),
    "ThunderX2 (Cavium 0x43, part 0x0af)": (tuned_machine("aarch64", "0x43", "0x0af"), True),
    "Neoverse N1 (Altra, Graviton2)": (tuned_machine("aarch64", "0x41", "0xd0c"), False),
    "Neoverse V2 (Grace)": (tuned_machine("aarch64", "0x41", "0xd4f"), False),
    "x86_64": (tuned_machine("x86_64", None, None), False),
    "aarch64, part not known": (tuned_machine("aarch64", "0xc0", None), True),
    "machine not known": (None, True),
}
NUMA_BALANCING_ON = {
    TUNED: "[sysctl]\nkernel.numa_balancing=1\n",
    SYSCTL: "kernel.numa_balancing = 1\n",
}


@pytest.mark.parametrize("tag", ["installed", "v2.27.0"])
def test_a_thunderx_unit_counts_only_on_the_machines_tuned_creates_it_on(
    tag: str, tmp_path: Path
) -> None:
    """A bundle setting kernel.numa_balancing=1, layered on throughput-performance: its ThunderX
    unit's 0 is a conflict on a ThunderX and where the machine or its CPU part is not known
    (the conservative judgement), and none on an Arm Neoverse or an x86_64 machine."""
    tree = None if tag == "installed" else tuned_tree(tag, tmp_path / "tuned")
    bundles = {
        name: make_bundle(tmp_path / str(index), NUMA_BALANCING_ON)
        for index, name in enumerate(THUNDERX_GATE)
    }
    machines = {
        bundles[name]: machine
        for name, (machine, _) in THUNDERX_GATE.items()
        if machine is not None
    }
    try:
        results = tools.check_tuned_many(list(bundles.values()), tree, machines)
    except MissingTool as missing:
        missing_tool(missing)
        raise
    conflict = (
        "layered on throughput-performance sets sysctl kernel.numa_balancing=0, but sysctl.d sets 1"
    )
    counted = {name: any(conflict in p for p in results[bundles[name]]) for name in bundles}
    assert counted == {name: expected for name, (_, expected) in THUNDERX_GATE.items()}


@pytest.mark.parametrize("tag", RHEL_9_TUNED_TAGS)
def test_a_dirty_bytes_bundle_layered_on_rhel_9s_tuned_keeps_sysctl_ds_limits(
    tag: str, tmp_path: Path
) -> None:
    """tuned 2.25+ sets throughput-performance's dirty limits in [vm] (dirty_ratio = 40, then
    dirty_bytes = 40%): layered on it with RHEL's own tuned code, the training bundle (dirty
    bytes in sysctl.d) drops them; without its [vm] drop= line the base's ratio wins."""
    result = generate("dgx-h100", "training", tmp_path / "bundle")
    assert result.exit_code == 0, result.output
    bundle = tmp_path / "bundle"
    tree = tuned_tree(tag, tmp_path / "tuned")
    assert judged(lambda b: tools.check_tuned_many([b], tree)[b], bundle) == []
    (conf,) = bundle.glob("rootfs/etc/tuned/*/tuned.conf")
    conf.write_text(
        "".join(line for line in conf.read_text().splitlines(True) if "drop=" not in line)
    )
    problems = tools.check_tuned_many([bundle], tree)[bundle]
    if tag == "v2.24.0":  # before 155f232 the dirty limits were [sysctl] keys, restated
        assert problems == []
    else:
        assert any(
            "layered on throughput-performance sets sysctl vm.dirty_ratio=40" in p for p in problems
        ), problems


def test_a_script_shared_by_bundles_is_checked_once_and_judged_in_each(tmp_path: Path) -> None:
    """check_scripts_many shellchecks each distinct text once (the fixed scripts are the same in
    every bundle): a finding in a shared copy is still every bundle's, named by its own path,
    and a bundle whose copy differs is judged on its own text."""
    broken = "#!/bin/sh\nfor f in $(ls /etc); do echo $f; done\n"
    first, second = (make_bundle(tmp_path / n, {"install.sh": broken}) for n in ("a", "b"))
    clean = make_bundle(tmp_path / "c", {"install.sh": GOOD_SCRIPT})
    results = check_scripts_many([first, second, clean])
    for bundle in (first, second):
        assert any("install.sh:2" in p and "SC2045" in p for p in results[bundle]), results
        assert not any(str(tmp_path) in p for p in results[bundle]), results
    assert results[clean] == []


def test_an_amd_gpu_data_file_is_judged_by_the_amd_script(tmp_path: Path) -> None:
    """gpu.conf is read by the GPU vendor's script the bundle carries: an MI300X bundle with a
    power limit has gpu-setup-amd, not gpu-setup (the property test found the validator looking
    for gpu-setup)."""
    profile = tmp_path / "amd.yaml"
    profile.write_text("intent: inference\ngpu_power_limit_percent: 90\n")
    out = tmp_path / "bundle"
    assert generate("mi300x-8x-epyc", profile, out).exit_code == 0
    assert (out / "rootfs/etc/goldtune/gpu.conf").is_file()
    assert tools.check_data_files(out) == []
