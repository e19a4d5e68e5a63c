"""`gen detect --root`: fake machines in tmp dirs must give descriptions `gen check` accepts."""

from __future__ import annotations

from pathlib import Path

import pytest
import yaml
from click.testing import CliRunner

from generator.cli import main
from generator.commands.generate import plan_for
from tests import detect_trees as trees


def detect(root: Path, *extra: str) -> tuple[int, str, str]:
    result = CliRunner().invoke(main, ["detect", "--root", str(root), *extra])
    return result.exit_code, result.stdout, result.stderr


def detected(machine: trees.FakeMachine, tmp_path: Path) -> tuple[dict, str]:
    status, text, errors = detect(machine.build(tmp_path / "tree"))
    assert status == 0, errors
    return yaml.safe_load(text), text


def check(text: str, tmp_path: Path, profile: str = "inference") -> tuple[int, str]:
    path = tmp_path / "detected.yaml"
    path.write_text(text)
    result = CliRunner().invoke(main, ["check", "--hw", str(path), "--profile", profile])
    return result.exit_code, result.stdout + result.stderr


@pytest.mark.parametrize(
    "name",
    ["dgx_h100", "l4_pcie", "gh200", "epyc_nps4", "vm_without_gpus", "ampere_one", "graviton"],
)
@pytest.mark.parametrize("profile", ["inference", "training"])
def test_detected_description_passes_gen_check(name: str, profile: str, tmp_path: Path):
    _, text = detected(getattr(trees, name)(), tmp_path)
    status, output = check(text, tmp_path, profile)
    assert status == 0, output + "\n" + text


def test_detected_names_are_real_and_pinned_in_nccl_conf(tmp_path: Path):
    """gen detect read every name from the host, so it marks them real and NCCL is pinned to
    them (a shipped system's placeholder names never are: tests/test_nccl_names.py)."""
    data, text = detected(trees.dgx_h100(), tmp_path)
    assert all(nic["names_real"] is True for nic in data["nics"])
    path = tmp_path / "detected.yaml"
    path.write_text(text)
    plan = plan_for(str(path), "training")
    nccl = {s.key: s.value for s in plan.settings if s.kind == "nccl"}
    assert nccl["NCCL_SOCKET_IFNAME"] == "=ens3f0np0"
    hcas = nccl["NCCL_IB_HCA"].removeprefix("=").split(",")
    assert sorted(hcas) == sorted(f"mlx5_{i}" for i in (0, 3, 4, 5, 6, 9, 10, 11))


def test_dgx_h100(tmp_path: Path):
    data, text = detected(trees.dgx_h100(), tmp_path)
    assert data["cpu"] == {
        "model": "Xeon-8480C",
        "vendor": "intel",
        "sockets": 2,
        "cores_per_socket": 56,
        "threads_per_core": 2,
    }
    assert data["numa_nodes"] == 2 and data["memory_gib"] == 2063
    assert data["gpus"] == [
        {"model": "H100-SXM5-80GB", "count": 8, "numa_nodes": [0, 0, 0, 0, 1, 1, 1, 1]}
    ]
    assert data["nvswitch"] is True and "4 NVSwitch PCI functions (10de:22a3)" in text
    compute = [nic for nic in data["nics"] if nic["name"].startswith("ibp")]
    assert len(compute) == 8
    assert all(
        nic
        == {
            "name": nic["name"],
            "pci_address": nic["pci_address"],
            "model": "ConnectX-7",
            "speed_gbps": 400,
            "numa_node": nic["numa_node"],
            "role": "compute",
            "rdma": True,
            "rdma_device": nic["rdma_device"],
            "names_real": True,
        }
        for nic in compute
    )
    assert {nic["name"]: nic["rdma_device"] for nic in compute} == {
        "ibp24s0": "mlx5_0",
        "ibp64s0": "mlx5_3",
        "ibp79s0": "mlx5_4",
        "ibp94s0": "mlx5_5",  # "Default RDMA" of the
        "ibp154s0": "mlx5_6",
        "ibp192s0": "mlx5_9",
        "ibp206s0": "mlx5_10",
        "ibp220s0": "mlx5_11",
    }  # DGX H100 User Guide's Table 6
    assert {nic["name"]: nic["numa_node"] for nic in compute} == {
        "ibp24s0": 0,
        "ibp64s0": 0,
        "ibp79s0": 0,
        "ibp94s0": 0,  # the names of the DGX H100
        "ibp154s0": 1,
        "ibp192s0": 1,
        "ibp206s0": 1,
        "ibp220s0": 1,
    }  # User Guide's Table 6
    # the PCI function behind each interface's device link: the bus in the name (ibp24s0: 0x18)
    assert all(
        nic["pci_address"].startswith(f"0000:{int(nic['name'][3:-2]):02x}:00.") for nic in compute
    ), [nic["pci_address"] for nic in compute]
    by_name = {nic["name"]: nic for nic in data["nics"]}
    assert by_name["ens3f0np0"]["role"] == "frontend" and by_name["ens3f0np0"]["model"] == "E810"
    assert by_name["eno1"]["role"] == "management" and "model" not in by_name["eno1"]
    assert "lo" not in by_name
    assert "PCI 8086:1533 is not in the catalog" in text
    assert data["disks"] == [
        {"name": "nvme0n1", "kind": "nvme", "role": "os"},
        {"name": "nvme1n1", "kind": "nvme", "role": "data"},
    ]
    assert data["os"] == {
        "distro": "ubuntu-24.04",
        "kernel": "6.8.0-45-generic",
        "page_size_kib": 4,
    }
    assert "# distribution: Ubuntu 24.04.1 LTS (ubuntu 24.04)" in text
    assert "role: compute" in text and "GUESS: an InfiniBand link" in text


def test_l4_box_leaves_out_the_bmc_vga_and_removable_disks(tmp_path: Path):
    data, text = detected(trees.l4_pcie(), tmp_path)
    assert data["cpu"]["model"] == "EPYC-9654" and data["cpu"]["vendor"] == "amd"
    assert data["gpus"] == [{"model": "L4", "count": 1, "numa_nodes": [0]}]
    assert "display functions of other vendors left out (1a03:2000)" in text
    assert data["nics"] == [
        {
            "name": "ens1f0np0",
            "pci_address": "0000:c1:00.0",
            "model": "BCM57508",
            "speed_gbps": 25,
            "numa_node": 0,
            "role": "frontend",
            "names_real": True,
        }
    ]
    assert data["disks"] == [
        {"name": "sda", "kind": "ssd", "role": "os"},
        {"name": "sdb", "kind": "hdd", "role": "data"},
    ]
    assert "sdc: removable; left out" in text
    assert "nvswitch" not in data and "nvswitch: left out" in text


def test_gh200_keeps_cpu_less_nodes_out_of_the_count(tmp_path: Path):
    data, text = detected(trees.gh200(), tmp_path)
    assert data["cpu"] == {
        "model": "Grace",
        "vendor": "nvidia",
        "arch": "aarch64",
        "sockets": 1,
        "cores_per_socket": 72,
        "threads_per_core": 1,
    }
    assert data["numa_nodes"] == 1
    # the format states the CPU-less nodes (kubelet counts them: issue 26); main only commented
    assert data["memory_only_numa_nodes"] == 8
    assert "cpulist is empty in /sys/devices/system/node: 1, 2, 3, 4, 5, 6, 7, 8" in text
    assert data["memory_gib"] == 480 and "less 96 GiB on CPU-less nodes" in text
    assert data["gpus"] == [{"model": "GH200", "count": 1, "numa_nodes": [0]}]
    assert data["os"] == {
        "distro": "ubuntu-24.04",
        "kernel": "6.8.0-1013-nvidia-64k",
        "page_size_kib": 64,
    }
    assert "SoC id jep106:036b:0241 is NVIDIA Grace" in text
    by_name = {nic["name"]: nic for nic in data["nics"]}
    assert by_name["ib0"]["role"] == "compute" and by_name["ib0"]["rdma"] is True
    assert by_name["enP2p1s0f0np0"]["role"] == "frontend" and "rdma" not in by_name["enP2p1s0f0np0"]


def test_neoverse_v2_without_the_grace_soc_id_is_not_called_grace(tmp_path: Path):
    machine = trees.gh200()
    machine.soc_id = None
    data, text = detected(machine, tmp_path)
    assert data["cpu"]["vendor"] == "other" and data["cpu"]["arch"] == "aarch64"
    assert "model" not in data["cpu"] and "not NVIDIA Grace (SoC id is not" in text


def test_epyc_nps4_has_four_nodes_per_socket(tmp_path: Path):
    data, text = detected(trees.epyc_nps4(), tmp_path)
    assert data["cpu"]["sockets"] == 2 and data["numa_nodes"] == 8
    assert data["memory_only_numa_nodes"] == 0  # every node has CPUs: known to be none
    assert data["gpus"] == []
    assert [(nic["name"], nic.get("numa_node"), nic["role"]) for nic in data["nics"]] == [
        ("ens1np0", 1, "compute"),
        ("ens2np0", 6, "frontend"),
        ("ens3np0", 3, "storage"),
        ("ens4np0", None, "storage"),
    ]
    assert "numa_node -1, but its local_cpulist is that node's" in text


def test_ampere_is_described_as_ampere_aarch64(tmp_path: Path):
    data, text = detected(trees.ampere_one(), tmp_path)
    assert data["cpu"] == {
        "vendor": "ampere",
        "arch": "aarch64",
        "sockets": 1,
        "cores_per_socket": 192,
        "threads_per_core": 1,
    }
    assert "implementer 0xc0 is Ampere" in text
    assert data["gpus"] == [{"model": "A100-PCIe-80GB", "count": 1, "numa_nodes": [0]}]


def test_graviton_is_other_aarch64_and_gets_no_grace_setting(tmp_path: Path):
    data, text = detected(trees.graviton(), tmp_path)
    assert (data["cpu"]["vendor"], data["cpu"]["arch"]) == ("other", "aarch64")
    path = tmp_path / "graviton.yaml"
    path.write_text(text)
    result = CliRunner().invoke(main, ["explain", "--hw", str(path), "--profile", "inference"])
    assert result.exit_code == 0, result.output
    assert "acpi_power_meter" not in result.output


def test_an_x86_vendor_without_a_name_is_other(tmp_path: Path):
    machine = trees.vm_without_gpus()
    machine.cpuinfo = trees.x86_cpuinfo("HygonGenuine", "Hygon C86 7285 32-core Processor")
    data, _ = detected(machine, tmp_path)
    assert (data["cpu"]["vendor"], data["cpu"]["arch"]) == ("other", "x86_64")


def test_a_cpu_of_no_known_arch_is_refused(tmp_path: Path):
    machine = trees.vm_without_gpus()
    machine.cpuinfo = "processor\t: 0\nisa\t: rv64imafdc\n"
    out = tmp_path / "riscv.yaml"
    status, _, errors = detect(machine.build(tmp_path / "tree"), "-o", str(out))
    assert status == 2 and not out.exists()
    lines = errors.strip().splitlines()
    assert len(lines) == 1, errors
    assert "proc/cpuinfo: cpu.arch: neither an x86 vendor_id nor an Arm CPU implementer" in lines[0]


def test_vm_without_gpus(tmp_path: Path):
    data, text = detected(trees.vm_without_gpus(), tmp_path)
    # QEMU's 4 virtual sockets on 1 NUMA node: the format needs nodes to be a multiple of sockets
    assert data["cpu"] == {
        "vendor": "intel",
        "sockets": 1,
        "cores_per_socket": 4,
        "threads_per_core": 1,
    }
    assert "GUESS: 4 packages share 1 NUMA node(s)" in text
    assert "no catalog entry named 'Intel Xeon (Icelake)'" in text
    assert data["gpus"] == [] and data["numa_nodes"] == 1
    # the virtio PCI function, the parent of the virtio device its device link names
    assert data["nics"] == [
        {"name": "eth0", "pci_address": "0000:00:03.0", "role": "frontend", "names_real": True}
    ]
    assert "PCI 1af4:1041 is not in the catalog" in text  # found through virtio0, its parent
    assert data["disks"] == [{"name": "vda", "kind": "hdd", "role": "os"}]
    assert "# distribution: Debian GNU/Linux 12 (bookworm) (debian 12)" in text
    assert data["os"]["distro"] == "debian-12"


def test_output_is_deterministic_and_names_the_command(tmp_path: Path):
    root = trees.dgx_h100().build(tmp_path / "tree")
    first, second = detect(root), detect(root)
    assert first == second
    assert first[1].startswith(f"# Hardware description written by `gen detect --root {root}`")


def test_an_unknown_gpu_is_written_by_pci_id_and_gen_check_names_it(tmp_path: Path):
    machine = trees.l4_pcie()
    # 3180 is "GB110 [Reserved Dev ID A]" in pci.ids: no product, never a catalog entry (2bb5,
    # used here before, is the RTX PRO 6000 Blackwell Server Edition since issue 31)
    machine.pci("0000:42:00.0", "10de", "3180", "0x030200", node=0)
    status, text, errors = detect(machine.build(tmp_path / "tree"))
    assert status == 0
    data = yaml.safe_load(text)
    assert {"model": "0x3180", "count": 1, "numa_nodes": [0]} in data["gpus"]
    assert "PCI 10de:3180, NOT IN THE CATALOG" in text
    assert errors == (
        "warning: `gen check` will refuse this description: gpus[1].model: unknown GPU model "
        "'0x3180' (written by PCI device id: add a hardware_db/gpus/ entry with that id)\n"
    )
    status, output = check(text, tmp_path)
    assert status == 2 and "gpus[1].model: unknown GPU model '0x3180'" in output


def test_writes_a_file_atomically_and_keeps_it_on_failure(tmp_path: Path):
    out = tmp_path / "box.yaml"
    status, _, errors = detect(trees.l4_pcie().build(tmp_path / "good"), "-o", str(out))
    assert status == 0, errors
    before = out.read_text()
    assert before.startswith("# Hardware description")
    bad = trees.ampere_one()
    bad.cpuinfo = "processor\t: 0\n"
    status, _, _ = detect(bad.build(tmp_path / "bad"), "-o", str(out))
    assert status == 2 and out.read_text() == before
    assert sorted(p.name for p in tmp_path.iterdir()) == ["bad", "box.yaml", "good"]


def test_a_missing_root_is_a_clear_error(tmp_path: Path):
    status, _, errors = detect(tmp_path / "nowhere")
    assert status == 2 and "not a directory (expected an unpacked capture)" in errors


ALLOWED_IMPORTS = (
    "generator.detect",
    "generator.model",
    "generator.inputs",
    "generator.errors",
    "generator.foreign",
    "generator.paths",
    "generator.table",
)


def test_the_detect_package_imports_only_the_model_inputs_and_leaf_modules():
    import ast

    package = Path(__file__).resolve().parent.parent / "generator" / "detect"
    for module in sorted(package.glob("*.py")):
        for node in ast.walk(ast.parse(module.read_text())):
            names = (
                [a.name for a in node.names]
                if isinstance(node, ast.Import)
                else ([node.module or ""] if isinstance(node, ast.ImportFrom) else [])
            )
            for name in (n for n in names if n.split(".")[0] == "generator"):
                assert name == "generator" or name.startswith(ALLOWED_IMPORTS), (module.name, name)


def test_an_rdma_device_two_interfaces_share_is_named_for_neither(tmp_path: Path):
    """A dual-port adapter with one RDMA device for both ports (mlx4): naming it for one
    interface would be wrong, for both a duplicate the hardware format refuses."""
    machine = trees.epyc_nps4()
    machine.nic("ens1np1", "0000:41:00.0", speed=200000)
    data, text = detected(machine, tmp_path)
    by_name = {nic["name"]: nic for nic in data["nics"]}
    assert "rdma_device" not in by_name["ens1np0"] and "rdma_device" not in by_name["ens1np1"]
    assert "rdma_device: left out, mlx5_0 is on another interface's function too" in text
    assert by_name["ens2np0"]["rdma_device"] == "mlx5_1"
    status, output = check(text, tmp_path, "training")
    assert status == 0, output


def test_an_rdma_device_name_the_format_refuses_is_left_out(tmp_path: Path):
    machine = trees.gh200()
    del machine.entries["sys/class/infiniband/mlx5_0"]
    machine.rdma("mlx5_0,mlx5_9", "0000:01:00.0")  # a list smuggled into NCCL_IB_HCA
    data, text = detected(machine, tmp_path)
    ib0 = next(nic for nic in data["nics"] if nic["name"] == "ib0")
    assert ib0["rdma"] is True and "rdma_device" not in ib0
    assert "is not a name the format takes" in text


KNOWN_DISTROS = ("almalinux-9", "debian-12", "rhel-9", "rocky-9", "ubuntu-22.04", "ubuntu-24.04")


@pytest.mark.parametrize(
    ("fields", "distro"),
    [
        ({"ID": "ubuntu", "VERSION_ID": "22.04"}, "ubuntu-22.04"),
        ({"ID": "debian", "VERSION_ID": "12"}, "debian-12"),
        ({"ID": "rhel", "VERSION_ID": "9.4"}, "rhel-9"),  # a minor release: the major's table
        ({"ID": "rocky", "VERSION_ID": "9.3"}, "rocky-9"),
        ({"ID": "ubuntu", "VERSION_ID": "22.10"}, None),  # not 22.04, and no "ubuntu-22" table
        ({"ID": "pop", "VERSION_ID": "22.04", "ID_LIKE": "ubuntu debian"}, None),
        ({"ID": "debian"}, None),  # testing/sid has no VERSION_ID
        ({"ID": "../x", "VERSION_ID": "1"}, None),
    ],
)
def test_os_distro_comes_from_id_and_version_id(fields, distro):
    """Issue 30: detect never wrote os.distro (and said the format had no field for it)."""
    from generator.detect.system import match_distro

    found, note = match_distro(fields, KNOWN_DISTROS)
    assert found == distro
    assert note


# /usr/lib/os-release of trixie's base-files 13.8+deb13u8 (read with dpkg-deb), as shipped
TRIXIE_OS_RELEASE = """PRETTY_NAME="Debian GNU/Linux 13 (trixie)"
NAME="Debian GNU/Linux"
VERSION_ID="13"
VERSION="13 (trixie)"
VERSION_CODENAME=trixie
DEBIAN_VERSION_FULL=13.8
ID=debian
HOME_URL="https://www.debian.org/"
SUPPORT_URL="https://www.debian.org/support"
BUG_REPORT_URL="https://bugs.debian.org/"
"""


def test_a_trixie_host_is_detected_as_debian_13_from_the_shipped_tables(tmp_path: Path):
    """Issue 37: ID=debian VERSION_ID=13 names hardware_db/distros/debian-13.yaml."""
    tree = trees.l4_pcie()
    tree.os_release = TRIXIE_OS_RELEASE
    data, text = detected(tree, tmp_path)
    assert data["os"]["distro"] == "debian-13", text
    assert "ID=debian VERSION_ID=13" in text


def test_an_unknown_distribution_is_left_out_with_a_note(tmp_path: Path):
    tree = trees.l4_pcie()
    tree.os_release = 'PRETTY_NAME="Pop!_OS 22.04 LTS"\nID=pop\nVERSION_ID="22.04"\n'
    data, text = detected(tree, tmp_path)
    assert "distro" not in data["os"]
    assert "# distro: left out: pop 22.04 (/etc/os-release) is none of" in text
