"""Issue 16, the planning part: os.distro and --os, "at least" semantics, kernel backports.

The distribution tables are hardware_db/distros/*.yaml (tests/test_distro.py checks them); this
file checks what the plan does with them, and that a plan for no distribution is unchanged.
"""

from __future__ import annotations

import json
import subprocess
from pathlib import Path
from typing import Any

import pytest
import yaml
from click.testing import CliRunner, Result
from rules.helpers import DUAL_EPYC, H100X8, facts, profile

from generator.cli import main
from generator.errors import InputError
from generator.inputs.distro import load_distros
from generator.inputs.load import load_inputs
from generator.model.planio import plan_from_data, plan_to_data
from generator.model.setting import Plan, Setting
from generator.plan.build import build_plan, drop_unavailable
from generator.plan.distro import (
    LOWERS_CHECK,
    apply_distro_defaults,
    has_backport,
    portable_notes,
    release_numbers,
)
from generator.render.render import render_bundle

MAP_COUNT = ("sysctl", "vm.max_map_count")
SYSTEM_PYTHON = "/usr/bin/python3"  # tuned lives in Debian's Python (tests/validators/run.py)
ONDEMAND = ("service", "ondemand.service")


KNOWN = (
    "known: almalinux-8, almalinux-9, debian-12, debian-13, rhel-8, rhel-9, rocky-8, rocky-9, "
    "ubuntu-22.04, ubuntu-24.04"
)


def gen(*args: str) -> Result:
    return CliRunner().invoke(main, list(args))


def plan_of(hw: str, prof: str, os_name: str | None = None) -> Plan:
    inputs = load_inputs(hw, prof, os_name=os_name)
    return build_plan(inputs.facts, inputs.profile)


def targets(plan: Plan) -> set[tuple[str, str]]:
    return {s.target for s in plan.settings}


# --- os.distro and --os ------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("name", "key"),
    [
        ("ubuntu-22.04", "ubuntu-22.04"),
        ("ubuntu-24.04", "ubuntu-24.04"),
        ("debian-12", "debian-12"),
        ("rhel-9", "rhel-9"),
        ("rocky-9", "rhel-9"),
        ("almalinux-9", "rhel-9"),
    ],
)
def test_os_distro_names_a_table_and_aliases_resolve(name: str, key: str) -> None:
    resolved = facts(os={"distro": name}).os.distro
    assert resolved is not None and resolved.key == key


def test_no_distro_is_portable() -> None:
    assert facts().os.distro is None
    plan = plan_of("dgx-h100", "inference")
    assert plan.distro == ""
    assert "distro" not in plan_to_data(plan)  # plan.json as it was before os.distro existed


def test_unknown_distro_in_the_file_names_the_file_and_field(tmp_path: Path) -> None:
    path = tmp_path / "box.yaml"
    path.write_text(yaml.safe_dump({"system": "dgx-h100", "os": {"distro": "ubuntu-20.04"}}))
    with pytest.raises(InputError) as raised:
        load_inputs(str(path), "inference")
    (line,) = raised.value.lines()
    assert f"{path}: os.distro: unknown distribution 'ubuntu-20.04'" in line
    assert KNOWN in line


def test_an_unknown_distro_is_reported_with_the_other_problems(tmp_path: Path) -> None:
    path = tmp_path / "box.yaml"
    bad_nic = [{"name": "eth0", "role": "frontend", "numa_node": 9}]
    path.write_text(yaml.safe_dump({"system": "l4-inference", "nics": bad_nic}))
    with pytest.raises(InputError) as raised:
        load_inputs(str(path), "inference", os_name="centos-7")
    lines = raised.value.lines()
    assert len(lines) == 2
    assert "nics[0].numa_node" in lines[0] and "--os: unknown distribution" in lines[1]


def test_os_option_wins_over_the_file(tmp_path: Path) -> None:
    path = tmp_path / "box.yaml"
    path.write_text(yaml.safe_dump({"system": "dgx-h100", "os": {"distro": "ubuntu-24.04"}}))
    assert plan_of(str(path), "inference").distro == "ubuntu-24.04"
    assert plan_of(str(path), "inference", "debian-12").distro == "debian-12"


@pytest.mark.parametrize(
    "args",
    [
        ["--hw", "dgx-h100", "--profile", "inference", "--os", "windows-11", "-o", "{out}"],
        ["check", "--hw", "dgx-h100", "--profile", "inference", "--os", "windows-11"],
        ["explain", "--hw", "dgx-h100", "--profile", "inference", "--os", "windows-11"],
        ["diff", "--hw", "dgx-h100", "--profile", "inference", "--os", "x", "--os", "rhel-9"],
        [
            "matrix",
            "--hw",
            "dgx-h100",
            "--profile",
            "inference",
            "--os",
            "windows-11",
            "-o",
            "{out}",
        ],
    ],
    ids=["gen", "check", "explain", "diff", "matrix"],
)
def test_unknown_os_is_one_line_exit_2_nothing_written(args: list[str], tmp_path: Path) -> None:
    out = tmp_path / "out"
    result = gen(*(arg.replace("{out}", str(out)) for arg in args))
    assert result.exit_code == 2, result.output
    lines = result.output.strip().splitlines()
    assert len(lines) == 1 and "--os: unknown distribution" in lines[0], result.output
    assert KNOWN in lines[0]
    assert "Traceback" not in result.output
    assert not out.exists()


def test_check_says_which_distribution() -> None:
    result = gen("check", "--hw", "dgx-h100", "--profile", "inference", "--os", "rocky-9")
    assert result.exit_code == 0, result.output
    assert "for Red Hat Enterprise Linux 9" in result.output
    portable = gen("check", "--hw", "dgx-h100", "--profile", "inference")
    assert "portable: no distribution named" in portable.output


def test_gen_writes_the_distribution_into_plan_json(tmp_path: Path) -> None:
    out = tmp_path / "bundle"
    result = gen(
        "--hw", "l4-inference", "--profile", "inference", "--os", "ubuntu-24.04", "-o", str(out)
    )
    assert result.exit_code == 0, result.output
    written = plan_from_data(json.loads((out / "plan.json").read_text()))
    assert written.distro == "ubuntu-24.04"
    assert MAP_COUNT not in targets(written)


def test_matrix_targets_every_combination(tmp_path: Path) -> None:
    result = gen(
        "matrix", "--hw", "l4-inference", "--profile", "inference", "--os", "ubuntu-24.04",
        "-o", str(tmp_path),
    )  # fmt: skip
    assert result.exit_code == 0, result.output
    (plan_file,) = tmp_path.glob("*/plan.json")
    assert json.loads(plan_file.read_text())["distro"] == "ubuntu-24.04"


def test_explain_without_a_distribution_says_what_was_not_applied() -> None:
    portable = gen("explain", "--hw", "dgx-h100", "--profile", "inference")
    assert portable.exit_code == 0, portable.output
    lines = [line for line in portable.output.splitlines() if line.startswith("note (plan.distro)")]
    assert len(lines) == len({d.key for d in load_distros().values()})
    ubuntu = next(line for line in lines if "ubuntu-24.04's knowledge" in line)
    assert "vm.max_map_count=1048576" in ubuntu and "ondemand.service" in ubuntu
    # the portable drop-in runs the daemon in persistence mode everywhere, but as root
    assert "nvidia-persistenced.service as its packaged user nvidia-persistenced" in ubuntu
    assert "runs without persistence mode" not in ubuntu
    targeted = gen("explain", "--hw", "dgx-h100", "--profile", "inference", "--os", "debian-12")
    assert "no distribution named" not in targeted.output


def test_portable_notes_follow_the_tables() -> None:
    distros = load_distros()
    rhel = next(n for n in portable_notes(distros) if "rhel-9's" in n.text)
    assert "kernel-arg amd_pstate backported in 5.14.0-362.8.1.el9_3" in rhel.text
    assert all("ondemand" not in n.text for n in portable_notes(distros) if "debian-12" in n.text)


def test_diff_of_two_distributions_shows_what_each_changes() -> None:
    result = gen(
        "diff", "--hw", "dgx-h100", "--profile", "inference",
        "--os", "debian-12", "--os", "ubuntu-24.04", "--format", "json",
    )  # fmt: skip
    assert result.exit_code == 1, result.output
    data = json.loads(result.output)
    assert data["old"] == "dgx-h100/inference on debian-12"
    assert data["new"] == "dgx-h100/inference on ubuntu-24.04"
    changes = {(c["kind"], c["key"]): c["status"] for c in data["changes"]}
    # left to Ubuntu's own 10-map-count.conf, restated in the tuned profile
    restated = ("tuned", "sysctl.vm.max_map_count")
    # Debian's package runs the daemon as nvpd, Ubuntu's as nvidia-persistenced
    persistenced = ("unit-dropin", "nvidia-persistenced.service ExecStart")
    assert changes == {
        MAP_COUNT: "removed",
        restated: "added",
        ONDEMAND: "added",
        persistenced: "changed",
        ("claim", "os.distro"): "changed",  # issue 28: the preflight unit checks os-release
    }


def test_diff_refuses_two_sides_given_twice() -> None:
    result = gen(
        "diff", "--hw", "dgx-h100", "--profile", "inference", "--profile", "training",
        "--os", "debian-12", "--os", "ubuntu-24.04",
    )  # fmt: skip
    assert result.exit_code == 2
    assert "two distributions (--hw A --profile P --os D --os E)" in result.output


# --- "at least" semantics ----------------------------------------------------------------------


def test_a_ceiling_the_distribution_already_raises_is_not_emitted() -> None:
    ubuntu = plan_of("dgx-h100", "inference", "ubuntu-24.04")
    assert MAP_COUNT not in targets(ubuntu)
    assert any(
        n.text.startswith("sysctl vm.max_map_count = 1048576 not emitted: ubuntu-24.04 already")
        and "/etc/sysctl.d/10-map-count.conf" in n.text
        for n in ubuntu.notes
    )
    # 22.04's procps has no 10-map-count.conf: the bundle still raises it there
    assert MAP_COUNT in targets(plan_of("dgx-h100", "inference", "ubuntu-22.04"))
    assert MAP_COUNT in targets(plan_of("dgx-h100", "inference"))


def test_a_ceiling_left_to_the_distribution_is_restated_in_the_tuned_profile() -> None:
    """A base tuned profile layered under the bundle's (tuned's openshift sets vm.max_map_count
    to 262144) would replace the distribution's value: the bundle's profile restates it."""
    ubuntu = plan_of("dgx-h100", "inference", "ubuntu-24.04")
    restated = ubuntu.get("tuned", "sysctl.vm.max_map_count")
    assert restated is not None and restated.value == "1048576"
    assert "/etc/sysctl.d/10-map-count.conf" in restated.reason
    assert any("the tuned profile restates that value" in n.text for n in ubuntu.notes)
    tuned_conf = render_bundle(ubuntu)["rootfs/etc/tuned/goldtune-inference/tuned.conf"][0]
    assert b"\nvm.max_map_count=1048576\n" in tuned_conf
    # where the bundle raises it itself, sysctl.d carries it and tuned.conf restates that
    assert plan_of("dgx-h100", "inference", "ubuntu-22.04").get("tuned", MAP_COUNT[1]) is None


def test_without_a_tuned_profile_nothing_is_restated() -> None:
    ubuntu = load_distros()["ubuntu-24.04"]
    ceiling = _sysctl("vm.max_map_count", "262144")
    governor = Setting("tuned", "cpu.governor", "performance", "test", rule="test.rule")
    assert apply_distro_defaults([ceiling], ubuntu)[0] == []
    kept, _, _ = apply_distro_defaults([ceiling, governor], ubuntu)
    assert [(s.kind, s.key, s.value) for s in kept] == [
        ("tuned", "sysctl.vm.max_map_count", "1048576"),
        ("tuned", "cpu.governor", "performance"),
    ]


@pytest.mark.skipif(
    not Path(SYSTEM_PYTHON).exists() or not Path("/usr/lib/tuned/openshift/tuned.conf").exists(),
    reason="tuned is not installed",
)
def test_tuned_layered_on_a_base_that_sets_the_key_keeps_the_distributions_value(
    tmp_path: Path,
) -> None:
    """tuned's own loader, as tuned_check.py runs it: "openshift goldtune-inference" (install.sh
    and the first-boot script layer the bundle's profile last) merges to Ubuntu 24.04's value."""
    files = render_bundle(plan_of("dgx-h100", "inference", "ubuntu-24.04"))
    profile_dir = tmp_path / "etc-tuned" / "goldtune-inference"
    profile_dir.mkdir(parents=True)
    tuned_conf = files["rootfs/etc/tuned/goldtune-inference/tuned.conf"][0]
    (profile_dir / "tuned.conf").write_bytes(tuned_conf)
    code = (
        "import json, sys; sys.path.insert(0, sys.argv[1]); import tuned_check; "
        "print(json.dumps(tuned_check.sysctl_values(tuned_check.load(sys.argv[2], "
        "['openshift', 'goldtune-inference']))))"
    )
    validators = str(Path(__file__).parent / "validators")
    result = subprocess.run(
        [SYSTEM_PYTHON, "-c", code, validators, str(tmp_path / "etc-tuned")],
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
    )
    assert result.returncode == 0, result.stderr
    assert json.loads(result.stdout)["vm.max_map_count"] == "1048576"


def _sysctl(key: str, value: str, override: bool = False) -> Setting:
    return Setting("sysctl", key, value, "test", rule="test.rule", override=override)


def test_a_ceiling_above_the_distribution_default_is_kept() -> None:
    ubuntu = load_distros()["ubuntu-24.04"]
    higher = _sysctl("vm.max_map_count", "2097152")
    kept, notes, warnings = apply_distro_defaults([higher], ubuntu)
    assert kept == [higher] and not notes and not warnings


def test_a_value_that_is_not_a_ceiling_is_kept_even_when_lower() -> None:
    """net.ipv4.conf.all.rp_filter is not an at-least key: a rule's 1 is a choice, not a limit."""
    ubuntu = load_distros()["ubuntu-24.04"]
    strict = _sysctl("net.ipv4.conf.all.rp_filter", "1")
    assert apply_distro_defaults([strict], ubuntu) == ([strict], [], [])


def test_an_override_that_lowers_a_distribution_default_is_kept_with_a_warning() -> None:
    ubuntu = load_distros()["ubuntu-24.04"]
    lowered = _sysctl("vm.max_map_count", "262144", override=True)
    kept, notes, warnings = apply_distro_defaults([lowered], ubuntu)
    assert kept == [lowered] and not notes
    (warning,) = warnings
    assert warning.check == LOWERS_CHECK
    assert "lowers ubuntu-24.04's default 1048576" in warning.text
    # at or above the default: the user's value stands, silently
    same = _sysctl("vm.max_map_count", "1048576", override=True)
    assert apply_distro_defaults([same], ubuntu) == ([same], [], [])


def test_an_override_below_the_default_warns_through_the_plan() -> None:
    machine = facts(gpus=[H100X8], os={"distro": "ubuntu-24.04"})
    lowering = profile(
        "inference",
        overrides=[{"kind": "sysctl", "key": "vm.max_map_count", "value": 65530, "reason": "test"}],
    )
    built = build_plan(machine, lowering)
    assert built.get("sysctl", "vm.max_map_count") is not None
    assert [w.check for w in built.warnings].count(LOWERS_CHECK) == 1
    portable = build_plan(facts(gpus=[H100X8]), lowering)
    assert LOWERS_CHECK not in [w.check for w in portable.warnings]


def test_without_a_distribution_nothing_changes() -> None:
    settings = [_sysctl("vm.max_map_count", "1"), _sysctl("vm.swappiness", "1", override=True)]
    assert apply_distro_defaults(settings, None) == (settings, [], [])


# --- kernel backports --------------------------------------------------------------------------


def test_release_numbers_order_red_hat_builds() -> None:
    assert release_numbers("5.14.0-427.el9") > release_numbers("5.14.0-362.8.1.el9_3")
    assert release_numbers("5.14.0-284.11.1.el9_2") < release_numbers("5.14.0-362.8.1.el9_3")


AMD_PSTATE = Setting("kernel-arg", "amd_pstate", "active", "test", rule="test.rule")


def _rhel_epyc(kernel: str, distro: str | None = "rhel-9") -> Any:
    os_spec: dict[str, Any] = {"kernel": kernel}
    if distro:
        os_spec["distro"] = distro
    return facts(**DUAL_EPYC, os=os_spec)


@pytest.mark.parametrize(
    ("kernel", "distro", "kept"),
    [
        ("5.14.0-427.el9", "rhel-9", True),  # 9.4: after the 9.3 backport
        ("5.14.0-362.8.1.el9_3", "almalinux-9", True),  # the first build with it
        ("5.14.0-284.11.1.el9_2", "rhel-9", False),  # 9.2: before it
        ("5.14", "rhel-9", False),  # no build stated: not confirmed
        ("5.14.0-427.el9", None, False),  # mainline only: 5.14 < 6.3
        ("6.1", "debian-12", False),  # no backport in Debian's table
        ("6.8", None, True),  # mainline has it
    ],
)
def test_backported_kernel_arguments_are_kept_on_the_builds_that_have_them(
    kernel: str, distro: str | None, kept: bool
) -> None:
    machine = _rhel_epyc(kernel, distro)
    remaining, notes = drop_unavailable([AMD_PSTATE], machine)
    assert (remaining == [AMD_PSTATE]) is kept
    if kept and distro:
        (note,) = notes
        assert "backported it in 5.14.0-362.8.1.el9_3" in note.text
    if not kept:
        (note,) = notes
        assert note.text.startswith("kernel-arg amd_pstate dropped")


def test_a_backport_needs_a_stated_release() -> None:
    rhel = load_distros()["rhel-9"]
    assert not has_backport(rhel, "kernel-arg", "amd_pstate", None)
    assert not has_backport(rhel, "sysctl", "amd_pstate", "5.14.0-427.el9")  # another kind
    assert has_backport(rhel, "kernel-arg", "amd_pstate", "5.14.0-427.el9")


@pytest.mark.parametrize(
    ("kernel", "refused"),
    [("5.14.0-427.el9", False), ("5.14.0-284.11.1.el9_2", True)],
)
def test_the_plan_checks_accept_a_backported_override(kernel: str, refused: bool) -> None:
    """The drop step and the checks agree: an override of a backported key plans on its builds."""
    machine = _rhel_epyc(kernel)
    pstate = profile(
        "inference",
        overrides=[
            {"kind": "kernel-arg", "key": "amd_pstate", "value": "active", "reason": "test"}
        ],
    )
    if refused:
        with pytest.raises(InputError, match=r"amd_pstate' does not exist on x86_64 kernel 5\.14"):
            build_plan(machine, pstate)
    else:
        built = build_plan(machine, pstate)
        assert built.get("kernel-arg", "amd_pstate") is not None


@pytest.mark.parametrize("os_name", ["rhel-9", "debian-12", "ubuntu-24.04"])
def test_the_persistenced_reasons_speak_of_the_target_distributions_packaging(
    os_name: str,
) -> None:
    """A --os bundle explains the drop-in by that distribution's packaged unit (its command,
    static or not), never by another distribution's; a portable one names Ubuntu's, the
    packaging the drop-in must fix."""
    dropins = plan_of("l4-inference", "inference", os_name).settings
    reasons = " ".join(s.reason for s in dropins if s.key.startswith("nvidia-persistenced"))
    assert f"{os_name}'s packaged" in reasons
    assert "Ubuntu's" not in reasons
    static = "static, so without this systemctl enable does nothing"
    assert (static in reasons) == (os_name == "ubuntu-24.04")
    portable = plan_of("l4-inference", "inference").settings
    assert "Ubuntu's packaged unit has no [Install]" in " ".join(s.reason for s in portable)


# --- boot arguments: a drop-in only where the target's grub-mkconfig reads it (issue 27 item 5) --

GRUB_DROPIN = "rootfs/etc/default/grub.d/90-goldtune.cfg"


@pytest.mark.parametrize(
    ("os_name", "has_dropin"),
    [(None, True), ("ubuntu-24.04", True), ("debian-12", True), ("rhel-9", False)],
)
def test_a_grub_dropin_only_for_a_target_that_reads_it(
    os_name: str | None, has_dropin: bool
) -> None:
    """hardware_db/distros/rhel-9.yaml boot_args.reads has no /etc/default/grub.d: Red Hat's
    grub2-mkconfig sources only /etc/default/grub. On main every bundle with kernel arguments
    carried the drop-in, a RHEL one too; a portable bundle keeps it (it may land on Debian)."""
    plan = plan_of("dgx-h100", "inference", os_name)
    assert plan.of_kind("kernel-arg")
    files = render_bundle(plan)
    assert (GRUB_DROPIN in files) is has_dropin
    assert "kernel-cmdline" in files
    assert plan_from_data(plan_to_data(plan)).grub_dropins is has_dropin
    explain = files["EXPLAIN.md"][0].decode()
    assert ("grub.d/90-goldtune.cfg" in explain) is has_dropin


def test_the_reboot_knob_reaches_the_plan_only_with_kernel_arguments(tmp_path: Path) -> None:
    """Issue 27: profile knob reboot_for_kernel_args -> plan -> install.list kernel-args-reboot."""
    inputs = load_inputs("dgx-h100", "inference")
    knob = inputs.profile.knobs | {"reboot_for_kernel_args": True}
    profile = inputs.profile._replace(knobs=knob)
    assert build_plan(inputs.facts, profile).reboot_for_kernel_args
    assert not build_plan(inputs.facts, inputs.profile).reboot_for_kernel_args
