"""The GPU-vendor seam (issue 25): one table row per vendor, rules that declare their vendors, and
the recipe of README's "Adding a GPU vendor" carried out for a made-up second vendor."""

from __future__ import annotations

import importlib
import re
from pathlib import Path
from types import MappingProxyType

import pytest
import yaml
from rules.helpers import facts, hardware, profile

from generator.commands.generate import render_for
from generator.errors import InputError
from generator.inputs.catalog import Catalog, load_catalog
from generator.inputs.facts import Facts
from generator.inputs.hardware import resolve_facts
from generator.inputs.hardware_spec import HardwareSpec
from generator.inputs.load import load_inputs
from generator.inputs.profile import Profile
from generator.model import layout, vendors
from generator.model.collect_data import whole_sections
from generator.model.layout import in_overlay
from generator.model.setting import DRIVER_MODULE_PREFIXES, Note, Setting
from generator.model.vendors import GPU_VENDORS, GpuVendor, VendorSpec
from generator.paths import hardware_db_dir
from generator.plan.build import build_plan, run_rules
from generator.render.datafile import gpu_script, gpu_vendor_lines
from generator.render.render import render_bundle
from generator.rules import REGISTRY
from generator.rules.base import Output, gpu_action, rule

ROOT = Path(__file__).resolve().parents[1]
SCRIPTS = ROOT / "templates" / "scripts"


# --- the table -------------------------------------------------------------------------------


def test_the_vocabulary_and_the_table_hold_the_same_vendors() -> None:
    assert list(GPU_VENDORS) == list(GpuVendor), (
        "generator/model/vendors.py: each GpuVendor member needs its row in GPU_VENDORS, in order"
    )
    assert all(key == spec.vendor for key, spec in GPU_VENDORS.items()), (
        "generator/model/vendors.py GPU_VENDORS: a row's key is its vendor"
    )


@pytest.mark.parametrize("spec", GPU_VENDORS.values(), ids=lambda spec: spec.vendor)
def test_each_row_names_what_the_bundle_really_has(spec: VendorSpec) -> None:
    setup = SCRIPTS / spec.setup_script
    assert setup.is_file(), f"{spec.vendor}: no fixed script templates/scripts/{setup.name}"
    # derived from the row (generator/model/layout.py VENDOR_GPU_SCRIPTS): nothing to edit there
    assert gpu_script(spec) in layout.FIXED_SCRIPTS
    assert re.search(rf"\b{re.escape(spec.smi_tool)}\b", setup.read_text()), (
        f"{spec.vendor}: templates/scripts/{setup.name} never runs {spec.smi_tool}, the row's "
        "smi_tool (generator/model/vendors.py): fix one or the other"
    )
    assert set(spec.driver_module_prefixes) <= set(DRIVER_MODULE_PREFIXES), (
        f"{spec.vendor}: add its driver_module_prefixes to DRIVER_MODULE_PREFIXES in "
        "generator/model/setting.py"
    )
    assert 0 < spec.pci_vendor_id < 0xFFFF and spec.sysfs_id == f"0x{spec.pci_hex}", (
        f"{spec.vendor}: pci_vendor_id in generator/model/vendors.py is not a PCI vendor id"
    )


@pytest.mark.parametrize(
    "spec",
    [
        pytest.param(
            spec,
            id=spec.vendor,
        )
        for spec in GPU_VENDORS.values()
    ],
)
def test_each_row_names_a_collector_section(spec: VendorSpec) -> None:
    """The row's section is one the collector reads (derived from the row itself) and one the
    script reads: a `! wanted <section> || collect_...` line in its main block."""
    assert spec.collector_section in whole_sections()
    assert f"! wanted {spec.collector_section} || " in (SCRIPTS / "collect").read_text(), (
        f"{spec.vendor}: templates/scripts/collect does not read its collector_section "
        f"{spec.collector_section!r}: add a `! wanted {spec.collector_section} || collect_...` "
        "line to its main block (and the section to its header)"
    )


@pytest.mark.parametrize("spec", GPU_VENDORS.values(), ids=lambda spec: spec.vendor)
@pytest.mark.parametrize(
    "distro", sorted((ROOT / "hardware_db" / "distros").glob("*.yaml")), ids=lambda p: p.stem
)
def test_packaged_units_are_what_the_distro_tables_describe(spec: VendorSpec, distro: Path) -> None:
    # a vendor without packaged units (AMD: none described yet) needs no section
    section = yaml.safe_load(distro.read_text()).get(spec.vendor) or {}
    assert set(spec.packaged_units) <= set(section), (
        f"hardware_db/distros/{distro.name} has no {spec.vendor}: section describing "
        f"{sorted(set(spec.packaged_units) - set(section))}, the packaged_units of the "
        f"{spec.vendor} row in generator/model/vendors.py: add them there (or drop them from it)"
    )


@pytest.mark.parametrize("script", sorted(SCRIPTS.iterdir()), ids=lambda path: path.name)
def test_no_fixed_script_writes_a_vendor_id_of_its_own(script: Path) -> None:
    """The scripts find GPUs by the gpu-vendor lines of their data files (on main, collect and
    pcie-acs compared with a literal 0x10de)."""
    text = script.read_text()
    for spec in GPU_VENDORS.values():
        assert spec.sysfs_id not in text, f"{script.name} hard-codes {spec.sysfs_id}"


def test_every_catalog_gpu_names_a_vendor_of_the_table() -> None:
    unknown = {entry.vendor for entry in load_catalog().gpus.entries} - set(GPU_VENDORS)
    assert not unknown, f"hardware_db/gpus/ names vendors {unknown}: add their rows to vendors.py"
    # lspci -nn's vendor:device spelling comes from the vendor's row
    found = load_catalog().gpus.find(f"{GPU_VENDORS[GpuVendor.NVIDIA].pci_hex}:2330")
    assert found is not None and found.key == "H100-SXM5-80GB"


# --- what a rule is given --------------------------------------------------------------------


def test_facts_name_the_vendors_present() -> None:
    machine = facts(gpus=[{"model": "H100-SXM5-80GB", "count": 8}])
    assert machine.gpu_vendors == {GpuVendor.NVIDIA}
    assert machine.has_nvidia_gpus and machine.has_gpus_of("nvidia")
    assert not machine.has_gpus_of("acme")
    bare = facts()
    assert bare.gpu_vendors == frozenset() and not bare.has_nvidia_gpus


def test_a_rule_sees_only_the_gpus_of_the_vendors_it_declares() -> None:
    machine = facts(gpus=[{"model": "H100-SXM5-80GB", "count": 8}])
    assert machine.seen_by(("nvidia",)) is machine  # nothing hidden: the same object
    hidden = machine.seen_by(())
    assert hidden.gpus == () and not hidden.has_gpus and not hidden.nvswitch
    assert hidden._replace(gpus=machine.gpus, nvswitch=machine.nvswitch) == machine


# --- the recipe, for a made-up second vendor -------------------------------------------------

ACME = VendorSpec(
    "acme",
    "Acme",
    0x1234,
    smi_tool="acme-smi",
    setup_script="gpu-setup-acme",
    collector_section="gpu-acme",
    driver_module_prefixes=("acme",),
    packaged_units=(),
)
ACME_GPU = {
    "key": "ACME-X1",
    "name": "Acme X1",
    "vendor": "acme",
    "pci_device_ids": ["0x0a01"],
    "architecture": "hopper",  # the catalog's Literal: a real vendor adds its own
    "form_factor": "sxm",
    "memory_gib": 128,
    "source": ["a made-up GPU for tests/test_vendors.py"],
}


@rule("gpu.acme-persistence", vendors=("acme",))
def acme_persistence(facts: Facts, profile: Profile) -> Output:
    """Keep the Acme driver loaded between jobs (a test rule declaring the test vendor)."""
    if facts.has_gpus:
        yield gpu_action("persistence", "on", f"{facts.gpu_count} Acme GPUs: acme-smi -pm 1")


@pytest.fixture
def acme_catalog(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Catalog:
    """Step 1 and 2 of the recipe: the vendor's row, and a catalog folder holding its GPU."""
    monkeypatch.setattr(vendors, "GPU_VENDORS", MappingProxyType({**GPU_VENDORS, "acme": ACME}))
    root = tmp_path / "hardware_db"
    (root / "gpus").mkdir(parents=True)
    for kind in ("cpus", "nics"):
        (root / kind).symlink_to(hardware_db_dir() / kind)
    for shipped in (hardware_db_dir() / "gpus").glob("*.yaml"):
        (root / "gpus" / shipped.name).write_bytes(shipped.read_bytes())
    (root / "gpus" / "ACME-X1.yaml").write_text(yaml.safe_dump(ACME_GPU))
    return load_catalog(root)


def machine_with(catalog: Catalog, *gpus: dict[str, object]) -> Facts:
    spec = HardwareSpec.model_validate(hardware(gpus=list(gpus)))
    return resolve_facts(spec, catalog, "test.yaml")


AMD_PARTS = profile("training", gpu_compute_partition="CPX", gpu_power_limit_percent=90)
NVIDIA_RULES = {r.id for r in REGISTRY if r.vendors == (GpuVendor.NVIDIA,)}


def rules_of(items: list[Setting] | list[Note] | tuple[Setting | Note, ...]) -> set[str]:
    return {item.rule for item in items}


def test_on_a_second_vendors_machine_only_its_own_rules_fire(acme_catalog: Catalog) -> None:
    """An Acme-only machine: no NVIDIA GPU rule fires (no nouveau blacklist, no
    nvidia-persistenced, no GPU boot unit), every rule declaring NVIDIA does what it does on the
    same machine without GPUs, and the Acme rule fires."""
    machine = machine_with(acme_catalog, {"model": "ACME-X1", "count": 4})
    without_gpus = machine._replace(gpus=(), nvswitch=False)
    intent = profile("training", containers="containerd")
    assert machine.gpu_vendors == {"acme"} and machine.has_gpus
    for checked in REGISTRY:
        if checked.id in NVIDIA_RULES:
            assert checked.apply(machine, intent) == checked.apply(without_gpus, intent)
    settings, notes = run_rules(machine, intent, (*REGISTRY, acme_persistence))
    fired = rules_of(settings) | rules_of(notes)
    assert fired & {r for r in NVIDIA_RULES if r.startswith("gpu.")} == set()
    acme = [s for s in settings if s.rule == "gpu.acme-persistence"]
    assert [(s.kind, s.key, s.value) for s in acme] == [("gpu", "persistence", "on")]
    plan = build_plan(machine, intent)
    assert not {"gpu.nouveau", "gpu.persistence", "gpu.boot-unit"} & rules_of(plan.settings)
    assert not any("nouveau" in s.key for s in plan.settings)


def test_on_an_nvidia_machine_the_same_rules_fire_as_before(acme_catalog: Catalog) -> None:
    """The twin of the test above: its assertions can fail (NVIDIA rules fire on H100s)."""
    machine = machine_with(acme_catalog, {"model": "H100-SXM5-80GB", "count": 4})
    settings, _ = run_rules(machine, profile("training"), (*REGISTRY, acme_persistence))
    assert {"gpu.nouveau", "gpu.persistence", "boot.acs"} <= rules_of(settings)
    assert "gpu.acme-persistence" not in rules_of(settings)


def test_on_a_mixed_machine_each_rule_sees_its_vendors_gpus(acme_catalog: Catalog) -> None:
    machine = machine_with(
        acme_catalog, {"model": "ACME-X1", "count": 2}, {"model": "H100-SXM5-80GB", "count": 8}
    )
    settings, _ = run_rules(machine, profile("training"), (*REGISTRY, acme_persistence))
    by_rule = {s.rule: s for s in settings}
    assert "2 Acme GPUs" in by_rule["gpu.acme-persistence"].reason
    assert "ACME" not in by_rule["gpu.fabric-manager"].reason  # "8x H100-SXM5-80GB connect..."


def test_the_boot_scripts_data_lists_the_second_vendors_id(acme_catalog: Catalog) -> None:
    """Step 3: the fixed scripts' data files list the PCI id of each vendor the plan's GPUs are
    (gpu-vendor 0x1234 for Acme's), in table order; a plan that names none is NVIDIA's."""
    assert [line.text for line in gpu_vendor_lines(("acme",))] == ["gpu-vendor\t0x1234"]
    assert [line.text for line in gpu_vendor_lines(("acme", "nvidia"))] == [
        "gpu-vendor\t0x10de",
        "gpu-vendor\t0x1234",
    ]
    assert [line.text for line in gpu_vendor_lines(())] == ["gpu-vendor\t0x10de"]


def test_a_bundles_data_lists_only_the_vendors_its_gpus_are() -> None:
    """Issue 31: an NVIDIA bundle's data files are what they were before AMD's row (0x10de only),
    and an AMD bundle's list 0x1002 alone. Fails on main, which has no AMD row or catalog."""
    nvidia = render_for("dgx-h100", "training")
    acs = nvidia[in_overlay(layout.ACS_DATA)][0].decode()
    assert "gpu-vendor\t0x10de\n" in acs and "0x1002" not in acs
    amd = render_bundle(build_plan(load_inputs("mi300x-8x-epyc", "training").facts, AMD_PARTS))
    collect = amd[in_overlay(layout.COLLECT_DATA)][0].decode()
    assert "gpu-vendor\t0x1002\n" in collect and "0x10de" not in collect
    amd_script = gpu_script(GPU_VENDORS[GpuVendor.AMD])
    assert in_overlay(amd_script) in amd and in_overlay(layout.GPU_SCRIPT) not in amd
    assert (
        "ExecStart=/usr/lib/goldtune/gpu-setup-amd "
        in amd[in_overlay(layout.unit_file(layout.GPU_UNIT))][0].decode()
    )


def test_a_catalog_gpu_of_an_unknown_vendor_is_refused(tmp_path: Path) -> None:
    root = tmp_path / "hardware_db"
    (root / "gpus").mkdir(parents=True)
    (root / "gpus" / "ACME-X1.yaml").write_text(yaml.safe_dump(ACME_GPU))
    with pytest.raises(InputError) as raised:
        _ = load_catalog(root).gpus
    assert "vendor" in str(raised.value) and "not a GPU vendor goldtune knows" in str(raised.value)


def test_the_readme_recipe_names_what_exists() -> None:
    """README's "Adding a GPU vendor" stays true: every file and name it points to exists."""
    readme = (ROOT / "README.md").read_text()
    start = readme.index("**Adding a GPU vendor**")
    recipe = readme[start : readme.index("\n\nLinters run as tests", start)]
    quoted = set(re.findall(r"`([^`]+)`", recipe))
    files = {
        q for q in quoted if re.fullmatch(r"(generator|templates|tests|hardware_db)/[\w/.-]+", q)
    }
    assert files, "the recipe names no file"
    for name in files:
        assert list(ROOT.glob(name)) or (ROOT / name).exists(), name
    names = {
        "GpuVendor": vendors,
        "GPU_VENDORS": vendors,
        "GPU_FACTS": importlib.import_module("generator.inputs.facts"),
        "Facts.gpu_vendors": Facts,
        "has_gpus_of()": Facts,
        "Facts.seen_by": Facts,
    }
    for name, owner in names.items():
        assert f"`{name}`" in recipe, name
        assert hasattr(owner, name.removeprefix("Facts.").removesuffix("()")), name
