"""The kubelet drop-in goes where the target's kubelet is started to read drop-ins (issue 37).

On Amazon Linux 2023's EKS AMIs, nodeadm starts kubelet itself: ExecStart=/usr/bin/kubelet
$NODEADM_KUBELET_ARGS (awslabs/amazon-eks-ami 81fec2e templates/al2023/runtime/rootfs/etc/systemd/
system/kubelet.service), with --config-dir=/etc/kubernetes/kubelet/config.json.d where the
NodeConfig has spec.kubelet.config, its own drop-in being 40-nodeadm.conf there
(nodeadm/internal/kubelet/config.go writeKubeletConfig). kubeadm's kubelet.conf.d and the
kubelet.service drop-in that sets $KUBELET_CONFIG_ARGS are never read there. A distribution
table's kubelet.config_dir says so; a portable bundle, and one for a table that does not say,
keeps kubelet.conf.d and its unit drop-in.
"""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import pytest
from click.testing import CliRunner

from generator.bundle.read import Bundle
from generator.cli import main
from generator.inputs.distro import load_distros
from generator.model.planio import plan_from_data
from generator.model.setting import Plan, Setting
from generator.verify import image_runtime, live
from generator.verify.imagefs import Image
from generator.verify.snapshot import Snapshot
from generator.verify.verdicts import Verdict

AGENT_DIR = "/etc/kubernetes/kubelet/config.json.d"
KUBEADM_DIR = "/etc/kubernetes/kubelet.conf.d"
UNIT_DROPIN = "rootfs/etc/systemd/system/kubelet.service.d/90-goldtune.conf"
# nodeadm's kubelet.service, as the EKS AMI ships it (81fec2e), less what the checks ignore
NODEADM_UNIT = (
    "[Service]\nEnvironmentFile=/etc/eks/kubelet/environment\n"
    "ExecStart=/usr/bin/kubelet $NODEADM_KUBELET_ARGS\n"
)
POLICY = Setting("kubelet", "cpuManagerPolicy", "static", "test", "kubernetes.cpu-manager")


def bundle_for(tmp_path: Path, distro: str) -> Path:
    out = tmp_path / distro
    args = ["--hw", "dgx-h100", "--profile", "training-k8s", "--os", distro, "-o", str(out)]
    result = CliRunner().invoke(main, args)
    assert result.exit_code == 0, result.output
    return out


def kubelet_warnings(bundle: Path) -> list[str]:
    plan = json.loads((bundle / "plan.json").read_text())
    return [
        w["text"]
        for w in plan["warnings"]
        if w["check"] == "distro-node-agent" and "kubelet" in w["text"]
    ]


def test_an_al2023_bundle_puts_its_drop_in_in_nodeadms_config_dir(tmp_path: Path) -> None:
    bundle = bundle_for(tmp_path, "amazon-linux-2023")
    ours = bundle / f"rootfs{AGENT_DIR}/90-goldtune.conf"
    assert ours.is_file()
    assert not (bundle / f"rootfs{KUBEADM_DIR}").exists()
    # nodeadm owns the unit's flags: no $KUBELET_CONFIG_ARGS drop-in, which its ExecStart ignores
    assert not (bundle / UNIT_DROPIN).exists()
    assert json.loads((bundle / "plan.json").read_text())["kubelet_dir"] == AGENT_DIR
    assert f"\t{AGENT_DIR}/90-goldtune.conf\n" in (bundle / "install.list").read_text()
    # kubelet merges the directory's *.conf by name, a later one winning: after nodeadm's
    assert sorted(["40-nodeadm.conf", ours.name])[-1] == ours.name
    assert ours.read_text().count("\nkind: KubeletConfiguration\n") == 1
    # the old warning ("is not read there") is gone; what is left is nodeadm's condition
    [warning] = kubelet_warnings(bundle)
    assert "is not read there" not in warning and "spec.kubelet.config" in warning


def test_an_ubuntu_26_04_bundle_keeps_kubeadms_directory_and_its_unit_drop_in(
    tmp_path: Path,
) -> None:
    bundle = bundle_for(tmp_path, "ubuntu-26.04")
    assert (bundle / f"rootfs{KUBEADM_DIR}/90-goldtune.conf").is_file()
    assert (bundle / UNIT_DROPIN).is_file()
    assert not (bundle / f"rootfs{AGENT_DIR}").exists()
    assert "kubelet_dir" not in json.loads((bundle / "plan.json").read_text())
    assert kubelet_warnings(bundle) == []


def test_the_table_says_where_nodeadm_starts_kubelet_reading() -> None:
    kubelet = load_distros()["amazon-linux-2023"].kubelet
    assert kubelet is not None and kubelet.config_dir == AGENT_DIR
    assert kubelet.config_dir_when and "spec.kubelet.config" in kubelet.config_dir_when
    ubuntu = load_distros()["ubuntu-26.04"].kubelet
    assert ubuntu is None or ubuntu.config_dir is None


def test_verify_root_reads_the_drop_in_in_nodeadms_directory(tmp_path: Path) -> None:
    """An AL2023 image root: the value is found in config.json.d; whether nodeadm passes the
    flag is decided at boot, so not applicable in an image, never missing."""
    bundle = bundle_for(tmp_path, "amazon-linux-2023")
    image = tmp_path / "image"
    shutil.copytree(bundle / "rootfs/etc/kubernetes", image / "etc/kubernetes")
    (image / "etc/systemd/system").mkdir(parents=True)
    (image / "etc/systemd/system/kubelet.service").write_text(NODEADM_UNIT)
    result = CliRunner().invoke(main, ["verify", str(bundle), "--root", str(image), "--json"])
    rows = [c for c in json.loads(result.output)["checks"] if c["kind"] == "kubelet"]
    assert rows
    for row in rows:
        assert row["verdict"] == "not-applicable", row
        assert f"({AGENT_DIR}/90-goldtune.conf)" in row["actual"], row
    # the same file in kubeadm's directory is not what nodeadm's kubelet reads
    check = image_runtime.check_kubelet(POLICY, Image(_moved(image, tmp_path)), AGENT_DIR)
    assert check.verdict == Verdict.MISSING


def _moved(image: Path, tmp_path: Path) -> Path:
    other = tmp_path / "kubeadm-dir-image"
    shutil.copytree(image, other)
    (other / "etc/kubernetes/kubelet/config.json.d").rename(other / "etc/kubernetes/kubelet.conf.d")
    return other


def test_live_kubelet_must_run_with_the_plans_config_dir() -> None:
    ours = f"{AGENT_DIR}/90-goldtune.conf"
    arguments = (
        f"/usr/bin/kubelet --config=/etc/kubernetes/kubelet/config.json --config-dir={AGENT_DIR}"
    )
    records = {
        "runtime-unit": [("kubelet.service:ActiveState", "active")],
        "runtime-cmdline": [("kubelet.service", arguments)],
        "kubelet-file": [("-", ours)],
        "kubelet-config": [
            (ours, "kind: KubeletConfiguration"),
            (ours, 'cpuManagerPolicy: "static"'),
        ],
    }
    snapshot = Snapshot(records=records)
    plan = Plan("box", "k8s", (POLICY,), kubelet_dir=AGENT_DIR)
    found = live.check_kubelet(POLICY, live.Live.of(snapshot, Bundle(Path("/nonexistent"), plan)))
    assert found.verdict == Verdict.OK, found
    kubeadm = Plan("box", "k8s", (POLICY,))
    other = live.check_kubelet(
        POLICY, live.Live.of(snapshot, Bundle(Path("/nonexistent"), kubeadm))
    )
    assert other.verdict == Verdict.DIFFERS


@pytest.mark.parametrize("where", ["/etc/cron.d", "../../etc", f"{AGENT_DIR}/..", 7])
def test_a_plan_json_kubelet_dir_kubelet_is_not_started_with_is_refused(where: object) -> None:
    with pytest.raises(ValueError, match="kubelet_dir"):
        plan_from_data({"format": 1, "tool": "goldtune", "settings": [], "kubelet_dir": where})
