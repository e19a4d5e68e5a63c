"""os.driver: who delivers the GPU kernel driver (issue 39), and what each model changes."""

from __future__ import annotations

import json
import shutil
import subprocess
from pathlib import Path

import pytest
from test_install import make_bin
from test_scripts import A100_500W, FAKE_SMI, SCRIPTS

from generator.detect.system import read_driver
from generator.detect.tree import Tree
from tests.generate import generate

OPERATOR_HW = "system: dgx-h100\nos: {driver: nvidia-gpu-operator}\n"


def overlay(tmp_path: Path, text: str, name: str = "node.yaml") -> Path:
    path = tmp_path / name
    path.write_text(text)
    return path


def bundle(tmp_path: Path, hardware: str | Path, profile: str = "training-k8s") -> Path:
    out = tmp_path / "out"
    result = generate(hardware, profile, out)
    assert result.exit_code == 0, result.output
    return out


def test_operator_model_is_said_in_explain_and_plan(tmp_path: Path) -> None:
    out = bundle(tmp_path, overlay(tmp_path, OPERATOR_HW))
    assert "delivered by **nvidia-gpu-operator**" in (out / "EXPLAIN.md").read_text()
    assert json.loads((out / "plan.json").read_text())["driver"] == "nvidia-gpu-operator"


def test_host_model_plan_has_no_driver_field(tmp_path: Path) -> None:
    out = bundle(tmp_path, "dgx-h100")
    assert "driver" not in json.loads((out / "plan.json").read_text())
    assert "delivered by" not in (out / "EXPLAIN.md").read_text()


def test_unknown_driver_model_is_bad_input(tmp_path: Path) -> None:
    hardware = overlay(tmp_path, "system: dgx-h100\nos: {driver: container}\n")
    result = generate(hardware, "training-k8s", tmp_path / "out")
    assert result.exit_code == 2
    assert "os.driver" in result.output
    assert not (tmp_path / "out").exists()


def touch(root: Path, path: str) -> None:
    target = root / path.lstrip("/")
    target.parent.mkdir(parents=True, exist_ok=True)
    target.write_text("")


@pytest.mark.parametrize(
    ("files", "expected"),
    [
        # the Operator's driver root and startup-probe marker, no host driver: its model
        (["/run/nvidia/driver/usr/bin/nvidia-smi"], "nvidia-gpu-operator"),
        (["/run/nvidia/validations/.driver-ctr-ready"], "nvidia-gpu-operator"),
        # a host nvidia-smi too: the validator calls that a pre-installed driver; left out
        (["/run/nvidia/driver/usr/bin/nvidia-smi", "/usr/bin/nvidia-smi"], None),
        (["/usr/bin/nvidia-smi"], None),
        ([], None),
    ],
)
def test_detect_reads_the_operator_driver_root(
    tmp_path: Path, files: list[str], expected: str | None
) -> None:
    for path in files:
        touch(tmp_path, path)
    assert read_driver(Tree(tmp_path))[0] == expected


def test_detect_writes_the_driver_line(tmp_path: Path) -> None:
    from generator.detect.describe import os_lines

    touch(tmp_path, "/run/nvidia/driver/usr/bin/nvidia-smi")
    assert any(
        line.strip().startswith("driver: nvidia-gpu-operator")
        for line in os_lines(Tree(tmp_path), False)
    )


# --- nvidia-gpu-operator: what the bundle leaves to the Operator, and what it still applies ----


def test_operator_bundle_leaves_the_operators_daemons_and_modules(tmp_path: Path) -> None:
    out = bundle(tmp_path, overlay(tmp_path, OPERATOR_HW))
    rootfs = out / "rootfs"
    install_list = (out / "install.list").read_text()
    # the driver container runs persistenced and the fabric manager, and loads nvidia-peermem
    assert "nvidia-persistenced" not in install_list
    assert "nvidia-fabricmanager.service" not in install_list
    assert not (rootfs / "etc/systemd/system/nvidia-persistenced.service.d").exists()
    assert "nvidia-peermem" not in (rootfs / "etc/goldtune/gpu.conf").read_text()
    explain = (out / "EXPLAIN.md").read_text()
    assert "driver.rdma.enabled=true" in explain
    # nouveau: the driver container does not keep it off (--no-nouveau-check), so the image does
    assert "blacklist nouveau" in (rootfs / "etc/modprobe.d/90-goldtune.conf").read_text()
    # the GPU unit is started by the path unit on the Operator's readiness marker, not at boot
    assert "service\tenable\tgoldtune-gpu.path" in install_list
    assert "service\tenable\tgoldtune-gpu.service" not in install_list
    # a host-driver bundle's enablement taken back: at boot the unit would find no driver
    assert "service\tdisable\tgoldtune-gpu.service" in install_list
    path_unit = (rootfs / "etc/systemd/system/goldtune-gpu.path").read_text()
    assert "PathChanged=/run/nvidia/validations/.driver-ctr-ready" in path_unit
    gpu_conf = (rootfs / "etc/goldtune/gpu.conf").read_text()
    assert "\ndriver-root\t/run/nvidia/driver\n" in gpu_conf
    assert "\npersistence\t" not in gpu_conf


def unit_lines(path: Path) -> list[str]:
    return [line for line in path.read_text().splitlines() if line and not line.startswith("#")]


def test_each_new_readiness_of_the_operators_driver_starts_one_apply(tmp_path: Path) -> None:
    """systemd's path.c: a path unit starts nothing while its unit is active (RemainAfterExit=yes
    after success), and PathExists= starts it again at once when it goes inactive or fails while
    the marker exists (a loop until the start limit). So: PathChanged= (fires on each appearance
    of the marker and on its removal), a oneshot that does not remain active, and a condition on
    the marker that skips the run fired by the removal."""
    units = bundle(tmp_path, overlay(tmp_path, OPERATOR_HW)) / "rootfs/etc/systemd/system"
    marker = "/run/nvidia/validations/.driver-ctr-ready"
    path_unit = unit_lines(units / "goldtune-gpu.path")
    assert f"PathChanged={marker}" in path_unit
    assert not [line for line in path_unit if line.startswith("PathExists")]
    service = unit_lines(units / "goldtune-gpu.service")
    assert f"ConditionPathExists={marker}" in service
    assert "Type=oneshot" in service
    assert "RemainAfterExit=yes" not in service
    # a host driver's unit runs once per boot and stays active, as before
    host = unit_lines(
        bundle(tmp_path / "host", "dgx-h100") / "rootfs/etc/systemd/system/goldtune-gpu.service"
    )
    assert "RemainAfterExit=yes" in host
    assert not [line for line in host if line.startswith("Condition")]


def test_host_bundle_enables_the_gpu_unit_at_boot(tmp_path: Path) -> None:
    out = bundle(tmp_path, "dgx-h100")
    install_list = (out / "install.list").read_text()
    assert "service\tenable\tgoldtune-gpu.service" in install_list
    assert not (out / "rootfs/etc/systemd/system/goldtune-gpu.path").exists()


def test_operator_mig_layout_goes_to_the_mig_manager(tmp_path: Path) -> None:
    import yaml

    profile = overlay(
        tmp_path,
        "extends: training-k8s\nname: k8s-mig\ngpu_mig_layout: {3g.40gb: 2}\n",
        "k8s-mig.yaml",
    )
    out = tmp_path / "out"
    result = generate(overlay(tmp_path, OPERATOR_HW), profile, out)
    assert result.exit_code == 0, result.output
    config_map = yaml.safe_load((out / "gpu-operator/mig-parted-config.yaml").read_text())
    config = yaml.safe_load(config_map["data"]["config.yaml"])
    assert config == {
        "version": "v1",
        "mig-configs": {
            "goldtune-k8s-mig": [
                {"devices": "all", "mig-enabled": True, "mig-devices": {"3g.40gb": 2}}
            ]
        },
    }
    # the boot unit does not fight the MIG manager
    gpu_conf = (out / "rootfs/etc/goldtune/gpu.conf").read_text()
    assert "\nmig\t" not in gpu_conf and "\nmig-layout\t" not in gpu_conf
    assert "nvidia.com/mig.config=goldtune-k8s-mig" in (out / "EXPLAIN.md").read_text()


def test_host_mig_layout_stays_with_the_boot_unit(tmp_path: Path) -> None:
    profile = overlay(
        tmp_path,
        "extends: training-k8s\nname: k8s-mig\ngpu_mig_layout: {3g.40gb: 2}\n",
        "k8s-mig.yaml",
    )
    out = tmp_path / "out"
    assert generate("dgx-h100", profile, out).exit_code == 0
    assert not (out / "gpu-operator").exists()
    assert "\nmig-layout\t3g.40gb,3g.40gb\n" in (out / "rootfs/etc/goldtune/gpu.conf").read_text()


# --- gpu-setup and the driver root ---------------------------------------------------------------
# A fake GPU Operator node (said so): TEST_SYSROOT stands in for /, the driver root is a directory
# under it with an nvidia-smi stub, and `chroot` is a stub that runs ROOT/usr/bin/PROGRAM, as the
# real chroot would find it there. The driver root "appears later": the first run has none.

FAKE_CHROOT = (
    'printf "chroot %s\\n" "$1" >>"$STUB_LOG"\nr=$1 p=$2\nshift 2\nexec "$r/usr/bin/$p" "$@"\n'
)


def run_setup(tmp_path: Path, data: str, path: Path) -> subprocess.CompletedProcess[str]:
    (tmp_path / "gpu.conf").write_text(f"log-as\tgt-gpu\n{data}")
    (tmp_path / "inventory").write_text(A100_500W + "\n")
    return subprocess.run(
        [str(SCRIPTS / "gpu-setup"), str(tmp_path / "gpu.conf")],
        capture_output=True,
        text=True,
        check=False,
        timeout=60,
        env={
            "PATH": str(path),
            "STUB_LOG": str(tmp_path / "smi.log"),
            "FAKE_INVENTORY": str(tmp_path / "inventory"),
            "TEST_SYSROOT": str(tmp_path / "sysroot"),
            "LC_ALL": "C",
        },
    )


def stub_bin(tmp_path: Path, stubs: dict[str, str]) -> Path:
    path = make_bin(tmp_path, stubs)
    for tool in ("timeout", "date", "sleep"):
        if not (path / tool).exists():
            (path / tool).symlink_to(shutil.which(tool) or f"/bin/{tool}")
    return path


def test_gpu_setup_applies_through_the_driver_root_once_it_appears(tmp_path: Path) -> None:
    path = stub_bin(tmp_path, {"chroot": FAKE_CHROOT, "systemctl": "exit 1\n"})
    (tmp_path / "smi.log").touch()
    data = "driver-root\t/run/nvidia/driver\necc\ton\nclocks\treset\n"
    before = run_setup(tmp_path, data, path)
    assert before.returncode == 3
    assert before.stdout == (
        f"gt-gpu: nvidia-smi not found in {tmp_path}/sysroot/run/nvidia/driver "
        "(no NVIDIA driver installed); nothing done\n"
    )
    assert (tmp_path / "smi.log").read_text() == ""
    smi = tmp_path / "sysroot/run/nvidia/driver/usr/bin/nvidia-smi"
    smi.parent.mkdir(parents=True)
    smi.write_text("#!/bin/sh\n" + FAKE_SMI)
    smi.chmod(0o755)
    after = run_setup(tmp_path, data, path)
    assert after.returncode == 0, after.stdout
    calls = (tmp_path / "smi.log").read_text().splitlines()
    assert f"chroot {tmp_path}/sysroot/run/nvidia/driver" in calls
    assert "-i 0 -rgc" in calls, after.stdout


def test_gpu_setup_without_a_host_nvidia_smi_says_so_in_one_line(tmp_path: Path) -> None:
    """Host driver absent: one line, exit 0 (the boot goes on); the Operator's driver root
    without nvidia-smi once its path unit fired: 3 (test above)."""
    path = stub_bin(tmp_path, {"systemctl": "exit 1\n"})
    result = run_setup(tmp_path, "ecc\ton\n", path)
    assert result.returncode == 0
    assert result.stdout.count("\n") == 1
    assert "gt-gpu: nvidia-smi not found (no NVIDIA driver installed)" in result.stdout


@pytest.mark.parametrize("root", ["/opt/nvidia/driver", "/run/nvidia/../driver", "/run/a b"])
def test_gpu_setup_refuses_a_driver_root_outside_run(tmp_path: Path, root: str) -> None:
    path = stub_bin(tmp_path, {"chroot": FAKE_CHROOT})
    result = run_setup(tmp_path, f"driver-root\t{root}\n", path)
    assert result.returncode == 2
    assert "line 2" in result.stdout


def test_operator_bundle_units_pass_systemd_analyze_verify(tmp_path: Path) -> None:
    from validators.checks_system import check_units

    assert check_units(bundle(tmp_path, overlay(tmp_path, OPERATOR_HW))) == []


# --- verify --strict follows the model --------------------------------------------------------


def image_with_requirements(tmp_path: Path, out: Path, modules: str) -> Path:
    """An image with every unit and command the bundle's install.list requires, and a kernel
    whose modules.dep lists ``modules``: no GPU driver in it unless named there."""
    from generator.bundle.read import read_bundle
    from generator.verify.strict import bundle_requirements

    image = tmp_path / "image"
    for need in bundle_requirements(read_bundle(out)):
        where = (
            f"usr/lib/systemd/system/{need.name}" if need.what == "unit" else f"usr/bin/{need.name}"
        )
        path = image / where
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text("[Service]\n" if need.what == "unit" else "#!/bin/sh\n")
        path.chmod(0o755)
    kernel = image / "lib/modules/6.8.0-1-generic"
    kernel.mkdir(parents=True)
    (kernel / "modules.dep").write_text(modules)
    return image


def strict_lines(out: Path, image: Path) -> list[str]:
    from generator.bundle.read import read_bundle
    from generator.verify.strict import root_failures

    return [failure.line() for failure in root_failures(read_bundle(out), image)]


def test_operator_bundle_passes_strict_on_an_image_without_a_host_driver(tmp_path: Path) -> None:
    out = bundle(tmp_path, overlay(tmp_path, OPERATOR_HW))
    image = image_with_requirements(tmp_path, out, "kernel/drivers/net/ethernet/mlx5_core.ko:\n")
    assert strict_lines(out, image) == []
    # the same image, judged for a host-driver bundle of the same machine: the driver is missing
    host = bundle(tmp_path / "host", "dgx-h100")
    lines = strict_lines(host, image)
    assert any(line.startswith("strict: command nvidia-smi: not installed") for line in lines)
    for unit in ("nvidia-persistenced.service", "nvidia-fabricmanager.service"):
        assert any(line.startswith(f"strict: unit {unit}: not installed") for line in lines)
    assert any("strict: driver: no nvidia module" in line for line in lines)


AMD_OPERATOR_HW = "system: mi300x-8x-epyc\nos: {driver: amd-gpu-operator}\n"


def test_amd_image_without_amdgpu_fails_strict_with_one_line(tmp_path: Path) -> None:
    out = bundle(tmp_path, "mi300x-8x-epyc")
    image = image_with_requirements(tmp_path, out, "kernel/drivers/net/ethernet/mlx5_core.ko:\n")
    assert strict_lines(out, image) == [
        "strict: driver: no amdgpu module for kernel 6.8.0-1-generic (required by the hardware "
        "file mi300x-8x-epyc: 8 AMD GPUs, os.driver host)"
    ]


def test_amd_image_with_amdgpu_passes_strict(tmp_path: Path) -> None:
    out = bundle(tmp_path, "mi300x-8x-epyc")
    modules = "kernel/drivers/gpu/drm/amd/amdgpu/amdgpu.ko.zst:\n"
    assert strict_lines(out, image_with_requirements(tmp_path, out, modules)) == []


def test_amd_operator_bundle_passes_strict_without_amdgpu(tmp_path: Path) -> None:
    out = bundle(tmp_path, overlay(tmp_path, AMD_OPERATOR_HW))
    image = image_with_requirements(tmp_path, out, "kernel/drivers/net/ethernet/mlx5_core.ko:\n")
    assert strict_lines(out, image) == []


def test_the_collector_reads_the_gpus_through_the_operators_driver_root(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A fake GPU Operator node (said so): no host nvidia-smi, an nvidia-smi stub under
    TEST_SYSROOT's /run/nvidia/driver and a chroot stub that runs it from there."""
    from test_gpu_sharing import COLLECT_SMI, MIG_PLAN, run_collector_with

    if shutil.which("nvidia-smi"):
        pytest.skip("this host has an nvidia-smi on PATH")
    sysroot = tmp_path / "sysroot"
    monkeypatch.setenv("TEST_SYSROOT", str(sysroot))
    for run in ("before", "after"):
        (tmp_path / run).mkdir()
    before = run_collector_with(tmp_path / "before", MIG_PLAN, {})
    assert before.value("gpu", "tool") == "!absent"
    smi = sysroot / "run/nvidia/driver/usr/bin/nvidia-smi"
    smi.parent.mkdir(parents=True)
    smi.write_text("#!/bin/sh\n" + COLLECT_SMI)
    smi.chmod(0o755)
    chroot = 'r=$1 p=$2\nshift 2\nexec "$r/usr/bin/$p" "$@"\n'
    after = run_collector_with(tmp_path / "after", MIG_PLAN, {"chroot": chroot})
    assert after.value("gpu", "tool") == "ok"
    assert after.value("gpu-mig", "0") == "3g.40gb,1g.10gb+me"


def test_image_verify_judges_gpu_settings_by_the_path_unit(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """install.sh --root enables goldtune-gpu.path, not the service: the GPU settings are judged
    applied through it (before: 'disabled', as the service itself is not enabled)."""
    from test_install import run

    from generator.verify.run import run_verify

    out = bundle(tmp_path, overlay(tmp_path, OPERATOR_HW))
    image = image_with_requirements(tmp_path, out, "kernel/x.ko:\n")
    run(out / "install.sh", "--root", str(image), path=make_bin(tmp_path, {}, "tools"))
    run_verify(out, root=image)
    gpu_lines = [line.split() for line in capsys.readouterr().out.splitlines() if " gpu " in line]
    assert {(line[0], line[2]) for line in gpu_lines} == {
        ("ok", "driver-root"),
        ("ok", "ecc"),
        ("ok", "clocks"),
    }


def test_a_node_without_the_operators_driver_yet_fails_strict_saying_so(tmp_path: Path) -> None:
    from generator.bundle.read import read_bundle
    from generator.verify.snapshot import parse_snapshot
    from generator.verify.strict import snapshot_failures

    out = bundle(tmp_path, overlay(tmp_path, OPERATOR_HW))
    snapshot = parse_snapshot(
        "goldtune-snapshot\tbegin\t1\ngpu-pci\tcount\t8\ngpu\ttool\t!absent\n"
        "goldtune-snapshot\tend\t1\n"
    )
    lines = [f.line() for f in snapshot_failures(read_bundle(out), snapshot) if f.what == "driver"]
    assert len(lines) == 1
    assert "driver root /run/nvidia/driver has no nvidia-smi yet" in lines[0]


def test_switching_driver_models_takes_the_other_models_gpu_unit_back(tmp_path: Path) -> None:
    """Host -> Operator: goldtune-gpu.service is no longer enabled (at boot it would find no
    driver and fail); Operator -> host: the path unit's link goes with its file."""
    from test_install import run

    wants = "etc/systemd/system/multi-user.target.wants"
    host = bundle(tmp_path / "host", "dgx-h100")
    operator = bundle(tmp_path / "operator", overlay(tmp_path, OPERATOR_HW))
    image = image_with_requirements(tmp_path, host, "kernel/nvidia.ko:\n")
    tools = make_bin(tmp_path, {}, "tools")
    run(host / "install.sh", "--root", str(image), path=tools)
    assert (image / wants / "goldtune-gpu.service").is_symlink()
    run(operator / "install.sh", "--root", str(image), path=tools)
    assert not (image / wants / "goldtune-gpu.service").is_symlink()
    assert (image / wants / "goldtune-gpu.path").is_symlink()
    run(host / "install.sh", "--root", str(image), path=tools)
    assert not (image / wants / "goldtune-gpu.path").is_symlink()
    assert not (image / "etc/systemd/system/goldtune-gpu.path").exists()
    assert (image / wants / "goldtune-gpu.service").is_symlink()


def test_the_operators_driver_leaves_the_runtime_to_its_toolkit_by_default(
    tmp_path: Path,
) -> None:
    """With os.driver nvidia-gpu-operator and runtime_config at its default, no containerd
    runtime keys (the Operator's toolkit writes them, and its runtime knows the driver root) and
    no host nvidia-container-runtime required; a profile that sets runtime_config: goldtune keeps
    goldtune's."""
    out = bundle(tmp_path, overlay(tmp_path, OPERATOR_HW))
    assert not (out / "rootfs/etc/containerd/conf.d").exists()
    assert "nvidia-container-runtime" not in (out / "install.list").read_text()
    assert (
        "os.driver: nvidia-gpu-operator (runtime_config left at its default"
        in (out / "EXPLAIN.md").read_text()
    )
    mine = tmp_path / "mine.yaml"
    mine.write_text("extends: training-k8s\nruntime_config: goldtune\n")
    kept = bundle(tmp_path / "kept", overlay(tmp_path, OPERATOR_HW), profile=str(mine))
    assert (kept / "rootfs/etc/containerd/conf.d/90-goldtune.toml").exists()
    # the host driver's bundle is as before
    host = bundle(tmp_path / "host", "dgx-h100")
    assert (host / "rootfs/etc/containerd/conf.d/90-goldtune.toml").exists()


def fire_as_the_path_unit_would(
    tmp_path: Path, service: list[str], gpu_conf: Path, path: Path
) -> str | None:
    """One start of goldtune-gpu.service as systemd runs it when goldtune-gpu.path fires (a
    stand-in for systemd, said so): skipped when its ConditionPathExists= is false under the
    fake root, else its ExecStart's script with the bundle's data file. None: skipped."""
    condition = next(line for line in service if line.startswith("ConditionPathExists="))
    if not (tmp_path / "sysroot" / condition.split("=", 1)[1].lstrip("/")).exists():
        return None
    result = subprocess.run(
        [str(SCRIPTS / "gpu-setup"), str(gpu_conf)],
        capture_output=True,
        text=True,
        check=False,
        timeout=60,
        env={
            "PATH": str(path),
            "STUB_LOG": str(tmp_path / "smi.log"),
            "FAKE_INVENTORY": str(tmp_path / "inventory"),
            "TEST_SYSROOT": str(tmp_path / "sysroot"),
            "LC_ALL": "C",
        },
    )
    assert result.returncode == 0, result.stdout
    return result.stdout


def test_a_driver_root_that_appears_later_gets_the_settings_once_per_readiness(
    tmp_path: Path,
) -> None:
    """A fake GPU Operator node (said so): the Operator's driver root with an nvidia-smi stub and
    its readiness marker appear after boot under TEST_SYSROOT; `chroot` is a stub. The path unit
    (PathChanged=) fires on each appearance and removal of the marker; each appearance applies
    the bundle's settings once through the driver root, a removal applies nothing."""
    out = bundle(tmp_path, overlay(tmp_path, OPERATOR_HW))
    service = unit_lines(out / "rootfs/etc/systemd/system/goldtune-gpu.service")
    gpu_conf = out / "rootfs/etc/goldtune/gpu.conf"
    path = stub_bin(tmp_path, {"chroot": FAKE_CHROOT, "systemctl": "exit 1\n"})
    (tmp_path / "inventory").write_text(A100_500W + "\n")
    log = tmp_path / "smi.log"
    log.touch()
    marker = tmp_path / "sysroot/run/nvidia/validations/.driver-ctr-ready"
    smi = tmp_path / "sysroot/run/nvidia/driver/usr/bin/nvidia-smi"

    def applies() -> int:
        return log.read_text().splitlines().count("-i 0 -rgc")

    # boot: no driver root, no marker; the path unit has not fired, nothing ran
    assert applies() == 0
    # the driver container is ready: driver root, nvidia-smi, then the probe's marker
    smi.parent.mkdir(parents=True)
    smi.write_text("#!/bin/sh\n" + FAKE_SMI)
    smi.chmod(0o755)
    marker.parent.mkdir(parents=True)
    marker.write_text("GPU_DIRECT_RDMA_ENABLED: false\n")
    assert fire_as_the_path_unit_would(tmp_path, service, gpu_conf, path) is not None
    assert applies() == 1
    assert f"chroot {tmp_path}/sysroot/run/nvidia/driver" in log.read_text()
    # the driver container restarts: preStop removes the marker (the path unit fires: skipped)
    marker.unlink()
    assert fire_as_the_path_unit_would(tmp_path, service, gpu_conf, path) is None
    assert applies() == 1
    # ... and the new container's probe writes it again: applied once more
    marker.write_text("GPU_DIRECT_RDMA_ENABLED: false\n")
    assert fire_as_the_path_unit_would(tmp_path, service, gpu_conf, path) is not None
    assert applies() == 2


def test_distribution_precompiled_is_judged_as_the_host_driver_and_explain_says_so(
    tmp_path: Path,
) -> None:
    """Ubuntu's precompiled signed modules (linux-modules-nvidia-<branch>-server-<kernel>, per
    NVIDIA's precompiled-driver docs) are the same nvidia modules, nvidia-smi and persistenced
    without DKMS: the bundle is the host driver's, and --strict demands the same."""
    text = "system: dgx-h100\nos: {driver: distribution-precompiled}\n"
    hardware = overlay(tmp_path, text, "dgx-h100.yaml")
    out = bundle(tmp_path, hardware)
    host = bundle(tmp_path / "host", "dgx-h100")
    assert (out / "install.list").read_text() == (host / "install.list").read_text()
    explain = (out / "EXPLAIN.md").read_text()
    assert "That is a host driver without DKMS" in explain
    assert "delivered by" not in explain
    # a module where Ubuntu's linux-modules-nvidia puts it passes; none at all fails
    signed = "kernel/nvidia-595srv/nvidia.ko:\n"
    assert strict_lines(out, image_with_requirements(tmp_path / "a", out, signed)) == []
    lines = strict_lines(out, image_with_requirements(tmp_path / "b", out, "kernel/x.ko:\n"))
    assert [line for line in lines if "driver" in line] == [
        "strict: driver: no nvidia module for kernel 6.8.0-1-generic (required by the hardware "
        "file dgx-h100: 8 NVIDIA GPUs, os.driver distribution-precompiled)"
    ]


def test_verify_reads_the_settings_through_the_driver_root_once_it_appears(tmp_path: Path) -> None:
    """A fake GPU Operator node (said so): after the driver root appeared and the settings were
    applied (test above), the collector runs the driver root's nvidia-smi (a stub answering its
    query with ECC on) through a chroot stub, and verify judges the bundle's ECC setting ok."""
    from generator.bundle.read import read_bundle
    from generator.verify.live import check_settings
    from generator.verify.run import collector_script
    from generator.verify.snapshot import parse_snapshot

    out = bundle(tmp_path, overlay(tmp_path, OPERATOR_HW))
    path = stub_bin(tmp_path, {"chroot": 'r=$1 p=$2\nshift 2\nexec "$r/usr/bin/$p" "$@"\n'})
    for tool in ("sh", "awk", "cat", "grep", "sed", "tr", "head", "tail", "wc", "ls", "sort"):
        if not (path / tool).exists() and shutil.which(tool):
            (path / tool).symlink_to(shutil.which(tool) or "")
    row = "{i}, 00000000:1B:00.0, NVIDIA H100, Enabled, Enabled, Enabled, Default, 700.00, 700.00, "
    rows = "".join(f'echo "{row.format(i=i)}1980, 1980, Disabled, Disabled"\n' for i in range(8))
    smi = tmp_path / "sysroot/run/nvidia/driver/usr/bin/nvidia-smi"
    smi.parent.mkdir(parents=True)
    smi.write_text(f'#!/bin/sh\ncase "$*" in --query-gpu=*) {rows};; *) exit 1 ;; esac\n')
    smi.chmod(0o755)
    result = subprocess.run(
        ["sh", str(collector_script()), str(out / "rootfs/etc/goldtune/collect.conf")],
        capture_output=True,
        text=True,
        check=False,
        timeout=120,
        env={"PATH": str(path), "TEST_SYSROOT": str(tmp_path / "sysroot"), "LC_ALL": "C"},
    )
    assert result.returncode == 0, result.stderr
    checks = check_settings(read_bundle(out), parse_snapshot(result.stdout))
    ecc = next(check for check in checks if check.kind == "gpu" and check.key == "ecc")
    assert str(ecc.verdict) == "ok", ecc
    assert ecc.actual.startswith("GPU 0: Enabled")
