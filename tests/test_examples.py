"""examples/packer/: one template per directory, each one `packer validate .`-clean with its
defaults; the current-Packer ones (HCL2 with required_plugins) and Debian's packer 1.6.6 one.

Three layers, because the Packer that runs here is Debian's 1.6.6, which rejects the
``required_plugins`` block the current release line needs (and cannot install plugins offline):

- every template is parsed with an HCL2 parser (python-hcl2): syntax, one template per
  directory, required_plugins naming the plugin of each source, a validation block and a
  "Must be set" description on each placeholder, the two qemu templates alike but for their
  packer block;
- the real packer 1.6.6 runs `packer validate .` with the defaults in the 1.6.6 directory (the
  template tests/boot/test_packer.py builds), and on the current templates without their packer
  block (1.6.6 has the amazon-ebs and qemu builders built in), which checks every builder and
  provisioner option and every validation expression, not only the syntax;
- the validation blocks reject what cannot work (packer 1.6.6, a bad value each).

`packer validate` of the amazon-ebs template needs no AWS access (the source AMI filter and
credentials are resolved only by `packer build`), so no `-syntax-only` is used. On main, before
this layout, `packer validate .` in examples/packer/ failed (both templates declared
``driver_install``) and each template failed with its defaults (the bundle directory and the SSH
key were looked for at validation).
"""

from __future__ import annotations

import re
import shutil
import subprocess
from pathlib import Path
from typing import Any

import hcl2
import pytest
from plans import full_plan

from generator.bundle.write import write_bundle
from generator.render.render import render_bundle
from tests.conftest import REPO

PACKER = REPO / "examples" / "packer"
# the directories: written for the current Packer release line, and for Debian's 1.6.6
CURRENT = ("amazon-ebs", "qemu")
DEBIAN_1_6 = "qemu-packer-1.6"
EXAMPLES = (*CURRENT, DEBIAN_1_6)
TEMPLATE = "gpu.pkr.hcl"
# the plugin each builder type comes from in the current release line (packer init)
PLUGIN_OF_BUILDER = {
    "amazon-ebs": "github.com/hashicorp/amazon",
    "qemu": "github.com/hashicorp/qemu",
}
needs_packer = pytest.mark.skipif(shutil.which("packer") is None, reason="packer not installed")


def parsed(example: str) -> dict[str, Any]:
    """The template as python-hcl2 reads it: strings unquoted, comments dropped."""
    options = hcl2.SerializationOptions(with_comments=False, strip_string_quotes=True)
    with (PACKER / example / TEMPLATE).open() as template:
        return hcl2.load(template, serialization_options=options)


def variables(template: dict[str, Any]) -> dict[str, dict[str, Any]]:
    return {name.strip('"'): body for block in template["variable"] for name, body in block.items()}


def packer_validate(directory: Path, *var_args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        ["packer", "validate", *var_args, "."],
        cwd=directory,
        capture_output=True,
        text=True,
        timeout=120,
        env={"PATH": "/usr/bin:/bin", "CHECKPOINT_DISABLE": "1", "HOME": str(directory)},
        check=False,
    )


def without_packer_block(example: str, into: Path) -> Path:
    """The template in a directory of its own, without its top-level packer block (packer
    1.6.6 knows neither required_plugins nor a required_version above itself)."""
    text = (PACKER / example / TEMPLATE).read_text()
    stripped, count = re.subn(r"^packer \{\n.*?^\}\n", "", text, flags=re.S | re.M)
    assert count == 1, f"{example}: no top-level packer block"
    into.mkdir()
    (into / TEMPLATE).write_text(stripped)
    return into


# --- the layout and the HCL2 syntax (every example, no Packer needed) ---------------------------


def test_each_template_is_alone_in_its_directory() -> None:
    """`packer validate .` reads every *.pkr.hcl of a directory as one configuration: two
    templates side by side declare the same variables twice."""
    templates = sorted(path.relative_to(PACKER) for path in PACKER.rglob("*.pkr.hcl"))
    assert templates == [Path(example) / TEMPLATE for example in sorted(EXAMPLES)]


@pytest.mark.parametrize("example", EXAMPLES)
def test_the_template_parses_as_hcl2(example: str) -> None:
    template = parsed(example)
    assert template["build"], example
    assert template["source"], example


def test_the_parser_rejects_a_broken_template(tmp_path: Path) -> None:
    broken = (PACKER / "qemu" / TEMPLATE).read_text().replace('source "qemu" "gpu" {', "", 1)
    with pytest.raises(Exception):  # noqa: B017 -- the parser's own error types vary by version
        hcl2.loads(broken)


@pytest.mark.parametrize("example", CURRENT)
def test_a_current_template_requires_the_plugin_of_each_source(example: str) -> None:
    template = parsed(example)
    (packer_block,) = template["packer"]
    required = {
        body["source"]
        for block in packer_block["required_plugins"]
        for name, body in block.items()
        if not name.startswith("__")
    }
    builders = {name.strip('"') for block in template["source"] for name in block}
    assert required == {PLUGIN_OF_BUILDER[builder] for builder in builders}
    # required_plugins and `packer init` came with Packer 1.7.0
    assert packer_block["required_version"] == ">= 1.7.0"


def test_the_debian_template_has_no_required_plugins() -> None:
    (packer_block,) = parsed(DEBIAN_1_6)["packer"]
    assert "required_plugins" not in packer_block
    assert packer_block["required_version"] == ">= 1.6.6"


def test_the_two_qemu_templates_differ_only_in_their_packer_block() -> None:
    current, debian = parsed("qemu"), parsed(DEBIAN_1_6)
    del current["packer"], debian["packer"]
    assert current == debian


@pytest.mark.parametrize("example", EXAMPLES)
def test_every_variable_has_a_default_and_placeholders_say_they_must_be_set(example: str) -> None:
    """`packer validate` with the defaults needs a default for each variable; a placeholder
    default is a value the build cannot use, and its description says so, beside a
    validation block."""
    declared = variables(parsed(example))
    assert all("default" in body for body in declared.values()), example
    must_set = {
        name for name, body in declared.items() if "Must be set" in body.get("description", "")
    }
    assert {"bundle_dir", "driver_install"} <= must_set
    for name in must_set:
        assert declared[name].get("validation"), f"{example}: {name} has no validation block"


# --- the real packer 1.6.6 ----------------------------------------------------------------------


@needs_packer
def test_the_debian_template_validates_with_its_defaults(tmp_path: Path) -> None:
    """The directory as shipped, nothing set: what `cd examples/packer/qemu-packer-1.6 &&
    packer validate .` does on a fresh clone."""
    result = packer_validate(PACKER / DEBIAN_1_6)
    assert result.returncode == 0, result.stdout + result.stderr


@needs_packer
@pytest.mark.parametrize("example", CURRENT)
def test_a_current_template_validates_with_its_defaults_on_packer_1_6(
    example: str, tmp_path: Path
) -> None:
    result = packer_validate(without_packer_block(example, tmp_path / example))
    assert result.returncode == 0, result.stdout + result.stderr


@needs_packer
@pytest.mark.parametrize(
    ("setting", "message"),
    [
        ("bundle_dir=", "bundle_dir variable must be set"),
        ("bundle_dir=bundles/x/", "without a trailing /"),
        ("install_flags=--strict", "must hold --image-build"),
        ("driver_install=[]", "driver_install variable must hold at least one command"),
        ("base_image_checksum=abc", "base_image_checksum variable must be none"),
        ("format=vmdk", "format variable must be qcow2 or raw"),
        ("accelerator=qemu", "accelerator variable must be one"),
    ],
)
def test_a_validation_block_rejects_what_cannot_work(setting: str, message: str) -> None:
    result = packer_validate(PACKER / DEBIAN_1_6, "-var", setting)
    assert result.returncode == 1
    assert message in " ".join((result.stdout + result.stderr).split())


@needs_packer
def test_validate_catches_a_broken_template(tmp_path: Path) -> None:
    broken = tmp_path / "broken"
    broken.mkdir()
    text = (PACKER / DEBIAN_1_6 / TEMPLATE).read_text()
    (broken / TEMPLATE).write_text(
        text.replace('sources = ["source.qemu.gpu"]', 'sources = ["source.qemu.nothing"]')
    )
    assert packer_validate(broken).returncode != 0


# --- what the templates run ---------------------------------------------------------------------


def default_install_flags(example: str) -> list[str]:
    default = variables(parsed(example))["install_flags"]["default"]
    assert isinstance(default, str)
    return default.split()


@pytest.mark.parametrize("example", EXAMPLES)
def test_the_default_install_is_an_image_build_that_fails_on_a_missing_driver(
    example: str, tmp_path: Path
) -> None:
    """The template's own flags, run on an image without the NVIDIA packages: the build stops,
    naming them (a template without --strict would bake the image and exit 0)."""
    flags = default_install_flags(example)
    assert "--image-build" in flags
    bundle = write_bundle(render_bundle(full_plan()), tmp_path / "bundle")
    image = tmp_path / "image"
    image.mkdir()
    result = subprocess.run(
        ["sh", str(bundle / "install.sh"), *flags, "--root", str(image)],
        capture_output=True,
        text=True,
        env={"PATH": "/usr/bin:/bin", "LC_ALL": "C"},
        check=False,
    )
    assert result.returncode == 1, result.stdout
    assert "lacks what the plan needs: unit nvidia-persistenced.service, command nvidia-smi" in (
        result.stderr
    )
    assert list(image.iterdir()) == []


@pytest.mark.parametrize("example", EXAMPLES)
def test_the_template_uploads_the_bundle_before_installing_it(example: str) -> None:
    text = (PACKER / example / TEMPLATE).read_text()
    upload = text.index('provisioner "file"')
    install = text.index("install.sh ${var.install_flags}")
    driver = text.index("inline          = var.driver_install")
    assert driver < upload < install
