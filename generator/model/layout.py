"""One home for every bundle path and unit name, all built from ``TOOL``.

The renderer writes these paths, the bundle reader and ``verify`` read them, the rules name the
units, and the fixed scripts receive them as data (their data files, their units' ``ExecStart=``),
so renaming the tool or moving a file is one edit here. Bundle paths are relative to the bundle
directory; target paths (``/etc/…``) are where the overlay lands on the machine.
"""

from __future__ import annotations

from generator import TOOL
from generator.model.vendors import GPU_VENDORS, NVIDIA

# --- the bundle directory ---------------------------------------------------------------------
MANIFEST = "manifest.json"
PLAN_FILE = "plan.json"
# The bundle's in-toto Statement v1 with a SLSA provenance v1 predicate (render/provenance.py):
# every other file as a subject with its sha256, the inputs' digests, the goldtune version
PROVENANCE = "provenance.json"
# That statement signed with a site's key (`gen sign`): one DSSE envelope on one line, the
# *.intoto.jsonl form SLSA's tools read
PROVENANCE_ENVELOPE = "provenance.intoto.jsonl"
# The files that describe the bundle's other files and so are not listed in manifest.json
SEALS = frozenset({MANIFEST, PROVENANCE, PROVENANCE_ENVELOPE})
OVERLAY = "rootfs/"  # the root-filesystem overlay: OVERLAY + target path without its "/"
INSTALL_SH = "install.sh"
# install.sh's functions that the first-boot script runs too; install.sh sources it from beside it
INSTALL_LIB = "install-lib.sh"
INSTALL_LIST = "install.list"  # install.sh's data: files, services, steps
USER_DATA = "cloud-init/user-data"
USER_DATA_GZ = "cloud-init/user-data.gz"  # the same, gzip-compressed (cloud-init inflates it)
# A MIME multi-part message: the parts of --cloud-init-part, then the user-data as the last part
USER_DATA_MIME = "cloud-init/user-data.mime"
USER_DATA_MIME_GZ = "cloud-init/user-data.mime.gz"  # that, gzip-compressed
USER_DATA_FORMS = (USER_DATA, USER_DATA_GZ, USER_DATA_MIME, USER_DATA_MIME_GZ)
GZIP_FORMS = frozenset({USER_DATA_GZ, USER_DATA_MIME_GZ})
KERNEL_CMDLINE = "kernel-cmdline"
EXPLAIN = "EXPLAIN.md"
# os.driver nvidia-gpu-operator with a MIG plan: the layout as a ConfigMap for the Operator's MIG
# manager, which the site applies; the node label that selects the config in it
MIG_PARTED_CONFIG = "gpu-operator/mig-parted-config.yaml"
MIG_CONFIG_LABEL = "nvidia.com/mig.config"
MIG_CONFIG_MAP = f"{TOOL}-mig-parted-config"
# os.driver nvidia-gpu-operator: the GPU Operator chart's values the plan decided, for the site
OPERATOR_VALUES = "gpu-operator/values.yaml"
# os.driver amd-gpu-operator with partition modes: a ConfigMap for the AMD GPU Operator's device
# config manager and the node label that selects its profile (ROCm/gpu-operator@6df13c17
# docs/dcm/device-config-manager-configmap.md, applying-partition-profiles.rst)
DCM_CONFIG = "amd-gpu-operator/dcm-config.yaml"
DCM_CONFIG_MAP = f"{TOOL}-dcm-config"
DCM_PROFILE_LABEL = "dcm.amd.com/gpu-config-profile"
DCM_ACTIONS = frozenset({"compute-partition", "memory-partition"})
OPERATOR_CHART = "NVIDIA/gpu-operator@a22dbf67 deployments/gpu-operator/values.yaml"  # its keys
MIG_MANAGER_ACTIONS = frozenset({"mig", "mig-layout"})  # the GPU actions the MIG manager owns

# --- files the overlay installs (target paths) ------------------------------------------------
DROP_IN = f"90-{TOOL}"
SYSCTL_FILE = f"/etc/sysctl.d/{DROP_IN}.conf"
GRUB_FILE = f"/etc/default/grub.d/{DROP_IN}.cfg"
LIMITS_FILE = f"/etc/security/limits.d/{DROP_IN}.conf"
MANAGER_FILE = f"/etc/systemd/system.conf.d/{DROP_IN}.conf"
MODPROBE_FILE = f"/etc/modprobe.d/{DROP_IN}.conf"
MODULES_LOAD_FILE = f"/etc/modules-load.d/{DROP_IN}.conf"
TMPFILES_FILE = f"/etc/tmpfiles.d/{DROP_IN}.conf"
UDEV_FILE = f"/etc/udev/rules.d/60-{TOOL}-io-scheduler.rules"
# after 80-net-setup-link.rules, so NAME holds the interface's final name
IRQ_UDEV_FILE = f"/etc/udev/rules.d/99-{TOOL}-irq-affinity.rules"
TUNED_DIR = "/etc/tuned"
# Where tuned reads a local profile <dir>/<name>/tuned.conf: /etc/tuned up to 2.22
# (tuned/consts.py LOAD_DIRECTORIES), /etc/tuned/profiles from 2.23 on (USER_PROFILES_DIR, the
# only local one of CFG_DEF_PROFILE_DIRS); a distribution table's tuned.profiles_dir says which.
TUNED_PROFILES_DIRS = (TUNED_DIR, f"{TUNED_DIR}/profiles")
TUNED_ACTIVE = f"{TUNED_DIR}/active_profile"
TUNED_MODE = f"{TUNED_DIR}/profile_mode"
UNIT_DIR = "/etc/systemd/system"
# The node's container and Kubernetes layer (issue 14)
CONTAINERD_DROPIN = f"/etc/containerd/conf.d/{DROP_IN}.toml"
CONTAINERD_CONFIG = "/etc/containerd/config.toml"  # the image's own; 1.x imports conf.d from it
DOCKER_DAEMON_JSON = "/etc/docker/daemon.json"  # a whole file: dockerd reads no drop-ins
KUBELET_DROPIN_DIR = "/etc/kubernetes/kubelet.conf.d"  # kubelet --config-dir (>= 1.28)
KUBELET_DROPIN_NAME = f"{DROP_IN}.conf"
KUBELET_DROPIN = f"{KUBELET_DROPIN_DIR}/{KUBELET_DROPIN_NAME}"
# The --config-dir a distribution's own node agent starts kubelet with, where the bundle's drop-in
# goes instead (a distribution table's kubelet.config_dir; the plan's kubelet_dir): EKS's nodeadm
# passes /etc/kubernetes/kubelet/config.json.d (awslabs/amazon-eks-ami 81fec2e
# nodeadm/internal/kubelet/config.go kubeletConfigRoot, kubeletConfigDir) and writes its own
# 40-nodeadm.conf there, which 90-goldtune.conf sorts after. kubelet merges each *.conf of the
# directory (a JSON or YAML KubeletConfiguration with apiVersion and kind) in file-name order,
# a later one winning (kubernetes/kubernetes cmd/kubelet/app/server.go mergeKubeletConfigurations:
# dropinFileExtension ".conf", filepath.WalkDir, jsonpatch.MergePatch).
KUBELET_AGENT_DIRS = ("/etc/kubernetes/kubelet/config.json.d",)
KUBELET_DROPIN_DIRS = (KUBELET_DROPIN_DIR, *KUBELET_AGENT_DIRS)
# NCCL reads ~/.nccl.conf, then /etc/nccl.conf, at its first call; the environment wins over both
NCCL_CONF = "/etc/nccl.conf"
# RCCL (AMD's NCCL) reads ~/.rccl.conf, then /etc/rccl.conf, never /etc/nccl.conf: the same
# KEY=VALUE lines, the first assignment winning, a job's environment winning over both
# (ROCm/rccl src/misc/param.cc initEnv/setEnvFile; RCCL docs, "RCCL environment variables":
# NCCL_CONF_FILE, default ~/.rccl.conf or /etc/rccl.conf)
RCCL_CONF = "/etc/rccl.conf"
# The NCCL-style files by the kind that writes each (install.sh merges either with the image's own)
NCCL_STYLE_CONFS = {"nccl": NCCL_CONF, "rccl": RCCL_CONF}
# The overlay files whose paths cannot carry the tool's name (their consumers read one fixed
# path): install.sh's stale_candidate lists them, so a bundle that drops one removes it (an
# image's own nccl.conf or rccl.conf, kept by install.sh's merge_nccl_conf, is put back instead).
UNNAMED_TARGETS = frozenset({DOCKER_DAEMON_JSON, NCCL_CONF, RCCL_CONF})

# --- the fixed scripts and the data files they read -------------------------------------------
# The boot scripts (and a set's members, bundle_set.SET_ROOT): no package, maintainer scripts
# included, may place files under /usr/local (Debian Policy 9.1.2), and internal executables may
# live in a single subdirectory of /usr/lib (FHS 3.0 4.6, which Debian Policy 9.1.1 adopts;
# https://specifications.freedesktop.org/fhs/latest/usrLib.html). FHS 4.7 allows
# /usr/libexec/<package> instead (RHEL's choice), but /usr/lib/<package> is valid on every target.
# Bundles before 0.2.0 used /usr/local/libexec/<tool>: install-lib.sh's stale_candidate still
# takes that prefix as the tool's own, so an upgrade removes what the old record lists.
LIBEXEC = f"/usr/lib/{TOOL}"
SCRIPTS_DIR = "scripts"  # under templates/: the fixed scripts, copied verbatim


def libexec_script(name: str) -> str:
    """Where a fixed script of templates/scripts/ is installed."""
    return f"{LIBEXEC}/{name}"


# One GPU boot script per GPU vendor, its row's setup_script (generator/model/vendors.py): the
# same unit and data file, run by the script of the plan's vendor (gpu-setup: nvidia-smi,
# gpu-setup-amd: amd-smi). NVIDIA's is the one a plan that names no vendor gets.
VENDOR_GPU_SCRIPTS = tuple(libexec_script(spec.setup_script) for spec in GPU_VENDORS.values())
GPU_SCRIPT = libexec_script(NVIDIA.setup_script)
IRQ_SCRIPT = f"{LIBEXEC}/irq-affinity"
COLLECT_SCRIPT = f"{LIBEXEC}/collect"
ACS_SCRIPT = f"{LIBEXEC}/pcie-acs"
PREFLIGHT_SCRIPT = f"{LIBEXEC}/preflight"
# Writes the NCCL (RCCL) device lists that only the booted node knows (issue 38)
NCCL_SCRIPT = f"{LIBEXEC}/nccl-resolve"
DATA_DIR = f"/etc/{TOOL}"
GPU_DATA = f"{DATA_DIR}/gpu.conf"
IRQ_DATA = f"{DATA_DIR}/irq.conf"
COLLECT_DATA = f"{DATA_DIR}/collect.conf"
ACS_DATA = f"{DATA_DIR}/pcie-acs.conf"
PREFLIGHT_DATA = f"{DATA_DIR}/preflight.conf"
NCCL_DATA = f"{DATA_DIR}/nccl-resolve.conf"
# What the preflight unit found at this boot (tmpfs: a new boot judges again): "state<TAB>ok" or
# "state<TAB>mismatch", then one "mismatch<TAB>claim<TAB>file says<TAB>node has<TAB>depends" line
# per mismatch. irq-affinity and gpu-setup skip what depends on a claim that failed; the collector
# reads it for `gen verify` (generator/verify/preflight.py parses it).
PREFLIGHT_RESULT = f"/run/{TOOL}/preflight"
INSTALL_RECORD = f"/var/lib/{TOOL}/installed-files"  # what install.sh installed last time
# Verify-side tooling, not tuning: `gen verify BUNDLE` runs the package's own copy of the
# collector with the data file read from the bundle, so neither has to be on the machine.
# install.sh still installs them (an image can then collect its own snapshot for `--snapshot`);
# the cloud-init delivery leaves them out (about 15 KB, issue 13). verify judges them only when
# they are installed: absent is not-applicable, installed but not the bundle's still differs.
VERIFY_ONLY_TARGETS = frozenset({COLLECT_SCRIPT, COLLECT_DATA})
# The node's report to the fleet (issue 28): one fixed script writes the bundle's identity, its
# boot units' state and the boot-time preflight's result for node_exporter's textfile collector
# (knob prometheus_textfile) and for Node Feature Discovery's local source (knob nfd_features).
REPORT_SCRIPT = f"{LIBEXEC}/report"
REPORT_DATA = f"{DATA_DIR}/report.conf"
# The fixed scripts (templates/scripts/): comments explaining the code, not the plan.
FIXED_SCRIPTS = frozenset(
    {
        *VENDOR_GPU_SCRIPTS,
        IRQ_SCRIPT,
        ACS_SCRIPT,
        REPORT_SCRIPT,
        PREFLIGHT_SCRIPT,
        NCCL_SCRIPT,
    }
)


def compact_in_user_data(target: str) -> bool:
    """Whether the cloud-init user-data carries ``target`` without its comment lines, to fit the
    providers' size limits (generator/model/shellform.py): every overlay file but JSON, which has
    no comments. A config file's comments are the reasons EXPLAIN.md lists; manifest.json
    records the digest of both forms."""
    return not target.endswith(".json")


# The script cloud-init's runcmd runs at first boot, install.sh's run on a live system as calls
# of install-lib.sh's functions, and the library it sources (generator/render/firstboot.py). On
# tmpfs: they have done their work after that boot, and gen verify has nothing of them to judge.
FIRST_BOOT_SCRIPT = f"/run/{TOOL}/first-boot"
# Files the user-data writes under FIRST_BOOT_BUNDLE's rootfs/, not at their target, for the
# first-boot script to install with install.sh's install_file (bundle=FIRST_BOOT_BUNDLE): it
# merges daemon.json into the one in place (merge_daemon_json), where write_files would replace it
# whole (dockerd reads this one file; an image's registry mirrors, log options, data root).
FIRST_BOOT_BUNDLE = f"/run/{TOOL}"
# install-lib.sh as the user-data writes it, beside the staged rootfs/: the first-boot script
# sources it
FIRST_BOOT_LIB = f"{FIRST_BOOT_BUNDLE}/{INSTALL_LIB}"
INSTALLED_AT_FIRST_BOOT = frozenset({DOCKER_DAEMON_JSON})


def installed_at_first_boot(target: str) -> bool:
    """A file of INSTALLED_AT_FIRST_BOOT, or the bundle's tuned profile: install_file puts it
    where the image's tuned reads it (install-lib.sh tuned_place: /etc/tuned/profiles from tuned
    2.23 on), which a write_files path cannot follow."""
    return target in INSTALLED_AT_FIRST_BOOT or is_tuned_file(target)


def is_tuned_file(target: str) -> bool:
    """The tool's tuned profile, in either directory a tuned reads (TUNED_PROFILES_DIRS)."""
    directory, _, name = target.rpartition("/")
    where, _, profile = directory.rpartition("/")
    return name == "tuned.conf" and where in TUNED_PROFILES_DIRS and profile.startswith(f"{TOOL}-")


def other_tuned_place(target: str) -> str:
    """A tuned profile file's path in the other directory a tuned reads (TUNED_PROFILES_DIRS)."""
    old, new = TUNED_PROFILES_DIRS
    if target.startswith(f"{new}/"):
        return old + target.removeprefix(new)
    return new + target.removeprefix(old)


def first_boot_staged(target: str) -> str:
    """Where the user-data writes a file of INSTALLED_AT_FIRST_BOOT (install_file's source)."""
    return f"{FIRST_BOOT_BUNDLE}/rootfs{target}"


# Written at first boot by the cloud-init first-boot script when the boot loader took the bundle's
# kernel arguments and the running kernel lacks one: power_state's condition (tmpfs, so it is
# gone after the reboot it asks for).
REBOOT_MARKER = f"/run/{TOOL}/kernel-args-pending"

# --- units ------------------------------------------------------------------------------------
GPU_UNIT = f"{TOOL}-gpu.service"
# os.driver nvidia-gpu-operator: GPU_UNIT is started by this path unit once the Operator's driver
# container is ready, never at boot (the driver arrives after kubelet). The driver container's
# startup probe writes OPERATOR_DRIVER_READY once the module is loaded and nvidia-smi works in
# it, and its preStop removes it; the driver root is mounted on the host at OPERATOR_DRIVER_ROOT
# (NVIDIA/gpu-operator@a22dbf67 assets/state-driver/0400_configmap.yaml, 0500_daemonset.yaml,
# cmd/nvidia-validator/main.go defaultDriverInstallDir; its validator runs
# `chroot /run/nvidia/driver nvidia-smi`).
GPU_PATH_UNIT = f"{TOOL}-gpu.path"
OPERATOR_DRIVER_ROOT = "/run/nvidia/driver"
OPERATOR_DRIVER_READY = "/run/nvidia/validations/.driver-ctr-ready"
IRQ_UNIT = f"{TOOL}-irq-affinity.service"
ACS_UNIT = f"{TOOL}-pcie-acs.service"
PREFLIGHT_UNIT = f"{TOOL}-preflight.service"
PREFLIGHT_LOG_TAG = f"{TOOL}-preflight"
GPU_LOG_TAG = f"{TOOL}-gpu"  # the units' SyslogIdentifier= and the scripts' message prefix
IRQ_LOG_TAG = f"{TOOL}-irq-affinity"
# The NCCL (RCCL) settings whose value only the booted node knows: NCCL_IB_HCA from the compute
# NICs' PCI addresses or role facts, NCCL_SOCKET_IFNAME from the socket NICs' PCI addresses. The
# plan's value is NCCL_AT_BOOT and the rule of the search (never a value NCCL reads: no device or
# interface name has a '/'); nccl.conf carries the two marks between which NCCL_UNIT writes the
# lines it resolved, each boot, and nothing else of the file (install.sh merges the rest).
NCCL_UNIT = f"{TOOL}-nccl-resolve.service"
NCCL_LOG_TAG = f"{TOOL}-nccl-resolve"
NCCL_AT_BOOT = "boot/"
NCCL_BOOT_BEGIN = f"# {NCCL_LOG_TAG}: the lines below, up to its end mark, are written at boot"
NCCL_BOOT_END = f"# {NCCL_LOG_TAG}: end of the lines written at boot"
# The CUDA MPS control daemon (nvidia-cuda-mps-control -d), when the profile asks for MPS. The
# driver packages ship the binary but no unit; clients must use the same pipe directory
# (NVIDIA MPS docs, CUDA_MPS_PIPE_DIRECTORY; the default /tmp/nvidia-mps is not per-boot).
MPS_UNIT = f"{TOOL}-cuda-mps.service"
MPS_CONTROL = "/usr/bin/nvidia-cuda-mps-control"
MPS_PIPE_DIR = "/run/nvidia-mps"
MPS_LOG_DIR = "/var/log/nvidia-mps"
ACS_LOG_TAG = f"{TOOL}-pcie-acs"
CONTAINERD_UNIT = "containerd.service"
DOCKER_UNIT = "docker.service"
KUBELET_UNIT = "kubelet.service"
# The container runtimes whose units get a limits drop-in.
RUNTIME_UNITS = (CONTAINERD_UNIT, DOCKER_UNIT)
# The workloads that run on the GPUs, which the boot units run before.
WORKLOAD_UNITS = (*RUNTIME_UNITS, KUBELET_UNIT, "slurmd.service")
# Every unit that opens the GPUs and that GPU_UNIT runs before, so that nothing holds a GPU while
# it changes MIG mode ("In use by another client": NVIDIA's MIG user guide stops nvsm and dcgm
# first). DCGM's host engine (nvidia-dcgm.service; dcgm.service in DCGM 1.x, the name the MIG
# guide stops), the packaged DCGM exporter (dcgm-exporter packaging/config-files/systemd/
# nvidia-dcgm-exporter.service: it embeds a host engine without a separate one), DGX OS's nvsm,
# IMEX, this tool's MPS daemon, then the workloads. Ordering only: systemd ignores an ordering
# against a unit that is not installed (systemd-analyze verify accepts it).
GPU_CLIENT_UNITS = (
    "nvidia-dcgm.service",
    "dcgm.service",
    "nvidia-dcgm-exporter.service",
    "nvsm.service",
    "nvidia-imex.service",
    MPS_UNIT,
    *WORKLOAD_UNITS,
)
# AMD's GPU clients that the AMD GPU unit (gpu-setup-amd) runs before, as the NVIDIA unit runs
# before DCGM: a compute-partition change needs the GPUs idle (AMD's MI300X partitioning
# quick-start guide), so nothing may hold /dev/kfd then. The device metrics exporter's host
# package amdgpu-exporter ships gpuagent.service (the GPU reader, which opens the GPUs) and
# amd-metrics-exporter.service (After=gpuagent.service) (ROCm/device-metrics-exporter
# debian/usr/lib/systemd/system/, commit afd0fe8); the ROCm Data Center daemon's unit is
# rdc.service (ROCm/rdc server/rdc.service.in). AMD's Kubernetes device plugin and node labeller
# run as DaemonSet pods (ROCm/k8s-device-plugin k8s-ds-amdgpu-dp.yaml,
# k8s-ds-amdgpu-labeller.yaml), so kubelet.service, among the workloads, covers them.
AMD_GPU_CLIENT_UNITS = (
    "gpuagent.service",
    "amd-metrics-exporter.service",
    "rdc.service",
    *WORKLOAD_UNITS,
)
# The node's report (REPORT_SCRIPT): to node_exporter's textfile collector from a timer, and the
# preflight's state to NFD's features.d once a boot.
REPORT_LOG_TAG = f"{TOOL}-report"
METRICS_UNIT = f"{TOOL}-metrics.service"
METRICS_TIMER = f"{TOOL}-metrics.timer"
NODE_LABELS_UNIT = f"{TOOL}-node-labels.service"
# Debian's prometheus-node-exporter (bookworm 1.5.0-1+b6): /etc/default/prometheus-node-exporter
# has ARGS="" and the unit runs `prometheus-node-exporter $ARGS`, so the textfile collector
# (enabled by default) reads *.prom from the binary's built-in --collector.textfile.directory,
# which Debian sets to this directory (the path in the binary; its README.textfile: "create files
# in the /var/lib/prometheus/node-exporter directory that are readable by the prometheus user").
TEXTFILE_DIR = "/var/lib/prometheus/node-exporter"
METRIC_PREFIX = TOOL  # <prefix>_bundle_info, ...: gen verify --format prometheus and the report
TEXTFILE = f"{TEXTFILE_DIR}/{TOOL}.prom"
# Node Feature Discovery's local source reads every file of this directory but dot files
# (kubernetes-sigs/node-feature-discovery source/local/local.go featureFilesDir,
# getFeaturesFromFiles): the bundle's labels fixed at generation, and the preflight's state
# written by the report at boot beside them.
NFD_FEATURES_DIR = "/etc/kubernetes/node-feature-discovery/features.d"
NFD_FEATURE_FILE = f"{NFD_FEATURES_DIR}/{TOOL}"
NFD_PREFLIGHT_FILE = f"{NFD_FEATURES_DIR}/{TOOL}-preflight"
# The packaged NVIDIA persistence daemon, which gets a drop-in for its command line (issue 16).
PERSISTENCED_UNIT = "nvidia-persistenced.service"
# Every packaged unit the bundle may write a drop-in for (one file each).
DROPIN_UNITS = (*RUNTIME_UNITS, PERSISTENCED_UNIT)


def tuned_profile(profile_name: str) -> str:
    """The tuned profile a bundle installs and selects."""
    return f"{TOOL}-{profile_name}"


def kubelet_file(dropin_dir: str = KUBELET_DROPIN_DIR) -> str:
    return f"{dropin_dir}/{KUBELET_DROPIN_NAME}"


def tuned_file(profile_name: str, profiles_dir: str = TUNED_DIR) -> str:
    return f"{profiles_dir}/{tuned_profile(profile_name)}/tuned.conf"


def unit_file(unit: str) -> str:
    return f"{UNIT_DIR}/{unit}"


# The preflight unit, its script and data: installed by install.sh (an image), left out of the
# cloud-init user-data, which has no room for them under EC2's 16 KB (issue 28): a node tuned at
# first boot by cloud-init runs without a preflight, its IRQ and GPU units apply everything, and
# verify says the unit is not installed there (not-applicable), never that it is missing.
# The NCCL boot step (NCCL_UNIT) likewise: about 1.7 KB compressed, which took a dgx-b200 training
# user-data past 16 KB; a node tuned by cloud-init keeps nccl.conf's marks empty, NCCL_IB_HCA
# unset (NCCL then uses every RDMA port, as before issue 38), and verify says so.
IMAGE_ONLY_TARGETS = frozenset(
    {
        PREFLIGHT_SCRIPT,
        PREFLIGHT_DATA,
        unit_file(PREFLIGHT_UNIT),
        NCCL_SCRIPT,
        NCCL_DATA,
        unit_file(NCCL_UNIT),
    }
)


def unit_dropin(unit: str) -> str:
    """Our drop-in for a packaged unit, read after the unit file (systemd.unit(5))."""
    return f"{UNIT_DIR}/{unit}.d/{DROP_IN}.conf"


# kubelet reads KUBELET_DROPIN_DIR only with --config-dir (kubelet-config-file docs: defaults to
# "", disabled): kubeadm's 10-kubeadm.conf (kubernetes/release cmd/krel/templates/latest/kubeadm)
# starts it with $KUBELET_CONFIG_ARGS (--config=KUBEADM_KUBELET_CONFIG) and no --config-dir, so
# KUBELET_UNIT_DROPIN, read after it, gives that variable --config-dir too; ExecStart stays
# kubeadm's and KUBELET_EXTRA_ARGS (/etc/default/kubelet) the site's. kubelet 1.28 and 1.29 refuse
# --config-dir without KUBELET_CONFIG_DROPIN_DIR_ALPHA (any value; KEP-3983, an environment
# variable, not a feature gate); 1.30 and later ignore it; older kubelets lack the flag.
KUBEADM_KUBELET_CONFIG = "/var/lib/kubelet/config.yaml"
KUBELET_UNIT_DROPIN = unit_dropin(KUBELET_UNIT)
KUBELET_CONFIG_ARGS = f"--config={KUBEADM_KUBELET_CONFIG} --config-dir={KUBELET_DROPIN_DIR}"


def in_overlay(target: str) -> str:
    """``/etc/x.conf`` -> ``rootfs/etc/x.conf``."""
    return OVERLAY + target.removeprefix("/")


def target_of(bundle_path: str) -> str | None:
    """``rootfs/etc/x.conf`` -> ``/etc/x.conf``; None for a delivery file (install.sh…)."""
    return "/" + bundle_path.removeprefix(OVERLAY) if bundle_path.startswith(OVERLAY) else None
