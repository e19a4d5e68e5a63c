"""The containerd and kubelet drop-ins wired into what reads them (issue 26 item 4).

On main, install.sh copied /etc/containerd/conf.d/90-goldtune.toml and the kubelet.conf.d drop-in
and said "done" while nothing read them: containerd reads conf.d only through an imports entry of
the config.toml it loads (Debian 12 ships 1.6 with a config.toml without one), and kubeadm's
10-kubeadm.conf passes kubelet no --config-dir. Each test here fails on main.
"""

from __future__ import annotations

import shutil
import subprocess
import tomllib
from pathlib import Path
from typing import Any

import pytest
from plans import full_plan, plan_without
from test_install import KUBEADM_DROPIN, bundle_for, make_bin, run

from generator.bundle.read import read_bundle
from generator.verify.run import verify_checks
from generator.verify.verdicts import Verdict

# Debian 12's containerd 1.6.20~ds1-1+deb12u3 /etc/containerd/config.toml, byte for byte.
DEBIAN_CONFIG = """version = 2

[plugins]
  [plugins."io.containerd.grpc.v1.cri"]
    [plugins."io.containerd.grpc.v1.cri".cni]
      bin_dir = "/usr/lib/cni"
      conf_dir = "/etc/cni/net.d"
  [plugins."io.containerd.internal.v1.opt"]
    path = "/var/lib/containerd/opt"
"""
CRI = ("plugins", "io.containerd.grpc.v1.cri")
RUNTIME = (*CRI, "containerd", "default_runtime_name")
CGROUP = (*CRI, "containerd", "runtimes", "nvidia", "options", "SystemdCgroup")
CNI_BIN = (*CRI, "cni", "bin_dir")
EXTRA_TOOLS = ("tr", "wc")


def image(tmp_path: Path, kubelet_start: str = KUBEADM_DROPIN, units_in: str = "usr/lib") -> Path:
    """Debian's containerd config.toml, kubelet.service with KUBELET_START as kubeadm's drop-in,
    the units under UNITS_IN/systemd/system (etc: the chroot of the first boot has the host's
    /usr)."""
    root = tmp_path / "image"
    (root / "etc/containerd").mkdir(parents=True)
    (root / "etc/containerd/config.toml").write_text(DEBIAN_CONFIG)
    units = root / units_in / "systemd/system"
    (units / "kubelet.service.d").mkdir(parents=True)
    (units / "kubelet.service").write_text("[Service]\nExecStart=/usr/bin/kubelet\n")
    (units / "kubelet.service.d/10-kubeadm.conf").write_text(kubelet_start)
    (units / "containerd.service").write_text("[Service]\nExecStart=/usr/bin/containerd\n")
    return root


def tools(tmp_path: Path) -> Path:
    path = make_bin(tmp_path, {})
    for tool in EXTRA_TOOLS:
        real = shutil.which(tool)
        if real and not (path / tool).exists():
            (path / tool).symlink_to(real)
    return path


def dump(root: Path, tmp_path: Path) -> dict[str, Any]:
    """`containerd config dump` of the image's own config.toml, its imports re-rooted in the
    image as they are read when it boots."""
    containerd = shutil.which("containerd")
    if containerd is None:
        pytest.skip("Debian's containerd is not installed here")
    text = (root / "etc/containerd/config.toml").read_text()
    main = tmp_path / "main.toml"
    main.write_text(text.replace('"/etc/containerd/', f'"{root}/etc/containerd/'))
    result = subprocess.run(
        [containerd, "--config", str(main), "config", "dump"],
        capture_output=True,
        text=True,
        check=True,
    )
    return tomllib.loads(result.stdout)


def lookup(document: dict[str, Any], path: tuple[str, ...]) -> Any:
    node: Any = document
    for key in path:
        node = node.get(key) if isinstance(node, dict) else None
    return node


def test_debians_containerd_reads_the_drop_in_after_install(tmp_path: Path) -> None:
    """The real consumer: before, the drop-in is in conf.d but Debian's config.toml does not
    import it (the NVIDIA runtime is not in containerd's merged config); after install.sh, it
    is, with Debian's own CNI bin_dir kept (1.x replaces a whole plugin table with an imported
    file's); a second install changes nothing; a bundle without it restores Debian's file."""
    bundle = bundle_for(tmp_path, full_plan())
    root = image(tmp_path)
    dropin = root / "etc/containerd/conf.d/90-goldtune.toml"
    dropin.parent.mkdir(parents=True)
    shutil.copy(bundle / "rootfs/etc/containerd/conf.d/90-goldtune.toml", dropin)
    before = dump(root, tmp_path)
    assert lookup(before, RUNTIME) != "nvidia"
    assert lookup(before, CNI_BIN) == "/usr/lib/cni"

    path = tools(tmp_path)
    result = run(bundle / "install.sh", "--root", str(root), path=path)
    assert "wired /etc/containerd/config.toml" in result.stdout, result.stdout + result.stderr
    after = dump(root, tmp_path)
    assert lookup(after, RUNTIME) == "nvidia"
    assert lookup(after, CGROUP) is True
    assert lookup(after, CNI_BIN) == "/usr/lib/cni"

    again = run(bundle / "install.sh", "--root", str(root), path=path)
    assert "unchanged /etc/containerd/config.toml" in again.stdout
    assert "unchanged /etc/containerd/conf.d/90-goldtune.toml" in again.stdout

    plain = bundle_for(tmp_path, plan_without("containerd"), "plain")
    run(plain / "install.sh", "--root", str(root), path=path)
    assert (root / "etc/containerd/config.toml").read_text() == DEBIAN_CONFIG
    assert not dropin.exists()


def test_a_missing_config_toml_gets_a_minimal_one_and_loses_it_again(tmp_path: Path) -> None:
    """containerd with no config.toml loads no file and so no import (LoadConfig)."""
    bundle = bundle_for(tmp_path, full_plan())
    root = image(tmp_path)
    (root / "etc/containerd/config.toml").unlink()
    path = tools(tmp_path)
    run(bundle / "install.sh", "--root", str(root), path=path)
    config = root / "etc/containerd/config.toml"
    assert config.read_text() == 'version = 2\nimports = ["/etc/containerd/conf.d/*.toml"]\n'
    assert lookup(dump(root, tmp_path), RUNTIME) == "nvidia"
    run(
        bundle_for(tmp_path, plan_without("containerd"), "plain") / "install.sh",
        "--root",
        str(root),
        path=path,
    )
    assert not config.exists()


def test_kubelet_gets_config_dir_through_kubeadms_variable(tmp_path: Path) -> None:
    bundle = bundle_for(tmp_path, full_plan())
    root = image(tmp_path)
    run(bundle / "install.sh", "--root", str(root), path=tools(tmp_path))
    checks, _ = verify_checks(read_bundle(bundle), root, None)
    kubelet = [c for c in checks if c.kind == "kubelet"]
    assert kubelet and all(c.verdict == Verdict.OK for c in kubelet), kubelet


def test_strict_names_what_cannot_be_wired_and_installs_nothing(tmp_path: Path) -> None:
    bundle = bundle_for(tmp_path, full_plan())
    root = image(tmp_path, "[Service]\nExecStart=\nExecStart=/usr/bin/kubelet --v=2\n")
    config = root / "etc/containerd/config.toml"
    config.write_text('imports = ["/a.toml",\n  "/b.toml"]\n' + DEBIAN_CONFIG)
    path = tools(tmp_path)
    result = run(bundle / "install.sh", "--root", str(root), "--strict", path=path)
    assert result.returncode == 1
    assert "containerd's import of /etc/containerd/conf.d/*.toml" in result.stderr
    assert "not a one-line array" in result.stderr
    assert "kubelet's --config-dir" in result.stderr
    assert not (root / "etc/containerd/conf.d").exists()
    plain = run(bundle / "install.sh", "--root", str(root), path=path)
    assert plain.returncode == 1
    assert "is not in effect" in plain.stdout


def test_verify_root_says_not_in_effect_when_nothing_reads_the_drop_ins(tmp_path: Path) -> None:
    """The drop-ins copied (as main's install.sh left them), nothing importing or passing them."""
    bundle = bundle_for(tmp_path, full_plan())
    root = image(tmp_path)
    for target in (
        "/etc/containerd/conf.d/90-goldtune.toml",
        "/etc/kubernetes/kubelet.conf.d/90-goldtune.conf",
    ):
        (root / target[1:]).parent.mkdir(parents=True, exist_ok=True)
        shutil.copy(bundle / f"rootfs{target}", root / target[1:])
    checks, _ = verify_checks(read_bundle(bundle), root, None)
    for kind in ("containerd", "kubelet"):
        found = [c for c in checks if c.kind == kind]
        assert found and all(
            c.verdict == Verdict.MISSING and "not in effect" in c.reason for c in found
        ), found


@pytest.mark.parametrize(
    ("config", "named"),
    [
        ("link", "is a link or not a regular file"),
        ('version = 2\n[plugins]\n"io.containerd.grpc.v1.cri".sandbox_image = "x"\n', "not plain"),
        ("[plugins.cri]\nsystemd_cgroup = true\n", "version 1 syntax"),
    ],
    ids=["link-out-of-the-image", "cri-as-a-dotted-key", "version-1"],
)
def test_a_config_toml_install_sh_cannot_edit_is_left_as_it_is_and_named(
    tmp_path: Path, config: str, named: str
) -> None:
    """A config.toml that is a link out of the image is never read or written through; one
    whose CRI settings text cannot carry, or version 1 syntax, is left byte for byte."""
    bundle = bundle_for(tmp_path, full_plan())
    root = image(tmp_path)
    outside = tmp_path / "host-config.toml"
    outside.write_text(DEBIAN_CONFIG)
    target = root / "etc/containerd/config.toml"
    target.unlink()
    if config == "link":
        target.symlink_to(outside)
    else:
        target.write_text(config)
    path = tools(tmp_path)
    strict = run(bundle / "install.sh", "--root", str(root), "--strict", path=path)
    assert strict.returncode == 1 and named in strict.stderr, strict.stderr
    relaxed = run(bundle / "install.sh", "--root", str(root), path=path)
    assert relaxed.returncode == 1 and "is not in effect" in relaxed.stdout, relaxed.stdout
    assert outside.read_text() == DEBIAN_CONFIG
    if config == "link":
        assert target.is_symlink()
    else:
        assert target.read_text() == config
