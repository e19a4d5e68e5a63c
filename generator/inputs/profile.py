"""The workload profile: what the machine is *for*.

A profile states intent and knobs (C-state policy, THP mode, clock locking, IRQ strategy…) and may
carry explicit overrides of single settings. It never holds hardware-dependent values: those come
from the rules. ``extends:`` layers profiles; every knob remembers which profile set it.
"""

# No `from __future__ import annotations` here: pydantic would have to eval every annotation
# string when the models are defined, which is a measurable part of start-up (bench/bench.py).
from pathlib import Path
from typing import Annotated, Any, Literal, NamedTuple

from pydantic import BeforeValidator, Field, StringConstraints

from generator.errors import InputError, Problem
from generator.inputs.hardware import find_input
from generator.inputs.hardware_spec import BundleName
from generator.inputs.schema import MigProfile, StrictModel, validate_model
from generator.inputs.yamlio import name_or_stem, read_catalog_entry, read_yaml_file
from generator.model.setting import SettingKind
from generator.paths import files_ending, profiles_dir

MAX_EXTENDS_DEPTH = 8
# Every MIG-capable GPU splits into at most seven GPU instances (NVIDIA MIG user guide,
# "Supported GPUs" and "Supported MIG Profiles"); each model's own profiles are checked later
# (plan/checks.py check_mig_layout).
MIG_MAX_INSTANCES = 7


def _bare_off(value: Any) -> Any:
    """YAML 1.1 (PyYAML) reads a bare ``off`` as false: for a knob whose word is "off", it is."""
    return "off" if value is False else value


# On a knob of words one of which is "off" (``tuned: off``, ``init_on_alloc: off``)
BARE_OFF = BeforeValidator(_bare_off)


class Override(StrictModel):
    """Force one setting of the plan to a value; the reason is mandatory, for the reviewer."""

    kind: SettingKind
    key: Annotated[
        str, StringConstraints(min_length=1, max_length=200, pattern=r"^[A-Za-z0-9_.:/*@+ -]+$")
    ]
    value: Annotated[str, StringConstraints(max_length=500, pattern=r"^[^\n\r\x00]*$")] | int
    reason: Annotated[
        str, StringConstraints(min_length=3, max_length=300, pattern=r"^[^\n\r\x00]*$")
    ]
    # A sysctl or kernel argument goldtune does not list (net.ipv4.ip_local_reserved_ports,
    # pcie_aspm=off): allowed when the override says so, with a warning; the grammar still holds.
    unlisted: bool = False
    # An override a precondition refuses (a known trap, a huge page size the kernel does not
    # have, CPU isolation taking the housekeeping CPUs): allowed only when the profile says, with
    # a reason, that the site accepts the risk; EXPLAIN.md marks the setting and warns.
    accept_risk: (
        Annotated[str, StringConstraints(min_length=3, max_length=300, pattern=r"^[^\n\r\x00]*$")]
        | None
    ) = None


class Knobs(StrictModel):
    """Intent and policy knobs. In a file every knob is optional; ``extends:`` fills the rest."""

    intent: Literal["inference", "training"] | None = None
    cstates: Literal["shallow", "default"] | None = None
    thp: Literal["madvise", "never"] | None = None
    hugepages_1g_percent: Annotated[int, Field(ge=0, le=100)] | None = None
    smt: Literal["keep", "disable"] | None = None
    gpu_clocks: Literal["boost", "lock-max"] | None = None
    gpu_compute_mode: Literal["default", "exclusive-process"] | None = None
    gpu_power_limit_percent: Annotated[int, Field(ge=10, le=100)] | None = None
    gpu_ecc: Literal["enable", "leave"] | None = None
    gpu_mig: Literal["disable", "leave"] | None = None
    # true: the CUDA MPS control daemon runs (a bool: YAML 1.1 reads a bare on/off as one)
    gpu_mps: bool | None = None
    # A MIG layout for every MIG-capable GPU: instances per GPU instance profile, as NVIDIA's
    # mig-parted writes mig-devices ({"1g.10gb": 2, "2g.20gb": 1, "3g.40gb": 1}); checked
    # against each GPU model's profiles in hardware_db. Implies MIG mode on.
    gpu_mig_layout: (
        Annotated[
            dict[MigProfile, Annotated[int, Field(ge=1, le=7)]], Field(min_length=1, max_length=7)
        ]
        | None
    ) = None
    # AMD Instinct partition modes (amd-smi set --compute-partition / --memory-partition), set
    # by the GPU boot unit; unset: the GPU's own (SPX, NPS1 on MI300X)
    gpu_compute_partition: Literal["SPX", "DPX", "TPX", "QPX", "CPX"] | None = None
    gpu_memory_partition: Literal["NPS1", "NPS2", "NPS4", "NPS8"] | None = None
    irq: Literal["pin", "irqbalance"] | None = None
    # PCIe ACS on the ports above GPUs and NICs; unset: from the intent (boot.acs)
    pcie_acs: Literal["keep", "disable-p2p"] | None = None
    # Page zeroing on allocation (init_on_alloc): "keep" leaves the kernel's build default, a
    # hardening; unset: off on GPU servers, as NVIDIA's base tuned profile (boot.init-on-alloc)
    init_on_alloc: Annotated[Literal["keep", "off"], BARE_OFF] | None = None
    # The tuned layer: "layered" (the bundle's tuned profile on the image's selection, tuned
    # required), or "off" (no tuned profile, no tuned required; each value only tuned carried
    # goes through sysfs instead: cpu.governor, cpu.energy-preference). Ubuntu installs no tuned.
    tuned: Annotated[Literal["layered", "off"], BARE_OFF] | None = None
    # An image's boot check (install.sh --root / --image-build) reboots once when a kernel argument
    # of the bundle is not on /proc/cmdline; unset or false: it only says so in the journal.
    reboot_for_kernel_args: bool | None = None
    headless: bool | None = None
    multinode: bool | None = None
    # The node's container and Kubernetes layer (issue 14): nothing of it unless asked for.
    containers: Literal["none", "containerd", "docker"] | None = None
    # Who configures the NVIDIA container runtime in the runtime's configuration: goldtune (the
    # default), or the GPU Operator's toolkit container, and then goldtune writes only the
    # runtime's limits and none of the keys the Operator writes (containers.nvidia-runtime).
    runtime_config: Literal["goldtune", "gpu-operator"] | None = None
    kubernetes: bool | None = None
    # kubelet's maxPods; kubeReserved memory is sized from it (11 MiB a pod: kubernetes.reserved)
    max_pods: Annotated[int, Field(ge=1, le=1024)] | None = None
    # Fleet visibility (issue 28), opt-in: a timer writes the node's report for node_exporter's
    # textfile collector; the bundle's labels (and the preflight's state) for NFD's local source.
    prometheus_textfile: bool | None = None
    nfd_features: bool | None = None


class ProfileFile(Knobs):
    name: BundleName | None = None
    description: str | None = None
    extends: str | None = None
    overrides: Annotated[list[Override], Field(max_length=500)] = []  # noqa: RUF012 -- pydantic copies field defaults


KNOB_NAMES: tuple[str, ...] = tuple(Knobs.model_fields)

# What a knob is when no profile in the chain sets it. ``intent`` has no default: it is required.
KNOB_DEFAULTS: dict[str, Any] = {
    "cstates": "default",
    "thp": "madvise",
    "hugepages_1g_percent": 0,
    "smt": "keep",
    "gpu_clocks": "boost",
    "gpu_compute_mode": "default",
    "gpu_power_limit_percent": None,
    "gpu_ecc": "enable",
    "gpu_mig": "leave",
    "gpu_mps": False,
    "gpu_mig_layout": None,
    "gpu_compute_partition": None,
    "gpu_memory_partition": None,
    "irq": "pin",
    "pcie_acs": None,
    "init_on_alloc": None,
    "tuned": "layered",
    "reboot_for_kernel_args": False,
    "headless": True,
    "multinode": False,
    "containers": "none",
    "runtime_config": "goldtune",
    "kubernetes": False,
    "max_pods": 110,  # kubelet's own default (KubeletConfiguration v1beta1 maxPods)
    "prometheus_textfile": False,
    "nfd_features": False,
}
DEFAULT_ORIGIN = "goldtune default"


class Profile(NamedTuple):
    """A resolved profile: every knob has a value and the name of the profile that set it.

    Rules read knobs through the typed properties below (one per knob of ``Knobs``; a test
    checks that), so a misspelt knob is an error mypy and the tests both see. A NamedTuple, as
    the other value records: a frozen dataclass compiles its methods at every start (~0.7 ms).
    """

    name: str
    description: str
    chain: tuple[str, ...]  # the profile itself first, then what it extends
    knobs: dict[str, Any]
    origins: dict[str, str]
    overrides: tuple[Override, ...]
    source: str = ""  # the profile file as given

    @property
    def intent(self) -> str:
        return str(self.knobs["intent"])

    @property
    def cstates(self) -> str:
        return str(self.knobs["cstates"])

    @property
    def thp(self) -> str:
        return str(self.knobs["thp"])

    @property
    def hugepages_1g_percent(self) -> int:
        return int(self.knobs["hugepages_1g_percent"])

    @property
    def smt(self) -> str:
        return str(self.knobs["smt"])

    @property
    def gpu_clocks(self) -> str:
        return str(self.knobs["gpu_clocks"])

    @property
    def gpu_compute_mode(self) -> str:
        return str(self.knobs["gpu_compute_mode"])

    @property
    def gpu_power_limit_percent(self) -> int | None:
        value = self.knobs["gpu_power_limit_percent"]
        return None if value is None else int(value)

    @property
    def gpu_ecc(self) -> str:
        return str(self.knobs["gpu_ecc"])

    @property
    def gpu_mig(self) -> str:
        return str(self.knobs["gpu_mig"])

    @property
    def gpu_mps(self) -> bool:
        return bool(self.knobs["gpu_mps"])

    @property
    def gpu_mig_layout(self) -> dict[str, int] | None:
        value = self.knobs["gpu_mig_layout"]
        return None if value is None else {str(name): int(n) for name, n in value.items()}

    @property
    def gpu_compute_partition(self) -> str | None:
        value = self.knobs["gpu_compute_partition"]
        return None if value is None else str(value)

    @property
    def gpu_memory_partition(self) -> str | None:
        value = self.knobs["gpu_memory_partition"]
        return None if value is None else str(value)

    @property
    def irq(self) -> str:
        return str(self.knobs["irq"])

    @property
    def pcie_acs(self) -> str | None:
        """keep | disable-p2p, or None: decided from the intent and the machine (boot.acs)."""
        value = self.knobs["pcie_acs"]
        return None if value is None else str(value)

    @property
    def init_on_alloc(self) -> str | None:
        """keep | off, or None: off on GPU servers (boot.init-on-alloc)."""
        value = self.knobs["init_on_alloc"]
        return None if value is None else str(value)

    @property
    def tuned(self) -> str:
        """layered | off: whether the bundle has a tuned profile (and requires tuned)."""
        return str(self.knobs["tuned"])

    @property
    def reboot_for_kernel_args(self) -> bool:
        return bool(self.knobs["reboot_for_kernel_args"])

    @property
    def headless(self) -> bool:
        return bool(self.knobs["headless"])

    @property
    def multinode(self) -> bool:
        return bool(self.knobs["multinode"])

    @property
    def containers(self) -> str:
        return str(self.knobs["containers"])

    @property
    def runtime_config(self) -> str:
        """goldtune | gpu-operator: who writes the NVIDIA runtime into the runtime's config."""
        return str(self.knobs["runtime_config"])

    @property
    def kubernetes(self) -> bool:
        return bool(self.knobs["kubernetes"])

    @property
    def max_pods(self) -> int:
        return int(self.knobs["max_pods"])

    @property
    def prometheus_textfile(self) -> bool:
        return bool(self.knobs["prometheus_textfile"])

    @property
    def nfd_features(self) -> bool:
        return bool(self.knobs["nfd_features"])


def find_profile_file(reference: str, folder: Path, relative_to: Path | None = None) -> Path:
    """A path, or the name of a shipped profile (``is_path_reference`` says which)."""
    choices = [path.stem for path in files_ending(folder, ".yaml")]
    return find_input(reference, folder, "profile", choices, relative_to)


def _find_parent(reference: str, folder: Path, child: Path) -> Path:
    """``extends:`` of ``child``: a path is relative to the child's directory; a name is shipped."""
    try:
        return find_profile_file(reference, folder, relative_to=child.parent)
    except InputError as error:
        problem = error.problems[0]
        message = f"{problem.source}: {problem.message}"
        raise InputError(Problem(str(child), "extends", message, problem.hint)) from None


def _read_chain(reference: str, folder: Path) -> list[tuple[ProfileFile, Path]]:
    chain: list[tuple[ProfileFile, Path]] = []
    seen: list[str] = []
    path = find_profile_file(reference, folder)
    while True:
        key = str(path.resolve())
        if key in seen:
            cycle = " -> ".join([Path(s).stem for s in seen] + [path.stem])
            raise InputError(Problem(str(chain[-1][1]), "extends", f"extends cycle: {cycle}"))
        if len(chain) >= MAX_EXTENDS_DEPTH:
            raise InputError(
                Problem(
                    str(chain[-1][1]), "extends", f"more than {MAX_EXTENDS_DEPTH} levels of extends"
                )
            )
        seen.append(key)
        # a shipped profile (by name) is an entry of the profiles folder: no link below it
        raw = read_catalog_entry(folder, path) if path.parent == folder else read_yaml_file(path)
        data = name_or_stem(raw, path)
        chain.append((validate_model(ProfileFile, data, str(path)), path))
        parent = chain[-1][0].extends
        if parent is None:
            return chain
        path = _find_parent(parent, folder, path)


def _merge_overrides(chain: list[tuple[ProfileFile, Path]]) -> tuple[Override, ...]:
    """Overrides of a child replace those of a parent for the same (kind, key)."""
    merged: dict[tuple[str, str], Override] = {}
    for profile, _ in reversed(chain):
        for override in profile.overrides:
            merged[(override.kind, override.key)] = override
    return tuple(merged.values())


# Overrides of a setting other settings are sized from: the knob that feeds both instead.
SIZED_BY_KNOB = {("kubelet", "maxPods"): "max_pods"}


def _refuse_sized_overrides(chain: list[tuple[ProfileFile, Path]]) -> None:
    """An override of kubelet maxPods would leave kubeReserved memory sized for another count."""
    for profile, path in chain:
        for index, override in enumerate(profile.overrides):
            knob = SIZED_BY_KNOB.get((override.kind, override.key))
            if knob is not None:
                raise InputError(
                    Problem(
                        str(path),
                        f"overrides[{index}].key",
                        f"{override.kind} {override.key} is set by the knob {knob} (other "
                        f"settings are sized from it): write {knob}: {override.value} instead",
                    )
                )


def profile_files(reference: str, folder: Path | None = None) -> tuple[Path, ...]:
    """Every file a profile is read from: its own, then each one it extends, in turn (the
    manifest's digest is the first one's)."""
    return tuple(path for _, path in _read_chain(reference, folder or profiles_dir()))


def load_profile(reference: str, folder: Path | None = None) -> tuple[Profile, Path]:
    chain = _read_chain(reference, folder or profiles_dir())
    leaf, leaf_path = chain[0]
    knobs: dict[str, Any] = dict(KNOB_DEFAULTS)
    origins = dict.fromkeys(KNOB_DEFAULTS, DEFAULT_ORIGIN)
    for profile, _ in reversed(chain):
        for knob in profile.model_fields_set & set(KNOB_NAMES):
            knobs[knob] = getattr(profile, knob)
            origins[knob] = profile.name or ""
    if knobs.get("intent") is None:
        raise InputError(
            Problem(
                str(leaf_path),
                "intent",
                "required: inference or training (here or in a profile it extends)",
            )
        )
    if knobs["gpu_mig"] == "disable" and knobs["gpu_mig_layout"] is not None:
        raise InputError(
            Problem(
                str(leaf_path),
                "gpu_mig_layout",
                f"a MIG layout needs MIG on, but gpu_mig is disable (set by "
                f"{origins['gpu_mig']}); drop one of the two",
            )
        )
    _refuse_sized_overrides(chain)
    layout = knobs["gpu_mig_layout"]
    if layout is not None and sum(layout.values()) > MIG_MAX_INSTANCES:
        raise InputError(
            Problem(
                str(leaf_path),
                "gpu_mig_layout",
                f"{sum(layout.values())} instances (set by {origins['gpu_mig_layout']}): no GPU "
                f"has more than {MIG_MAX_INSTANCES} MIG instances",
            )
        )
    assert leaf.name is not None
    resolved = Profile(
        name=leaf.name,
        description=leaf.description or "",
        chain=tuple(profile.name or "" for profile, _ in chain),
        knobs=knobs,
        origins=origins,
        overrides=_merge_overrides(chain),
        source=str(leaf_path),
    )
    return resolved, leaf_path
