"""examples/packer/: the HCL2 templates pass a real `packer validate` (Debian's packer 1.6.6),
and the install step they default to is image-build and strict.

`packer validate` of the amazon-ebs template needs no AWS access with packer 1.6.6 (the source
AMI filter and credentials are resolved only by `packer build`), so no `-syntax-only` is used.
The qemu template is also run for real, by `packer build`, in tests/boot/test_packer.py.
"""

from __future__ import annotations

import re
import shutil
import subprocess
from pathlib import Path

import pytest
from plans import full_plan

from generator.bundle.write import write_bundle
from generator.render.render import render_bundle
from tests.conftest import REPO

PACKER = REPO / "examples" / "packer"
TEMPLATES = ("gpu-amazon-ebs.pkr.hcl", "gpu-qemu.pkr.hcl")
needs_packer = pytest.mark.skipif(shutil.which("packer") is None, reason="packer not installed")


def validate(template: str, tmp_path: Path) -> subprocess.CompletedProcess[str]:
    bundle = tmp_path / "bundle"
    bundle.mkdir(exist_ok=True)
    args = ["packer", "validate", "-var", f"bundle_dir={bundle}"]
    if "qemu" in template:
        image = tmp_path / "base.img"
        image.write_bytes(b"")
        key = tmp_path / "key"
        if not key.exists():
            subprocess.run(
                ["ssh-keygen", "-q", "-t", "ed25519", "-N", "", "-f", str(key)], check=True
            )
        args += ["-var", f"base_image={image}", "-var", f"ssh_private_key_file={key}"]
    return subprocess.run(
        [*args, template],
        cwd=PACKER,
        capture_output=True,
        text=True,
        timeout=120,
        env={"PATH": "/usr/bin:/bin", "CHECKPOINT_DISABLE": "1", "HOME": str(tmp_path)},
        check=False,
    )


@needs_packer
@pytest.mark.parametrize("template", TEMPLATES)
def test_the_template_validates(template: str, tmp_path: Path) -> None:
    result = validate(template, tmp_path)
    assert result.returncode == 0, result.stdout + result.stderr


@needs_packer
@pytest.mark.parametrize("template", TEMPLATES)
def test_validate_catches_a_broken_template(template: str, tmp_path: Path) -> None:
    text = (PACKER / template).read_text()
    source = re.search(r'sources = \["(source\.[a-z0-9.-]+)"\]', text)
    assert source
    broken = tmp_path / template
    broken.write_text(text.replace(source.group(0), 'sources = ["source.qemu.nothing"]'))
    result = validate(str(broken), tmp_path)
    assert result.returncode != 0


def default_install_flags(template: str) -> list[str]:
    text = (PACKER / template).read_text()
    found = re.search(r'variable "install_flags" \{[^}]*default\s*=\s*"([^"]*)"', text)
    assert found, f"{template}: no install_flags default"
    return found.group(1).split()


@pytest.mark.parametrize("template", TEMPLATES)
def test_the_default_install_is_an_image_build_that_fails_on_a_missing_driver(
    template: str, tmp_path: Path
) -> None:
    """The template's own flags, run on an image without the NVIDIA packages: the build stops,
    naming them (a template without --strict would bake the image and exit 0)."""
    flags = default_install_flags(template)
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


@pytest.mark.parametrize("template", TEMPLATES)
def test_the_template_uploads_the_bundle_before_installing_it(template: str) -> None:
    text = (PACKER / template).read_text()
    upload = text.index('provisioner "file"')
    install = text.index("install.sh ${var.install_flags}")
    driver = text.index("inline          = var.driver_install")
    assert driver < upload < install
