"""install.sh --image-build --root DIR on a Debian image whose disk is mounted at DIR (issue 27
item 2): the image's own update-grub runs chrooted, as image builders run it, so grub.cfg carries
the bundle's arguments before the image ever boots. On a directory of this host's filesystem
(not the image's disk) grub-probe would name this host's device, so there the first-boot unit
does it (tests/test_install.py)."""

from __future__ import annotations

import os
import shlex
import shutil
import subprocess
from pathlib import Path

import pytest
from test_install import DEBIAN_GRUB, GRUB_PROBE, INFERENCE, bundle_for, needs_chroot

from generator.render.overlay import kernel_cmdline

needs_grub = pytest.mark.skipif(
    shutil.which("update-grub") is None or not Path("/etc/grub.d/10_linux").exists(),
    reason="grub-common/grub2-common not installed (tests/tools/install-tools.sh)",
)


def image_on_its_own_filesystem(tmp_path: Path, install: list[str]) -> dict[str, str]:
    """A Debian root on a tmpfs of its own (standing for the image's disk mounted at DIR), with
    this host's /usr (read-only: grub-mkconfig and /etc/grub.d are the real ones) and a
    grub-probe that answers for the image's disk; ``install`` runs against it, in the same mount
    namespace. Returns what the run printed and left: stdout, grub.cfg, the unit names."""
    root = tmp_path / "image"
    root.mkdir()
    (tmp_path / "grub-probe").write_text("#!/bin/sh\n" + GRUB_PROBE)
    (tmp_path / "grub-probe").chmod(0o755)
    awk = Path(shutil.which("awk") or "/usr/bin/awk").resolve()
    files = {
        "etc/default/grub": DEBIAN_GRUB,
        "boot/vmlinuz-6.1.0-9-amd64": "kernel\n",
        "boot/initrd.img-6.1.0-9-amd64": "initrd\n",
        "etc/tuned/bootcmdline": "",  # tuned's /etc/grub.d/00_tuned sources it (host has tuned)
    }
    q = shlex.quote
    script = f"set -e\nmount -t tmpfs image {q(str(root))}\ncd {q(str(root))}\n"
    script += "mkdir -p usr .usr-layers/upper .usr-layers/work dev proc sys boot/grub\n"
    script += "mkdir -p etc/grub.d etc/default etc/tuned\n"
    script += "mkdir stub\n"
    script += "".join(f"ln -s usr/{name} {name}\n" for name in ("bin", "sbin", "lib", "lib64"))
    script += "".join(f"printf %s {q(text)} >{q(name)}\n" for name, text in files.items())
    script += f"ln -s {q(str(awk))} stub/awk\n"  # the image's /etc has no alternatives
    # the host's /usr under a writable overlay kept in the tmpfs (the bundle's /usr/lib/goldtune)
    layers = f"{root}/.usr-layers"
    options = f"lowerdir=/usr,upperdir={layers}/upper,workdir={layers}/work"
    script += f"mount -t overlay usr -o {q(options)} usr\n"
    script += "mount --bind /etc/grub.d etc/grub.d\n"
    script += f"mount --bind {q(str(tmp_path / 'grub-probe'))} usr/sbin/grub-probe\n"
    out = q(str(tmp_path))
    script += f"cd /\n{shlex.join(install)} --image-build --root {q(str(root))} >{out}/stdout\n"
    script += f"cp {q(str(root))}/boot/grub/grub.cfg {q(str(tmp_path))}/grub.cfg\n"
    script += f"ls {q(str(root))}/etc/systemd/system >{q(str(tmp_path))}/units\n"
    env = {"PATH": "/stub:/usr/sbin:/usr/bin:/sbin:/bin", "LC_ALL": "C"}
    result = subprocess.run(
        ["unshare", "--mount", "--propagation", "private", "sh", "-c", script],
        capture_output=True,
        text=True,
        env=env,
        check=False,
    )
    stdout = (tmp_path / "stdout").read_text() if (tmp_path / "stdout").exists() else ""
    assert result.returncode == 0, stdout + result.stderr
    return {
        "stdout": stdout,
        "grub.cfg": (tmp_path / "grub.cfg").read_text(),
        "units": (tmp_path / "units").read_text(),
    }


@needs_chroot
@needs_grub
@pytest.mark.skipif(os.geteuid() != 0, reason="needs root (mount, chroot)")
def test_an_image_on_its_own_filesystem_gets_grub_cfg_regenerated_chrooted(
    tmp_path: Path,
) -> None:
    """On main --root left grub.cfg as it was here too (a first-boot unit regenerated it, in
    effect only from the boot after): the image's first boot lacked the arguments."""
    bundle = bundle_for(tmp_path, INFERENCE)
    found = image_on_its_own_filesystem(tmp_path, ["sh", str(bundle / "install.sh")])
    assert "regenerated grub.cfg of" in found["stdout"], found["stdout"]
    lines = [
        line.split()[2:]
        for line in found["grub.cfg"].splitlines()
        if line.strip().startswith("linux") and "single" not in line
    ]
    assert lines and all(
        words == ["root=/dev/vda1", "ro", "quiet", *kernel_cmdline(INFERENCE).split()]
        for words in lines
    ), lines
    # regenerated now: no unit to do it again at first boot; the boot check still comes
    assert "goldtune-update-grub.service" not in found["units"].split()
    assert "goldtune-kernel-args.service" in found["units"].split()
