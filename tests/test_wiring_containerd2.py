"""containerd 2 (issue 37): the drop-in is read in the version of the config.toml importing it.

containerd 2.0 to 2.2 merge the `version` of every file they read (the last one wins) and migrate
the merged configuration once (generator/model/containerd.py has the code read): a version 3
drop-in under Debian's version 2 config.toml leaves that file's CRI tables unmigrated, and the
portable version 2 drop-in under a version 3 config.toml (`containerd config default`) loses the
NVIDIA runtime. install.sh writes the drop-in in config.toml's version. Run with the real
containerd 2.1.9 (forky's .deb, tests/tools/install-tools.sh) and the system's 1.6.
"""

from __future__ import annotations

import os
import shutil
import subprocess
import tomllib
from pathlib import Path
from typing import Any

import pytest
from plans import full_plan, plan_without
from test_install import bundle_for, run
from test_wiring import DEBIAN_CONFIG, image, lookup, tools

from generator.bundle.read import read_bundle
from generator.bundle.write import write_bundle
from generator.inputs.distro import Containerd
from generator.inputs.load import load_inputs
from generator.model.containerd import CRI_RUNTIME_V2, CRI_RUNTIME_V3
from generator.model.setting import Plan
from generator.plan.build import build_plan
from generator.render.render import render_bundle
from generator.verify.run import verify_checks
from generator.verify.verdicts import Verdict
from tests.validators.checks_runtime import check_containerd

TOOLS_DIR = Path(os.environ.get("GOLDTUNE_TOOLS_DIR", "/usr/local/lib/goldtune-tools"))
CONTAINERD2 = TOOLS_DIR / "containerd2/usr/bin/containerd"
DROPIN = "etc/containerd/conf.d/90-goldtune.toml"
CONFIG = "etc/containerd/config.toml"
V3 = ("plugins", "io.containerd.cri.v1.runtime")
V2 = ("plugins", "io.containerd.grpc.v1.cri")
RUNTIME_V3 = (*V3, "containerd", "default_runtime_name")
CGROUP_V3 = (*V3, "containerd", "runtimes", "nvidia", "options", "SystemdCgroup")
CNI_V3 = (*V3, "cni", "bin_dirs")


def containerd2() -> str:
    if not os.access(CONTAINERD2, os.X_OK):
        pytest.skip("containerd 2 is not unpacked here (tests/tools/install-tools.sh)")
    return str(CONTAINERD2)


def v3_plan() -> Plan:
    """The plan of a target whose table says containerd 2: the CRI runtime keys of version 3
    (what containers.nvidia-runtime writes then, tests/rules/test_containers.py)."""
    return full_plan(
        settings=tuple(
            s._replace(key=s.key.replace(CRI_RUNTIME_V2, CRI_RUNTIME_V3))
            for s in full_plan().settings
        )
    )


def dump(binary: str, root: Path, tmp_path: Path) -> dict[str, Any]:
    """`containerd config dump` of the image's config.toml, its imports re-rooted in the image."""
    text = (root / CONFIG).read_text()
    main = tmp_path / "main.toml"
    main.write_text(
        text.replace('"/etc/containerd/', f'"{root}/etc/containerd/').replace(
            "'/etc/containerd/", f"'{root}/etc/containerd/"
        )
    )
    result = subprocess.run(
        [binary, "--config", str(main), "config", "dump"], capture_output=True, text=True
    )
    assert result.returncode == 0, result.stderr
    return tomllib.loads(result.stdout)


def imported_as_it_is(bundle: Path, root: Path) -> None:
    """The bundle's drop-in copied and imported by hand, with no rewriting."""
    (root / DROPIN).parent.mkdir(parents=True, exist_ok=True)
    shutil.copy(bundle / "rootfs" / DROPIN, root / DROPIN)
    config = root / CONFIG
    entry = 'imports = ["/etc/containerd/conf.d/*.toml"]'
    text = config.read_text()
    config.write_text(
        text.replace("imports = []", entry) if "imports = []" in text else f"{entry}\n{text}"
    )


def containerd_checks_ok(bundle: Path, root: Path) -> None:
    checks, _ = verify_checks(read_bundle(bundle), root, None)
    ours = [c for c in checks if c.kind == "containerd" or c.key.endswith(DROPIN)]
    assert ours and all(c.verdict == Verdict.OK for c in ours), ours


def version_mismatches(bundle: Path, root: Path) -> str:
    """What `gen verify --root` says of the containerd settings where the drop-in's version is
    not config.toml's: every one DIFFERS, the reason's first words returned."""
    checks, _ = verify_checks(read_bundle(bundle), root, None)
    found = [c for c in checks if c.kind == "containerd"]
    assert found and all(c.verdict == Verdict.DIFFERS for c in found), found
    return found[0].reason.split(":")[0].removesuffix(" config.toml")


def test_a_containerd_2_bundle_joins_debians_version_2_config_as_version_2(
    tmp_path: Path,
) -> None:
    """Debian's containerd 2.1.9+ds1-5 ships the same version 2 config.toml as bookworm's 1.6
    (its CNI bin_dir /usr/lib/cni). Imported as it is, the version 3 drop-in makes the merged
    configuration version 3 and Debian's CNI table is not migrated (containerd 2 keeps its
    built-in list); written as version 2 by install.sh, both 2.1.9 and 1.6 take everything."""
    binary = containerd2()
    bundle = bundle_for(tmp_path, v3_plan())
    assert tomllib.loads((bundle / "rootfs" / DROPIN).read_text())["version"] == 3
    before_root = image(tmp_path / "before")
    imported_as_it_is(bundle, before_root)
    before = dump(binary, before_root, tmp_path)
    assert lookup(before, RUNTIME_V3) == "nvidia"
    assert lookup(before, CNI_V3) != ["/usr/lib/cni"]
    assert version_mismatches(bundle, before_root) == "a version 3 drop-in under a version 2"

    root = image(tmp_path)
    path = tools(tmp_path)
    result = run(bundle / "install.sh", "--root", str(root), path=path)
    assert "as version 2" in result.stdout, result.stdout + result.stderr
    installed = tomllib.loads((root / DROPIN).read_text())
    assert installed["version"] == 2 and "io.containerd.cri.v1.runtime" not in installed["plugins"]
    after = dump(binary, root, tmp_path)
    assert lookup(after, RUNTIME_V3) == "nvidia"
    assert lookup(after, CGROUP_V3) is True
    assert lookup(after, CNI_V3) == ["/usr/lib/cni"]
    system = shutil.which("containerd")
    if system is not None:  # bookworm's 1.6 reads the same files
        old = dump(system, root, tmp_path)
        assert lookup(old, (*V2, "containerd", "default_runtime_name")) == "nvidia"
        assert lookup(old, (*V2, "cni", "bin_dir")) == "/usr/lib/cni"
    containerd_checks_ok(bundle, root)
    again = run(bundle / "install.sh", "--root", str(root), path=path)
    assert f"unchanged /{DROPIN}" in again.stdout, again.stdout


def test_a_portable_bundle_joins_a_version_3_config_as_version_3(tmp_path: Path) -> None:
    """`containerd config default` of 2.x is version 3 with default_runtime_name 'runc' and a
    runc runtime: the version 2 drop-in imported as it is loses both keys to the migration
    (measured: the default stays runc); written as version 3 by install.sh, the NVIDIA runtime
    is the default and runc stays."""
    binary = containerd2()
    default = subprocess.run(
        [binary, "config", "default"], capture_output=True, text=True, check=True
    ).stdout
    bundle = bundle_for(tmp_path, full_plan())
    before_root = image(tmp_path / "before")
    (before_root / CONFIG).write_text(default)
    imported_as_it_is(bundle, before_root)
    assert lookup(dump(binary, before_root, tmp_path), RUNTIME_V3) == "runc"
    assert version_mismatches(bundle, before_root) == "a version 2 drop-in under a version 3"

    root = image(tmp_path)
    (root / CONFIG).write_text(default)
    result = run(bundle / "install.sh", "--root", str(root), path=tools(tmp_path))
    assert "as version 3" in result.stdout, result.stdout + result.stderr
    after = dump(binary, root, tmp_path)
    assert lookup(after, RUNTIME_V3) == "nvidia"
    assert lookup(after, CGROUP_V3) is True
    assert lookup(after, (*V3, "containerd", "runtimes", "runc", "runtime_type"))
    containerd_checks_ok(bundle, root)


def test_a_containerd_2_bundle_writes_a_version_3_config_where_there_is_none(
    tmp_path: Path,
) -> None:
    """No config.toml: the minimal one install.sh writes has the drop-in's version, and a
    bundle without the drop-in takes it back."""
    binary = containerd2()
    bundle = bundle_for(tmp_path, v3_plan())
    root = image(tmp_path)
    (root / CONFIG).unlink()
    path = tools(tmp_path)
    run(bundle / "install.sh", "--root", str(root), path=path)
    config = root / CONFIG
    assert config.read_text() == 'version = 3\nimports = ["/etc/containerd/conf.d/*.toml"]\n'
    assert lookup(dump(binary, root, tmp_path), RUNTIME_V3) == "nvidia"
    containerd_checks_ok(bundle, root)
    plain = bundle_for(tmp_path, plan_without("containerd"), "plain")
    run(plain / "install.sh", "--root", str(root), path=path)
    assert not config.exists()


def test_debians_config_is_the_one_its_containerd_2_package_ships() -> None:
    """The version 2 config.toml these tests use is also forky's containerd 2.1.9 package's
    (read from the unpacked .deb)."""
    packaged = CONTAINERD2.parent.parent.parent / CONFIG
    if not packaged.is_file():
        pytest.skip("containerd 2 is not unpacked here (tests/tools/install-tools.sh)")
    assert packaged.read_text() == DEBIAN_CONFIG


def test_a_plan_for_a_containerd_2_distribution_renders_what_containerd_2_takes(
    tmp_path: Path,
) -> None:
    """End to end: dgx-h100 training-k8s for debian-12's table with a test-only containerd 2
    fact (the shipped tables' facts are written elsewhere): the bundle's drop-in is version 3 and
    containerd 2.1.9's config dump takes every key of it (tests/validators)."""
    containerd2()
    inputs = load_inputs("dgx-h100", "training-k8s", os_name="debian-12")
    distro = inputs.facts.os.distro
    assert distro is not None
    fact = Containerd(major=2, source=["a test-only containerd fact, no package read"])
    changed = distro.model_copy(update={"containerd": fact})
    facts = inputs.facts._replace(os=inputs.facts.os._replace(distro=changed))
    bundle = write_bundle(render_bundle(build_plan(facts, inputs.profile)), tmp_path / "bundle")
    text = (bundle / "rootfs" / DROPIN).read_text()
    assert tomllib.loads(text)["version"] == 3 and "grpc.v1.cri" not in text
    assert check_containerd(bundle) == []
