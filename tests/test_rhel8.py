"""Issue 27 item 4: RHEL 8 as a target distribution (hardware_db/distros/rhel-8.yaml).

RHEL 8's kernel is 4.18 for its whole life, with backports. A plan for rhel-8 is made for that
version (the table's one kernel line), so a key newer than 4.18 is left out unless the table lists
a backport and os.kernel names a release that has it: nosmt (mainline 4.19, RHEL 8.1) and
init_on_alloc (mainline 5.3, RHEL 8.4). On main `--os rhel-8` is refused (unknown distribution).
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
from click.testing import CliRunner
from rules.helpers import DUAL_EPYC, GRACE, facts

from generator.cli import main
from generator.inputs.distro import load_distros, resolve_distro
from generator.model.setting import Setting
from generator.plan.build import drop_unavailable
from tests.conftest import missing_tool
from tests.validators import tools
from tests.validators.run import MissingTool

NOSMT = Setting("kernel-arg", "nosmt", "", "test", rule="cpu.smt")
INIT_ON_ALLOC = Setting("kernel-arg", "init_on_alloc", "0", "test", rule="boot.init-on-alloc")
RHEL_8_10 = "4.18.0-553.el8_10"


def gen(*args: str) -> Any:
    return CliRunner().invoke(main, list(args))


def write_overlay(tmp_path: Path, kernel: str | None, arch_cpu: str | None = None) -> Path:
    """dgx-h100 targeted at rhel-8, with os.kernel where given."""
    os_lines = "  distro: rhel-8\n" + (f"  kernel: {kernel}\n" if kernel else "")
    path = tmp_path / "dgx-rhel8.yaml"
    path.write_text(f"system: dgx-h100\nos:\n{os_lines}")
    return path


@pytest.mark.parametrize("name", ["rhel-8", "rocky-8", "almalinux-8", "RHEL-8"])
def test_rhel_8_and_its_rebuilds_resolve(name: str) -> None:
    assert resolve_distro(name, load_distros()).key == "rhel-8"


def test_gen_accepts_os_rhel_8(tmp_path: Path) -> None:
    """Fails on main: 'unknown distribution 'rhel-8'', exit 2."""
    result = gen("--hw", "dgx-h100", "--profile", "training", "--os", "rhel-8", "-o", str(tmp_path))
    assert result.exit_code == 0, result.output
    assert '"distro": "rhel-8"' in (tmp_path / "plan.json").read_text()


def test_the_help_names_every_distribution_table() -> None:
    """--os's help lists each shipped table and alias (a new table must be named there)."""
    result = gen("--help")
    text = " ".join(result.output.split())
    for name in load_distros():
        assert name in text, f"gen --help does not name {name}"


@pytest.mark.parametrize(
    ("distro", "kernel"),
    [
        ("rhel-8", (4, 18)),
        ("rhel-9", (5, 14)),
        ("debian-13", (6, 12)),  # GA 6.12 and backports 7.3: the GA line is marked default
        ("ubuntu-24.04", None),
        (None, None),
    ],
)
def test_an_unstated_kernel_is_the_distributions_one_version(
    distro: str | None, kernel: tuple[int, int] | None
) -> None:
    """Ubuntu's GA and HWE lines differ: no one version, a current kernel is assumed."""
    machine = facts(**DUAL_EPYC, os={"distro": distro} if distro else {})
    assert machine.os.kernel == kernel
    assert machine.os.kernel_release is None


def _machine(kernel: str | None, distro: str | None = "rhel-8", **hw: Any) -> Any:
    os_spec: dict[str, Any] = {}
    if kernel:
        os_spec["kernel"] = kernel
    if distro:
        os_spec["distro"] = distro
    return facts(**(hw or DUAL_EPYC), os=os_spec)


@pytest.mark.parametrize(
    ("kernel", "distro", "kept"),
    [
        (None, "rhel-8", {"nosmt", "init_on_alloc"}),  # unstated: 8.10's build is assumed
        ("4.18", "rhel-8", set()),  # a bare version says nothing about the build
        ("4.18.0-80.el8", "rhel-8", set()),  # 8.0: nosmt not confirmed there
        ("4.18.0-147.el8", "rocky-8", {"nosmt"}),  # 8.1: nosmt, not yet init_on_alloc
        ("4.18.0-240.22.1.el8_3", "rhel-8", {"nosmt"}),  # 8.3
        ("4.18.0-305.el8", "rhel-8", {"nosmt", "init_on_alloc"}),  # 8.4
        (RHEL_8_10, "almalinux-8", {"nosmt", "init_on_alloc"}),  # 8.10
        (RHEL_8_10, None, set()),  # portable: mainline 4.18 has neither
    ],
)
def test_rhel_8_backports_are_kept_on_the_builds_that_have_them(
    kernel: str | None, distro: str | None, kept: set[str]
) -> None:
    machine = _machine(kernel, distro)
    remaining, notes = drop_unavailable([NOSMT, INIT_ON_ALLOC], machine)
    assert {s.key for s in remaining} == kept
    dropped = [n.text for n in notes if " dropped: " in n.text]
    assert len(dropped) == 2 - len(kept)
    if distro and len(kept) < 2:
        # each dropped backport says which release has it and what to state
        assert all("backported it in 4.18.0-" in text for text in dropped), dropped
        assert all("set os.kernel" in text for text in dropped), dropped


def test_a_dropped_backport_names_the_release_it_needs() -> None:
    _, notes = drop_unavailable([INIT_ON_ALLOC], _machine("4.18.0-147.el8"))
    (note,) = notes
    assert note.text == (
        "kernel-arg init_on_alloc dropped: mainline has it from 5.3, not 4.18; rhel-8 "
        "backported it in 4.18.0-305.el8 (8.4), but os.kernel 4.18.0-147.el8 is older: set "
        "os.kernel to the release as uname -r prints it to keep it there"
    )


def test_nosmt_on_arm_is_dropped_for_its_architecture_not_for_a_release() -> None:
    """nosmt is x86 only (plan/known_keys.py): RHEL 8's backport does not make it exist there."""
    _, notes = drop_unavailable([NOSMT], _machine(RHEL_8_10, **GRACE))
    (note,) = notes
    assert note.text == "kernel-arg nosmt dropped: it does not exist on aarch64 with 4.18"


def _kernel_args(bundle: Path) -> set[str]:
    text = (bundle / "install.list").read_text()
    return {line.split("\t")[1] for line in text.splitlines() if line.startswith("kernel-arg\t")}


@pytest.mark.parametrize(
    ("kernel", "present"),
    [
        (None, {"nosmt", "init_on_alloc=0"}),
        (RHEL_8_10, {"nosmt", "init_on_alloc=0"}),
        ("4.18.0-80.el8", set()),
    ],
)
def test_a_rhel_8_bundle_carries_the_backported_arguments_unless_an_older_build_is_stated(
    kernel: str | None, present: set[str], tmp_path: Path
) -> None:
    result = gen(
        "--hw", str(write_overlay(tmp_path, kernel)), "--profile", "inference-latency",
        "-o", str(tmp_path / "bundle"),
    )  # fmt: skip
    assert result.exit_code == 0, result.output
    args = _kernel_args(tmp_path / "bundle")
    assert args & {"nosmt", "init_on_alloc=0"} == present
    assert not any(arg.startswith("amd_pstate") for arg in args)
    explain = (tmp_path / "bundle" / "EXPLAIN.md").read_text()
    if not present:
        assert "rhel-8 backported it in 4.18.0-305.el8 (8.4)" in explain
    if kernel is None:  # EXPLAIN.md says which build was assumed and how to state another
        assert "kept on 4.18.0-553.el8_10 (8.10's kernel), the build rhel-8 plans for" in explain
        assert "set os.kernel to the release as uname -r prints it" in explain


def test_gen_os_rhel_8_keeps_nosmt_and_init_on_alloc(tmp_path: Path) -> None:
    """Issue 37: `--os rhel-8` with no os.kernel plans for 8.10's kernel, which has both
    backports. Before, every rhel-8 bundle without os.kernel dropped them."""
    result = gen(
        "--hw", "dgx-h100", "--profile", "inference-latency", "--os", "rhel-8",
        "-o", str(tmp_path),
    )  # fmt: skip
    assert result.exit_code == 0, result.output
    assert {"nosmt", "init_on_alloc=0"} <= _kernel_args(tmp_path)


def test_a_kept_backport_on_the_assumed_build_says_so() -> None:
    _, notes = drop_unavailable([INIT_ON_ALLOC], _machine(None))
    (note,) = notes
    assert note.text == (
        "kernel-arg init_on_alloc kept on 4.18.0-553.el8_10 (8.10's kernel), the build rhel-8 "
        "plans for when os.kernel is not stated: mainline has it from 5.3, rhel-8 backported it "
        "in 4.18.0-305.el8; set os.kernel to the release as uname -r prints it to plan for "
        "another build (an older one leaves it out)"
    )


def test_the_assumed_build_is_the_tables_and_a_stated_kernel_replaces_it() -> None:
    assert load_distros()["rhel-8"].assumed_release == RHEL_8_10
    assert _machine(None).os.assumed_release == RHEL_8_10
    assert _machine("4.18.0-80.el8").os.assumed_release is None
    assert _machine(None, distro=None).os.assumed_release is None


def test_a_rhel_8_bundle_has_no_grub_dropin(tmp_path: Path) -> None:
    """RHEL 8's grub2-mkconfig sources only /etc/default/grub (hardware_db/distros/rhel-8.yaml)."""
    result = gen("--hw", "dgx-h100", "--profile", "training", "--os", "rhel-8", "-o", str(tmp_path))
    assert result.exit_code == 0, result.output
    assert not (tmp_path / "rootfs/etc/default/grub.d").exists()


@pytest.fixture(scope="module")
def rhel_8_10_bundle(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """dgx-h100 x inference-latency for RHEL 8.10 (nosmt and init_on_alloc kept), made once."""
    root = tmp_path_factory.mktemp("rhel8")
    bundle = root / "bundle"
    result = gen(
        "--hw", str(write_overlay(root, RHEL_8_10)), "--profile", "inference-latency",
        "-o", str(bundle),
    )  # fmt: skip
    assert result.exit_code == 0, result.output
    return bundle


@pytest.mark.validators
@pytest.mark.parametrize("validator", sorted(v.name for v in tools.VALIDATORS))
def test_a_rhel_8_bundle_is_accepted_by_every_validator(
    validator: str, rhel_8_10_bundle: Path
) -> None:
    """Every consumer tool accepts it, the sysctl keys judged by the lists rhel-8.yaml names."""
    check = next(v for v in tools.VALIDATORS if v.name == validator)
    try:
        assert check.check(rhel_8_10_bundle) == []
    except MissingTool as missing:
        missing_tool(missing)


def test_a_rhel_8_bundle_has_no_unchecked_file(rhel_8_10_bundle: Path) -> None:
    assert tools.unclaimed_files(rhel_8_10_bundle) == []


@pytest.mark.parametrize(("os_id", "version"), [("rhel", "8.10"), ("rocky", "8.9")])
def test_detect_names_rhel_8_from_os_release(os_id: str, version: str) -> None:
    """gen detect on a RHEL 8 host writes os.distro (on main: left out, no table)."""
    from generator.detect.system import match_distro

    found, _ = match_distro({"ID": os_id, "VERSION_ID": version}, tuple(load_distros()))
    assert found == f"{os_id}-8"


@pytest.mark.parametrize(
    ("os_spec", "says"),
    [
        ({"distro": "rhel-8"}, "on 4.18 they are still sysctls"),
        ({"distro": "rhel-9"}, "since Linux 5.13 they are debugfs files"),
        ({}, "since Linux 5.13 they are debugfs files"),
    ],
)
def test_the_cfs_note_follows_the_distributions_kernel(os_spec: dict[str, str], says: str) -> None:
    """cpu.cfs-tunables reads the kernel fact (the table's 4.18 for rhel-8), not the name: on
    main a rhel-8 plan said the 4.18 kernel had moved them to debugfs."""
    from rules.helpers import profile

    from generator.model.setting import Note
    from generator.rules import cpu

    machine = facts(gpus=[{"model": "H100-SXM5-80GB", "count": 8}], os=os_spec)
    (note,) = cpu.cfs_tunables.apply(machine, profile("inference"))
    assert isinstance(note, Note) and says in note.text


# --- install.sh on a RHEL 8 image: entries with 'options $kernelopts' -------------------------

GRUBENV_OPTS = "root=/dev/mapper/rhel-root ro crashkernel=auto resume=/dev/mapper/rhel-swap"


def _rhel_8_image(root: Path, grubenv: str | None) -> Path:
    """A RHEL 8 root as grubby-bls writes it: each entry's options are '$kernelopts
    $tuned_params', the words themselves in /boot/grub2/grubenv (rhboot/grubby fc69ba6^)."""
    from test_install import RHEL_ENTRY, rhel_root

    rhel_root(root)
    entry = root / RHEL_ENTRY
    lines = entry.read_text().splitlines()
    entry.write_text(
        "\n".join(
            "options $kernelopts $tuned_params" if line.startswith("options") else line
            for line in lines
        )
        + "\n"
    )
    if grubenv is not None:
        (root / "boot/grub2").mkdir(parents=True)
        (root / "boot/grub2/grubenv").write_text(
            f"# GRUB Environment Block\nkernelopts={grubenv}\n" + "#" * 600
        )
    return root


@pytest.mark.parametrize("grubenv", [GRUBENV_OPTS, None])
def test_kernel_cmdline_is_not_started_from_a_kernelopts_entry(
    grubenv: str | None, tmp_path: Path
) -> None:
    """The entries keep $kernelopts and $tuned_params and get the bundle's arguments; no
    /etc/kernel/cmdline is started from them. On main it was, less the variables: the bundle's
    arguments alone, no root=, for the kernels kernel-install adds later."""
    from test_install import INFERENCE, RHEL_ENTRY, bundle_for, make_bin, run

    from generator.plan.checks import kernel_cmdline

    root = _rhel_8_image(tmp_path / "image", grubenv)
    plan = INFERENCE._replace(distro="rhel-8", grub_dropins=False)
    bundle = bundle_for(tmp_path, plan, "inference")
    result = run(bundle / "install.sh", "--root", str(root), path=make_bin(tmp_path, {}))
    assert result.returncode == 0, result.stdout + result.stderr
    args = kernel_cmdline(plan.settings)
    assert f"options $kernelopts $tuned_params {args}\n" in (root / RHEL_ENTRY).read_text()
    assert not (root / "etc/kernel/cmdline").exists()
    assert "/etc/kernel/cmdline not started: the entries take $kernelopts" in result.stdout


def test_an_existing_kernel_cmdline_is_still_edited_beside_kernelopts_entries(
    tmp_path: Path,
) -> None:
    """An /etc/kernel/cmdline the image already has (RHEL 8.6+ moves the words into the
    entries) is edited as on RHEL 9."""
    from test_install import INFERENCE, bundle_for, make_bin, run

    from generator.plan.checks import kernel_cmdline

    root = _rhel_8_image(tmp_path / "image", GRUBENV_OPTS)
    (root / "etc/kernel").mkdir(parents=True)
    (root / "etc/kernel/cmdline").write_text(GRUBENV_OPTS + "\n")
    plan = INFERENCE._replace(distro="rhel-8", grub_dropins=False)
    bundle = bundle_for(tmp_path, plan, "inference")
    result = run(bundle / "install.sh", "--root", str(root), path=make_bin(tmp_path, {}))
    assert result.returncode == 0, result.stdout + result.stderr
    expected = f"{GRUBENV_OPTS} {kernel_cmdline(plan.settings)}\n"
    assert (root / "etc/kernel/cmdline").read_text() == expected
