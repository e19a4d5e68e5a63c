"""containers.*: the runtime's limits, the NVIDIA runtime, /dev/shm; nothing without a runtime."""

from __future__ import annotations

import pytest

from generator.inputs.distro import Containerd, load_distros
from generator.inputs.facts import Facts
from generator.model.containerd import NOT_RENAMED, cri_runtime_table
from generator.model.setting import Setting
from generator.plan.known_keys import NR_OPEN_DEFAULT
from generator.rules import containers, limits

from .helpers import (
    H100X8,
    L4X1,
    MI300X8,
    Case,
    case_ids,
    check_case,
    facts,
    notes_of,
    profile,
    settings_of,
)


def dropin(unit: str) -> set[tuple[str, str, str]]:
    return {
        ("unit-dropin", f"{unit} LimitMEMLOCK", "infinity"),
        ("unit-dropin", f"{unit} LimitNOFILE", "1048576"),
        ("unit-dropin", f"{unit} TasksMax", "infinity"),
    }


CRI = 'plugins."io.containerd.grpc.v1.cri".containerd'
CONTAINERD_NVIDIA = {
    ("containerd", f"{CRI}.default_runtime_name", '"nvidia"'),
    ("containerd", f"{CRI}.runtimes.nvidia.runtime_type", '"io.containerd.runc.v2"'),
    (
        "containerd",
        f"{CRI}.runtimes.nvidia.options.BinaryName",
        '"/usr/bin/nvidia-container-runtime"',
    ),
    ("containerd", f"{CRI}.runtimes.nvidia.options.SystemdCgroup", "true"),
}
DOCKER_NVIDIA = {
    ("docker", "default-runtime", '"nvidia"'),
    ("docker", "runtimes.nvidia.path", '"/usr/bin/nvidia-container-runtime"'),
}
DOCKER_MEMLOCK = {
    ("docker", "default-ulimits.memlock.Name", '"memlock"'),
    ("docker", "default-ulimits.memlock.Soft", "-1"),
    ("docker", "default-ulimits.memlock.Hard", "-1"),
}


def docker_shm(size: str) -> set[tuple[str, str, str]]:
    return {("docker", "default-shm-size", f'"{size}"')} | DOCKER_MEMLOCK


CASES: tuple[Case, ...] = (
    Case("limits-none", containers.runtime_limits, set()),
    Case(
        "limits-containerd",
        containers.runtime_limits,
        dropin("containerd.service"),
        knobs={"containers": "containerd"},
    ),
    Case(
        "limits-docker-and-its-containerd",
        containers.runtime_limits,
        dropin("docker.service") | dropin("containerd.service"),
        knobs={"containers": "docker"},
    ),
    Case("nvidia-none", containers.nvidia_runtime, set(), hw={"gpus": [H100X8]}),
    Case(
        "nvidia-containerd",
        containers.nvidia_runtime,
        CONTAINERD_NVIDIA,
        hw={"gpus": [H100X8]},
        intent="training",
        knobs={"containers": "containerd", "kubernetes": True},
        note="only through an imports entry of /etc/containerd/config.toml",
    ),
    Case(
        "nvidia-docker",
        containers.nvidia_runtime,
        DOCKER_NVIDIA,
        hw={"gpus": [L4X1]},
        knobs={"containers": "docker"},
    ),
    # runtime_config: gpu-operator: the Operator's toolkit writes the runtime keys; goldtune none
    # (on main the knob did not exist and goldtune always named /usr/bin/nvidia-container-runtime)
    Case(
        "nvidia-containerd-gpu-operator",
        containers.nvidia_runtime,
        set(),
        hw={"gpus": [H100X8]},
        intent="training",
        knobs={"containers": "containerd", "kubernetes": True, "runtime_config": "gpu-operator"},
        note="/etc/containerd/conf.d/99-nvidia.toml",
    ),
    Case(
        "nvidia-docker-gpu-operator",
        containers.nvidia_runtime,
        set(),
        hw={"gpus": [L4X1]},
        knobs={"containers": "docker", "runtime_config": "gpu-operator"},
        note="runtimes.nvidia and default-runtime",
    ),
    Case(
        "nvidia-no-gpu",
        containers.nvidia_runtime,
        set(),
        knobs={"containers": "containerd"},
        note="no NVIDIA GPU",
    ),
    # AMD's container toolkit (amd-ctk runtime configure): Docker's runtimes.amd, not the default
    Case(
        "amd-docker",
        containers.amd_runtime,
        {("docker", "runtimes.amd.path", '"amd-container-runtime"')},
        hw={"gpus": [MI300X8]},
        knobs={"containers": "docker"},
    ),
    Case(
        "amd-containerd",
        containers.amd_runtime,
        set(),
        hw={"gpus": [MI300X8]},
        knobs={"containers": "containerd"},
        note="AMD's container toolkit configures Docker only",
    ),
    Case("amd-none", containers.amd_runtime, set(), hw={"gpus": [MI300X8]}),
    # containerd: AMD's toolkit has no containerd engine; CDI and the device plugin need none
    # (failed before: the note did not say how containerd reaches the GPUs)
    Case(
        "amd-containerd-says-cdi",
        containers.amd_runtime,
        set(),
        hw={"gpus": [MI300X8]},
        knobs={"containers": "containerd"},
        note="through the CDI spec amd-ctk cdi generate writes (/etc/cdi/amd.json)",
    ),
    # /dev/kfd and renderD*: systemd's udev rules already give group render (failed before: no
    # rule said why nothing is written)
    Case(
        "amd-devices",
        containers.amd_devices,
        set(),
        hw={"gpus": [MI300X8]},
        note="systemd's 50-udev-default.rules already gives both to group render",
    ),
    Case("amd-devices-on-h100", containers.amd_devices, set(), hw={"gpus": [H100X8]}),
    Case(
        "amd-on-h100",
        containers.amd_runtime,
        set(),
        hw={"gpus": [H100X8]},
        knobs={"containers": "docker"},
    ),
    Case("shm-none", containers.shm, set()),
    Case("shm-docker-64g", containers.shm, docker_shm("8G"), knobs={"containers": "docker"}),
    Case(
        "shm-docker-2t",
        containers.shm,
        docker_shm("64G"),
        hw={"memory_gib": 2048},
        knobs={"containers": "docker"},
    ),
    Case(
        "shm-kubernetes-note",
        containers.shm,
        set(),
        knobs={"containers": "containerd", "kubernetes": True},
        note="emptyDir with medium: Memory",
    ),
    Case(
        "shm-containerd-note",
        containers.shm,
        set(),
        knobs={"containers": "containerd"},
        note="--shm-size",
    ),
)


@pytest.mark.parametrize("case", CASES, ids=case_ids(CASES))
def test_containers_rule(case: Case) -> None:
    check_case(case)


def test_the_runtime_gets_the_limits_logins_and_services_get() -> None:
    """Consistency with limits.*: the runtime's nofile is the login limit and the services' hard
    limit (soft = hard: containers inherit it), its memlock the plan's own."""
    machine, knobs = facts(gpus=[H100X8]), profile("training", containers="docker")
    runtime = settings_of(containers.runtime_limits.apply(machine, knobs), "unit-dropin")
    manager = {
        **settings_of(limits.nofile.apply(machine, knobs), "systemd-manager"),
        **settings_of(limits.nofile.apply(machine, knobs), "limit"),
        **settings_of(limits.memlock.apply(machine, knobs), "systemd-manager"),
    }
    for unit in containers.runtime_units(knobs):
        service_hard = manager["DefaultLimitNOFILE"].partition(":")[2]
        assert runtime[f"{unit} LimitNOFILE"] == service_hard == manager["* soft nofile"]
        assert int(runtime[f"{unit} LimitNOFILE"]) <= NR_OPEN_DEFAULT
        assert runtime[f"{unit} LimitMEMLOCK"] == manager["DefaultLimitMEMLOCK"] == "infinity"


def test_the_limits_reason_cites_containerds_removal_of_limitnofile() -> None:
    output = containers.runtime_limits.apply(facts(), profile("inference", containers="containerd"))
    reason = next(
        s.reason for s in output if isinstance(s, Setting) and s.key.endswith("LimitNOFILE")
    )
    assert "PR 8924" in reason and "1024" in reason


@pytest.mark.parametrize("runtime", ["none", "containerd", "docker"])
def test_nothing_of_the_layer_without_a_runtime_or_kubernetes(runtime: str) -> None:
    rules = (containers.runtime_limits, containers.nvidia_runtime, containers.shm)
    machine, knobs = facts(gpus=[H100X8]), profile("training", containers=runtime)
    output = [item for rule in rules for item in rule.apply(machine, knobs)]
    assert bool([s for s in output if isinstance(s, Setting)]) == (runtime != "none")
    assert not any("Kubernetes" in text for text in notes_of(output))


@pytest.mark.parametrize("runtime", ["containerd", "docker"])
def test_the_gpu_operator_keeps_its_runtime_keys_and_goldtune_its_limits(runtime: str) -> None:
    """runtime_config: gpu-operator: no key the Operator's toolkit writes (default runtime, the
    nvidia runtime's table or path), while the runtime's limits stay goldtune's."""
    machine = facts(gpus=[H100X8])
    knobs = profile("training", containers=runtime, runtime_config="gpu-operator")
    output = [*containers.nvidia_runtime.apply(machine, knobs)]
    assert not [s for s in output if isinstance(s, Setting)]
    limits_out = containers.runtime_limits.apply(machine, knobs)
    assert settings_of(limits_out, "unit-dropin")[f"{runtime}.service LimitNOFILE"] == "1048576"


def test_an_amd_nodes_runtime_memlock_reason_names_no_cuda() -> None:
    """containers.runtime-limits on AMD GPUs (failed before: 'CUDA pinned host memory')."""
    amd = containers.runtime_limits.apply(
        facts(gpus=[MI300X8]), profile("training", containers="docker")
    )
    reasons = [s.reason for s in amd if isinstance(s, Setting) and s.key.endswith("LimitMEMLOCK")]
    assert reasons and all("RDMA registration (RCCL's IB transport)" in r for r in reasons)
    assert not any("CUDA" in r for r in reasons)


# --- containerd 2: the version 3 form (issue 37) -------------------------------------------------

CRI_V3 = 'plugins."io.containerd.cri.v1.runtime".containerd'


def with_containerd(base: Facts, major: int | None) -> Facts:
    """The facts with a test-only distribution: debian-12's table whose containerd says
    ``major`` (the shipped tables' containerd facts are their helpers' to write)."""
    distro = load_distros()["debian-12"]
    package = Containerd(major=major, source=["a test-only containerd fact, no package read"])
    changed = distro.model_copy(update={"containerd": package})
    return base._replace(os=base.os._replace(distro=changed))


def containerd_settings(major: int | None) -> dict[str, str]:
    machine = with_containerd(facts(gpus=[H100X8]), major)
    output = containers.nvidia_runtime.apply(machine, profile("training", containers="containerd"))
    return settings_of(output, "containerd")


def test_a_containerd_2_target_gets_the_version_3_cri_runtime_table() -> None:
    """containerd 2 reads the runtimes under io.containerd.cri.v1.runtime (version 3); a
    version 2 table there is migrated only where the merged configuration is version 2
    (generator/model/containerd.py). Failed before: the rule always wrote grpc.v1.cri."""
    v3 = containerd_settings(2)
    assert v3[f"{CRI_V3}.default_runtime_name"] == '"nvidia"'
    assert v3[f"{CRI_V3}.runtimes.nvidia.options.SystemdCgroup"] == "true"
    assert not [key for key in v3 if "grpc.v1.cri" in key]


@pytest.mark.parametrize("major", [1, None])
def test_containerd_1_and_an_unknown_major_keep_the_version_2_table(major: int | None) -> None:
    """1.x reads version 2 only (1.7 refuses version 3); an unknown major stays portable."""
    v2 = containerd_settings(major)
    assert set(v2) == {key for _, key, _ in CONTAINERD_NVIDIA}
    assert set(v2) == {key.replace(CRI_V3, CRI) for key in containerd_settings(2)}


@pytest.mark.parametrize("major", [1, 2, None])
def test_every_containerd_key_is_one_install_sh_can_rename(major: int | None) -> None:
    """install.sh writes the drop-in in the version of the image's config.toml by renaming the
    CRI runtime table (generator/model/containerd.py): exact only for keys under that table
    that the v3 migration moves as they are (not snapshotter, sandbox_mode...)."""
    table = cri_runtime_table(major)
    for key in containerd_settings(major):
        assert key.startswith(table + "."), key
        assert not NOT_RENAMED & set(key.split(".")), key
