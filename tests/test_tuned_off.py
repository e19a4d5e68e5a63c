"""The profile knob ``tuned: layered | off`` (issue 30 item 6).

``off`` drops the tuned layer: no tuned profile in the bundle, no ``require unit tuned.service``
(so ``install.sh --strict`` and ``gen verify --strict`` pass on an image without tuned, as Ubuntu
ships), and every value the tuned profile carried still lands in a file of another consumer.
Fails on main: the knob did not exist (``tuned: off`` was an unknown knob)."""

from __future__ import annotations

from pathlib import Path

import pytest

from generator.errors import InputError
from generator.inputs.load import load_inputs
from generator.inputs.profile import Override, Profile
from generator.model.layout import INSTALL_LIST, TUNED_DIR, in_overlay
from generator.model.probes import GOVERNOR
from generator.model.setting import Plan, Setting
from generator.paths import hardware_db_dir, profiles_dir
from generator.plan.build import build_plan
from generator.render.render import render_bundle
from generator.rules.cpu import EPB_PATH

SYSTEMS = sorted(path.stem for path in (hardware_db_dir() / "systems").glob("*.yaml"))
PROFILES = sorted(path.stem for path in profiles_dir().glob("*.yaml"))
DISTROS = sorted(path.stem for path in (hardware_db_dir() / "distros").glob("*.yaml"))

# Where a value of the tuned layer lands without it: (kind, key) of the non-tuned setting, and
# that setting's value for the tuned value. A tuned key not here fails the test, so a new tuned
# value must first get a route that does not need tuned.
ELSEWHERE = {
    "cpu.governor": ("sysfs", GOVERNOR, {"performance": "performance"}),
    "cpu.energy_perf_bias": ("sysfs", EPB_PATH, {"performance": "0"}),
}


def tuned_off(profile: Profile) -> Profile:
    return profile._replace(knobs={**profile.knobs, "tuned": "off"})


def plans(system: str, profile: str, os_name: str | None = None) -> tuple[Plan, Plan]:
    inputs = load_inputs(system, profile, os_name=os_name)
    return build_plan(inputs.facts, inputs.profile), build_plan(
        inputs.facts, tuned_off(inputs.profile)
    )


def where_else(setting: Setting) -> tuple[str, str, str]:
    """The non-tuned (kind, key, value) that carries a tuned setting's value."""
    if setting.key.startswith("sysctl."):  # a restated sysctl.d value (plan/distro.py)
        return ("sysctl", setting.key.removeprefix("sysctl."), setting.value)
    assert setting.key in ELSEWHERE, f"tuned {setting.key} has no route without tuned"
    kind, key, values = ELSEWHERE[setting.key]
    return (kind, key, values[setting.value])


def triples(plan: Plan) -> set[tuple[str, str, str]]:
    return {(s.kind, s.key, s.value) for s in plan.settings if s.kind != "tuned"}


def check_off_keeps_every_value(layered: Plan, off: Plan) -> None:
    assert not off.of_kind("tuned")
    assert triples(layered) <= triples(off), triples(layered) - triples(off)
    for setting in layered.of_kind("tuned"):
        if setting.key.startswith("sysctl.") and not layered.get(
            "sysctl", setting.key.removeprefix("sysctl.")
        ):
            continue  # the distribution's own value, left to its sysctl.d (plan/distro.py)
        assert where_else(setting) in triples(off), setting


@pytest.mark.parametrize("system", SYSTEMS)
@pytest.mark.parametrize("profile", PROFILES)
def test_off_keeps_every_planned_value_in_a_file_that_is_not_tuned(system, profile):
    layered, off = plans(system, profile)
    assert layered.of_kind("tuned"), "the default is layered"
    check_off_keeps_every_value(layered, off)


@pytest.mark.parametrize("distro", DISTROS)
def test_off_keeps_every_value_on_each_distribution(distro):
    check_off_keeps_every_value(*plans("dgx-h100", "inference", distro))


def test_off_writes_no_tuned_profile_and_requires_no_tuned():
    layered, off = plans("dgx-h100", "inference")
    layered_files, off_files = render_bundle(layered), render_bundle(off)
    tuned_dir = in_overlay(TUNED_DIR)
    assert any(path.startswith(tuned_dir) for path in layered_files)
    assert not any(path.startswith(tuned_dir) for path in off_files)
    install_list = off_files[INSTALL_LIST][0].decode()
    assert "require\tunit\ttuned.service" in layered_files[INSTALL_LIST][0].decode()
    assert "tuned.service" not in install_list
    assert not [line for line in install_list.splitlines() if line.startswith("tuned\t")]
    # the one value tuned alone carried on Intel: the bias register, now through tmpfiles.d
    assert off.get("sysfs", EPB_PATH) is not None
    assert layered.get("sysfs", EPB_PATH) is None  # layered bundles are unchanged


def test_a_tuned_override_with_tuned_off_is_bad_input():
    inputs = load_inputs("dgx-h100", "inference")
    override = Override(kind="tuned", key="cpu.governor", value="powersave", reason="test it")
    profile = tuned_off(inputs.profile)._replace(overrides=(override,))
    with pytest.raises(InputError, match=r"tuned: off") as caught:
        build_plan(inputs.facts, profile)
    assert caught.value.problems[0].path == "overrides[0].kind"


def test_the_knob_is_read_from_a_profile_file(tmp_path: Path):
    path = tmp_path / "no-tuned.yaml"
    path.write_text("extends: inference\ntuned: off\n")
    inputs = load_inputs("dgx-h100", str(path))
    assert inputs.profile.tuned == "off"
    assert not build_plan(inputs.facts, inputs.profile).of_kind("tuned")
    bad = tmp_path / "bad.yaml"
    bad.write_text("extends: inference\ntuned: none\n")
    with pytest.raises(InputError, match="tuned"):
        load_inputs("dgx-h100", str(bad))


@pytest.mark.parametrize("knob", ["tuned", "init_on_alloc"])
def test_a_bare_off_is_the_word_off_not_false(tmp_path: Path, knob):
    """YAML 1.1 reads a bare ``off`` as false; ``init_on_alloc: off`` was refused on main too."""
    path = tmp_path / "p.yaml"
    path.write_text(f"extends: inference\n{knob}: off\n")
    assert load_inputs("dgx-h100", str(path)).profile.knobs[knob] == "off"
    path.write_text(f"extends: inference\n{knob}: on\n")  # true is no word of these knobs
    with pytest.raises(InputError, match=knob):
        load_inputs("dgx-h100", str(path))


def test_verify_strict_does_not_require_tuned_when_off(tmp_path: Path):
    from generator.bundle.read import read_bundle
    from generator.verify.strict import bundle_requirements
    from tests.generate import generate

    path = tmp_path / "no-tuned.yaml"
    path.write_text("extends: inference\ntuned: off\n")
    assert generate("dgx-h100", path, tmp_path / "off").exit_code == 0
    assert generate("dgx-h100", "inference", tmp_path / "layered").exit_code == 0
    off = {need.label for need in bundle_requirements(read_bundle(tmp_path / "off"))}
    layered = {need.label for need in bundle_requirements(read_bundle(tmp_path / "layered"))}
    assert layered - off == {"unit tuned.service"}
