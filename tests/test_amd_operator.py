"""os.driver amd-gpu-operator (issue 39): detect reads the AMD GPU Operator's mark on a host, and
partition modes go to its device config manager, not to the boot unit."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
import yaml

from generator.detect.system import read_driver
from generator.detect.tree import Tree
from tests.generate import generate

# What the AMD GPU Operator's node labeller writes into the host's /etc/modprobe.d when its
# DeviceConfig sets spec.driver.blacklist (ROCm/gpu-operator@6df13c17
# internal/nodelabeller/nodelabeller.go getNodeLabellerInitContainerCommand)
OPERATOR_BLACKLIST = "# added by gpu operator \nblacklist amdgpu\n"


@pytest.mark.parametrize(
    ("name", "text", "expected"),
    [
        ("blacklist-amdgpu.conf", OPERATOR_BLACKLIST, "amd-gpu-operator"),
        ("blacklist-amdgpu-by-operator.conf", OPERATOR_BLACKLIST, "amd-gpu-operator"),
        # a site's own blacklist of the same name is not the Operator's
        ("blacklist-amdgpu.conf", "blacklist amdgpu\n", None),
        ("other.conf", OPERATOR_BLACKLIST, None),
    ],
)
def test_detect_reads_the_amd_gpu_operators_blacklist(
    tmp_path: Path, name: str, text: str, expected: str | None
) -> None:
    path = tmp_path / "etc/modprobe.d" / name
    path.parent.mkdir(parents=True)
    path.write_text(text)
    assert read_driver(Tree(tmp_path))[0] == expected


def test_a_blacklist_masked_by_a_link_out_of_the_tree_is_not_the_operators(tmp_path: Path) -> None:
    path = tmp_path / "etc/modprobe.d/blacklist-amdgpu.conf"
    path.parent.mkdir(parents=True)
    path.symlink_to("/dev/null")
    assert read_driver(Tree(tmp_path))[0] is None


def bundle(tmp_path: Path, driver: str) -> Path:
    hardware = tmp_path / "mi300x-8x-epyc.yaml"
    hardware.write_text(f"system: mi300x-8x-epyc\nos: {{driver: {driver}}}\n")
    profile = tmp_path / "k8s-cpx.yaml"
    profile.write_text(
        "extends: training-k8s\nname: k8s-cpx\ngpu_compute_partition: CPX\n"
        "gpu_memory_partition: NPS4\n"
    )
    out = tmp_path / driver
    result = generate(hardware, profile, out)
    assert result.exit_code == 0, result.output
    return out


def test_partitions_go_to_the_device_config_manager(tmp_path: Path) -> None:
    out = bundle(tmp_path, "amd-gpu-operator")
    config_map = yaml.safe_load((out / "amd-gpu-operator/dcm-config.yaml").read_text())
    assert config_map["metadata"]["name"] == "goldtune-dcm-config"
    # the format of ROCm/gpu-operator docs/dcm/device-config-manager-configmap.md
    assert json.loads(config_map["data"]["config.json"]) == {
        "gpu-config-profiles": {
            "goldtune-k8s-cpx": {
                "profiles": [
                    {"computePartition": "CPX", "memoryPartition": "NPS4", "numGPUsAssigned": 8}
                ]
            }
        },
        # the metrics exporter and the other host GPU clients are stopped around the change;
        # never kubelet or the runtime, which run the manager's own pod
        "gpuClientSystemdServices": {"names": ["amd-metrics-exporter", "gpuagent", "rdc"]},
    }
    gpu_conf = (out / "rootfs/etc/goldtune/gpu.conf").read_text()
    assert "partition\t" not in gpu_conf
    assert "service\tenable\tgoldtune-gpu.service" not in (out / "install.list").read_text()
    explain = (out / "EXPLAIN.md").read_text()
    assert "dcm.amd.com/gpu-config-profile=goldtune-k8s-cpx" in explain


def test_a_host_amdgpu_keeps_the_partitions_in_the_boot_unit(tmp_path: Path) -> None:
    out = bundle(tmp_path, "host")
    assert not (out / "amd-gpu-operator").exists()
    gpu_conf = (out / "rootfs/etc/goldtune/gpu.conf").read_text()
    assert "\ncompute-partition\tCPX\n" in gpu_conf
    assert "service\tenable\tgoldtune-gpu.service" in (out / "install.list").read_text()


def test_the_manager_stops_every_host_gpu_client_the_boot_unit_knows() -> None:
    from generator.model import layout
    from generator.render.operator import DCM_STOPPED_CLIENTS

    clients = set(layout.AMD_GPU_CLIENT_UNITS) - set(layout.WORKLOAD_UNITS)
    assert set(DCM_STOPPED_CLIENTS) == clients


def test_image_verify_says_the_partitions_are_the_config_managers(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    from test_driver_delivery import image_with_requirements
    from test_install import make_bin, run

    from generator.verify.run import run_verify

    out = bundle(tmp_path, "amd-gpu-operator")
    image = image_with_requirements(tmp_path, out, "kernel/x.ko:\n")
    run(out / "install.sh", "--root", str(image), path=make_bin(tmp_path, {}, "tools"))
    run_verify(out, root=image)
    lines = [line for line in capsys.readouterr().out.splitlines() if "partition" in line]
    assert len(lines) == 2
    assert all(line.startswith("ok") and "config manager" in line for line in lines), lines
