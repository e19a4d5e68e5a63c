"""The distributions fleets build on in 2026 (issue 37): Ubuntu 26.04, RHEL 10 and its rebuilds,
Amazon Linux 2023. Each table loads, its names resolve, an unstated os.kernel means the kernel
line the table marks, and a bundle for it takes that distribution's own boot-argument path and
never writes a sysctl its kernel lacks."""

from __future__ import annotations

import json
import subprocess
from pathlib import Path

import pytest
from click.testing import CliRunner
from test_install import make_bin, run

from generator.cli import main
from generator.detect.system import match_distro
from generator.inputs.distro import load_distros, resolve_distro
from generator.inputs.load import load_inputs
from generator.paths import hardware_db_dir
from tests.conftest import missing_tool
from tests.validators import tools
from tests.validators.run import MissingTool

NEW = {
    "ubuntu-26.04": "ubuntu-26.04",
    "rhel-10": "rhel-10",
    "rocky-10": "rhel-10",
    "almalinux-10": "rhel-10",
    "amazon-linux-2023": "amazon-linux-2023",
    "amzn-2023": "amazon-linux-2023",
}
DROP_IN = "rootfs/etc/default/grub.d/90-goldtune.cfg"
SYSCTL = "rootfs/etc/sysctl.d/90-goldtune.conf"


def gen(*args: str) -> str:
    result = CliRunner().invoke(main, list(args))
    assert result.exit_code == 0, result.output
    return result.output


# The tables whose containerd is 2.x: their Kubernetes bundles carry a version 3 drop-in, which
# containerd 2's own `config dump` reads in the validators (tests/validators/run.py).
CONTAINERD_2 = ("ubuntu-26.04", "amazon-linux-2023")
K8S = "-k8s"


def test_the_containerd_2_targets_get_a_version_3_drop_in(bundles: dict[str, Path]) -> None:
    for name in CONTAINERD_2:
        (drop_in,) = (bundles[f"{name}{K8S}"] / "rootfs/etc/containerd/conf.d").glob("*.toml")
        text = drop_in.read_text()
        assert "\nversion = 3\n" in text, name
        assert '[plugins."io.containerd.cri.v1.runtime".containerd]' in text, name


@pytest.fixture(scope="module")
def bundles(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Path]:
    """dgx-h100 training for each new name, as `gen --os NAME -o DIR` writes it; and the
    Kubernetes node (containerd, kubelet) on the containerd 2 targets (K8S)."""
    root = tmp_path_factory.mktemp("bundles")
    made = {name: ("training", root / name) for name in NEW}
    made |= {f"{name}{K8S}": ("training-k8s", root / f"{name}{K8S}") for name in CONTAINERD_2}
    for name, (profile, out) in made.items():
        gen(
            "--hw", "dgx-h100", "--profile", profile, "--os", name.removesuffix(K8S), "-o", str(out)
        )
    return {name: out for name, (_, out) in made.items()}


@pytest.mark.parametrize(("name", "key"), NEW.items())
def test_each_name_resolves_to_its_table(name: str, key: str) -> None:
    distro = resolve_distro(name, load_distros())
    assert distro.key == key
    assert distro.sources


@pytest.mark.parametrize(
    ("key", "family", "kernel"),
    [
        ("ubuntu-26.04", "debian", (7, 0)),  # the one GA line
        ("rhel-10", "rhel", (6, 12)),
        ("amazon-linux-2023", "amazon", (6, 18)),  # the line marked default: the June 2026 AMIs
    ],
)
def test_an_unstated_kernel_is_the_tables_default_line(
    key: str, family: str, kernel: tuple[int, int]
) -> None:
    distro = load_distros()[key]
    assert distro.family == family
    assert distro.kernel_version == kernel
    facts = load_inputs("dgx-h100", "training", os_name=key).facts
    assert facts.os.kernel == kernel


def test_amazon_linux_2023_has_its_older_lines_beside_the_default() -> None:
    kernels = load_distros()["amazon-linux-2023"].kernels
    assert [(k.version, k.package, k.default) for k in kernels] == [
        ("6.1", "kernel", False),
        ("6.12", "kernel6.12", False),
        ("6.18", "kernel6.18", True),
    ]


@pytest.mark.parametrize(
    ("ident", "version", "found"),
    [
        ("ubuntu", "26.04", "ubuntu-26.04"),
        ("rhel", "10.1", "rhel-10"),
        ("rocky", "10.0", "rocky-10"),
        ("almalinux", "10.1", "almalinux-10"),
        ("amzn", "2023", "amzn-2023"),  # AL2023's os-release; the alias names the table
    ],
)
def test_detect_maps_os_release_to_the_new_tables(ident: str, version: str, found: str) -> None:
    distros = load_distros()
    name, note = match_distro({"ID": ident, "VERSION_ID": version}, distros.keys())
    assert name == found, note
    assert distros[name].key == NEW[found]


@pytest.mark.parametrize("name", NEW)
def test_every_new_name_makes_a_bundle_without_cfs_sysctls(
    name: str, bundles: dict[str, Path]
) -> None:
    sysctl = (bundles[name] / SYSCTL).read_text()
    assert "vm.max_map_count" in sysctl or "ubuntu" in name  # 26.04 already sets it (55-map-count)
    assert "kernel.sched_" not in sysctl


@pytest.mark.parametrize("name", ["ubuntu-26.04", "rhel-10", "amazon-linux-2023"])
def test_a_cfs_sysctl_override_is_refused_on_the_eevdf_kernels(name: str, tmp_path: Path) -> None:
    """kernel.sched_min_granularity_ns left /proc/sys in 5.13: the table's kernel decides, so a
    profile that sets it fails for these targets and works for RHEL 8's 4.18."""
    profile = tmp_path / "cfs.yaml"
    profile.write_text(
        "extends: training\noverrides:\n"
        "  - {kind: sysctl, key: kernel.sched_min_granularity_ns, value: 3000000,"
        " reason: an old CFS recipe}\n"
    )
    args = ["check", "--hw", "dgx-h100", "--profile", str(profile)]
    refused = CliRunner().invoke(main, [*args, "--os", name])
    assert refused.exit_code == 2, refused.output
    assert "kernel.sched_min_granularity_ns" in refused.output
    assert CliRunner().invoke(main, [*args, "--os", "rhel-8"]).exit_code != 2


def test_ubuntu_26_04_takes_the_grub_drop_in(bundles: dict[str, Path]) -> None:
    assert (bundles["ubuntu-26.04"] / DROP_IN).is_file()


@pytest.mark.parametrize("name", ["rhel-10", "rocky-10", "amazon-linux-2023"])
def test_rhel_10_and_al2023_take_the_bls_path_without_a_drop_in(
    name: str, bundles: dict[str, Path]
) -> None:
    """Their grub2-mkconfig reads no /etc/default/grub.d (boot_args.reads): no drop-in is
    rendered, the arguments go into the BLS entries, /etc/kernel/cmdline and GRUB_CMDLINE_LINUX."""
    assert not (bundles[name] / DROP_IN).exists()
    assert (bundles[name] / "kernel-cmdline").read_text().split()


# A stand-in AL2023 image root (its words are not read from an AL2023 image): BLS entries under
# /boot/loader/entries and a GRUB_CMDLINE_LINUX in /etc/default/grub, the two places the EKS
# AMI's set-kernel-arg edits, with no GRUB_ENABLE_BLSCFG line: the entries alone must make
# install.sh take the BLS path.
AL2023_OPTIONS = (
    "root=UUID=0f3c ro console=tty0 console=ttyS0,115200n8 nvme_core.io_timeout=4294967295"
)
AL2023_ENTRY = "boot/loader/entries/ec2a1b-6.18.8-9.236.amzn2023.x86_64.conf"


def al2023_root(root: Path) -> Path:
    files = {
        "etc/default/grub": f'GRUB_CMDLINE_LINUX="{AL2023_OPTIONS}"\n',
        AL2023_ENTRY: "title Amazon Linux (6.18.8-9.236.amzn2023.x86_64) 2023\n"
        "version 6.18.8-9.236.amzn2023.x86_64\nlinux /vmlinuz-6.18.8-9.236.amzn2023.x86_64\n"
        f"options {AL2023_OPTIONS}\n",
    }
    for name, text in files.items():
        (root / name).parent.mkdir(parents=True, exist_ok=True)
        (root / name).write_text(text)
    return root


def test_an_al2023_image_build_edits_the_bls_entries(
    tmp_path: Path, bundles: dict[str, Path]
) -> None:
    bundle = bundles["amazon-linux-2023"]
    root = al2023_root(tmp_path / "image")
    result = run(bundle / "install.sh", "--root", str(root), path=make_bin(tmp_path, {}))
    assert result.returncode == 0, result.stdout + result.stderr
    assert "boot arguments (bls)" in result.stdout
    args = (bundle / "kernel-cmdline").read_text().split()
    options = (root / AL2023_ENTRY).read_text().splitlines()[-1].split()
    assert options == ["options", *AL2023_OPTIONS.split(), *args]
    assert (root / "etc/kernel/cmdline").read_text().split() == [*AL2023_OPTIONS.split(), *args]
    assert set(args) <= set((root / "etc/default/grub").read_text().split('"')[1].split())
    assert not (root / "etc/default/grub.d").exists()


# --- preflight: the os.distro claim against the node's os-release ------------------------------

OS_RELEASES = {
    "amzn-2023": 'NAME="Amazon Linux"\nID="amzn"\nID_LIKE="fedora"\nVERSION_ID="2023"\n',
    "rocky-10.1": 'ID="rocky"\nID_LIKE="rhel centos fedora"\nVERSION_ID="10.1"\n',
    "ubuntu-26.04": 'NAME="Ubuntu"\nID=ubuntu\nID_LIKE=debian\nVERSION_ID="26.04"\n',
}


def preflight_distro(tmp_path: Path, node: str, bundle: Path) -> tuple[int, str]:
    """The bundle's own os.distro claim judged on a node whose os-release is ``node``'s."""
    root = tmp_path / "node"
    (root / "etc").mkdir(parents=True)
    (root / "etc/os-release").write_text(OS_RELEASES[node])
    conf = (bundle / "rootfs/etc/goldtune/preflight.conf").read_text()
    (claim,) = [line for line in conf.splitlines() if line.startswith("claim\tos.distro\t")]
    data = tmp_path / "preflight.conf"
    data.write_text(f"result\t/run/goldtune/preflight\n{claim}\n")
    script = Path(__file__).parent.parent / "templates/scripts/preflight"
    env = {"PATH": "/usr/bin:/bin", "TEST_SYSROOT": str(root), "LC_ALL": "C"}
    done = subprocess.run(
        ["sh", str(script), str(data)], capture_output=True, text=True, env=env, check=False
    )
    return done.returncode, done.stdout + done.stderr


@pytest.mark.parametrize(
    ("name", "node"),
    [
        ("amazon-linux-2023", "amzn-2023"),
        ("rhel-10", "rocky-10.1"),
        ("ubuntu-26.04", "ubuntu-26.04"),
    ],
)
def test_the_distro_claim_holds_on_the_distributions_own_os_release(
    name: str, node: str, bundles: dict[str, Path], tmp_path: Path
) -> None:
    """AL2023's os-release says amzn 2023: the claim carries the table's os_release (amzn-2023),
    else its names (the key and its aliases), so that the boot-time preflight does not report
    every AL2023 node as a mismatch."""
    status, output = preflight_distro(tmp_path, node, bundles[name])
    assert status == 0, output
    assert "this node matches the hardware file" in output


def test_the_distro_claim_still_fails_on_another_distribution(
    bundles: dict[str, Path], tmp_path: Path
) -> None:
    status, output = preflight_distro(tmp_path, "amzn-2023", bundles["rhel-10"])
    assert status == 1, output
    assert "os.distro: the hardware file says rhel-10,rocky-10,almalinux-10" in output


# --- the real consumers on the new distributions' bundles ---------------------------------------


@pytest.mark.parametrize("validator", [v.name for v in tools.VALIDATORS])
def test_the_real_consumers_accept_the_new_distributions_bundles(
    validator: str, bundles: dict[str, Path]
) -> None:
    """Every validator (systemd-sysctl judged by the distribution's own kernel key lists,
    systemd-analyze, udevadm, tuned's loader, cloud-init, shellcheck...) over one bundle per
    table."""
    (check,) = [v for v in tools.VALIDATORS if v.name == validator]
    judged = [bundles[name] for name in ("ubuntu-26.04", "rhel-10", "amazon-linux-2023")]
    judged += [bundles[f"{name}{K8S}"] for name in CONTAINERD_2]
    try:
        verdict = check.run_many(judged)
    except MissingTool as missing:
        missing_tool(missing)
    for bundle in judged:
        assert verdict[bundle] == [], f"{check.consumer} rejects {bundle.name}: {verdict[bundle]}"


@pytest.mark.parametrize("name", ["amazon-linux-2023", "amzn-2023", "rocky-10"])
def test_a_hardware_files_os_distro_names_the_new_tables(name: str, tmp_path: Path) -> None:
    """os.distro in a hardware file takes a key with a word in it (amazon-linux-2023) as --os
    does: the field's pattern once admitted only <letters>-<version>."""
    hardware = tmp_path / "box.yaml"
    shipped = (hardware_db_dir() / "systems" / "l4-inference.yaml").read_text()
    hardware.write_text(shipped + f"os:\n  distro: {name}\n")
    gen("--hw", str(hardware), "--profile", "inference", "-o", str(tmp_path / "out"))
    plan = json.loads((tmp_path / "out" / "plan.json").read_text())
    assert plan["distro"] == resolve_distro(name, load_distros()).key


def test_eks_nodeadm_makes_the_node_drop_ins_unread_and_the_plan_says_so(
    bundles: dict[str, Path],
) -> None:
    """AL2023 on EKS: nodeadm writes config.toml anew at every boot (no imports entry) and starts
    kubelet with its own --config-dir; the table says so and the plan warns, naming both files,
    where a distribution without such an agent gets no such warning."""

    def node_agent_warnings(name: str) -> list[str]:
        plan = json.loads((bundles[f"{name}{K8S}"] / "plan.json").read_text())
        return [w["text"] for w in plan["warnings"] if w["check"] == "distro-node-agent"]

    containerd, kubelet = node_agent_warnings("amazon-linux-2023")
    assert "nodeadm" in containerd and "/etc/containerd/conf.d/90-goldtune.toml" in containerd
    assert "--config-dir=/etc/kubernetes/kubelet/config.json.d" in kubelet
    assert node_agent_warnings("ubuntu-26.04") == []


@pytest.mark.parametrize("name", ["ubuntu-26.04", "rhel-10", "amazon-linux-2023"])
def test_explain_md_names_the_distribution_table(name: str, bundles: dict[str, Path]) -> None:
    """A reviewer finds which table the bundle was made from: EXPLAIN.md names it."""
    head = (bundles[name] / "EXPLAIN.md").read_text().split("| Input |")[0]
    assert f"Made for **{name}**" in head and f"`{name}.yaml` (`hardware_db/distros/`" in head
