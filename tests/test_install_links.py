"""install.sh --root DIR makes the links of the units' [Install] sections itself (issue 29,
family 1): `systemctl --root=DIR enable` wrote through a link at a .wants or .requires directory,
absolute or relative, out of the image, also through the image's own units' [Install]
(WantedBy=, RequiredBy=, Alias=, Also=). And the install record is read bounded.

Every hostile image is made in tmp_path and every link out of it points into tmp_path, so a
failure writes nowhere else. The hostile tests fail on the integration base of issue 29 (with
systemctl on PATH, as on an image build host); the comparison with systemctl needs it."""

from __future__ import annotations

import os
import shutil
import signal
import subprocess
import time
from pathlib import Path

import pytest
from plans import full_plan
from test_install import bundle_for, make_bin

from generator.model.setting import Plan

SYSTEMCTL = shutil.which("systemctl")
PACKAGED = "usr/lib/systemd/system"


def tool_path(tmp_path: Path) -> str:
    """The tools install.sh needs, and the host's systemctl when there is one (the base used it)."""
    directory = tmp_path / "bin"
    if not directory.exists():
        make_bin(tmp_path, {})
    return f"{directory}:{os.path.dirname(SYSTEMCTL)}" if SYSTEMCTL else str(directory)


def install(bundle: Path, root: Path, path: str) -> subprocess.CompletedProcess[str]:
    command = [str(bundle / "install.sh"), "--root", str(root)]
    with subprocess.Popen(
        command,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        env={"PATH": path, "LC_ALL": "C"},
        start_new_session=True,
    ) as run:
        try:
            out, err = run.communicate(timeout=60)
        except subprocess.TimeoutExpired:
            os.killpg(run.pid, signal.SIGKILL)
            run.communicate()
            pytest.fail("install.sh ran past 60 s")
    return subprocess.CompletedProcess(command, run.returncode, out, err)


def unit(root: Path, name: str, install_section: str, where: str = PACKAGED) -> None:
    path = root / where / name
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(f"[Service]\nExecStart=/bin/true\n\n[Install]\n{install_section}")


def links(root: Path) -> dict[str, str]:
    return {
        "/" + str(path.relative_to(root)): os.readlink(path)
        for path in sorted((root / "etc/systemd/system").rglob("*"))
        if path.is_symlink()
    }


def enabled_units(bundle: Path) -> list[str]:
    return [
        line.split("\t")[2]
        for line in (bundle / "install.list").read_text().splitlines()
        if line.startswith("service\tenable\t")
    ]


def hostile_image(root: Path, outside: Path, place: str, target: str) -> None:
    """An image whose packaged irqbalance-like unit (one the plan enables) has an [Install]
    naming the directory ``place``, a link there to ``target`` (which leads to ``outside``)."""
    outside.mkdir()
    unit(
        root,
        "nvidia-persistenced.service",
        "WantedBy=multi-user.target\nAlso=helper.service\nAlias=persist.service\n",
    )
    unit(root, "helper.service", "RequiredBy=evil.target\n")
    link = root / "etc/systemd/system" / place
    link.parent.mkdir(parents=True, exist_ok=True)
    link.symlink_to(target)


@pytest.mark.parametrize(
    ("place", "relative"),
    [
        ("multi-user.target.wants", False),  # the bundle's own units' WantedBy
        ("multi-user.target.wants", True),
        ("evil.target.requires", False),  # through the image's own Also= unit's RequiredBy
        ("evil.target.requires", True),
    ],
)
def test_no_link_is_made_through_a_wants_directory_that_leaves_the_image(
    tmp_path: Path, place: str, relative: bool
) -> None:
    root = tmp_path / "image"
    outside = tmp_path / "outside"
    target = "../../../../outside" if relative else str(outside)
    hostile_image(root, outside, place, target)
    result = install(bundle_for(tmp_path, full_plan()), root, tool_path(tmp_path))
    assert list(outside.iterdir()) == [], result.stdout
    assert result.returncode == 1
    assert "leaves the image; refusing to write through it" in result.stderr


def test_an_alias_or_unit_directory_link_out_of_the_image_is_not_written(tmp_path: Path) -> None:
    root = tmp_path / "image"
    outside = tmp_path / "outside"
    outside.mkdir()
    unit(root, "nvidia-persistenced.service", "Alias=system/persist.service\n")
    result = install(bundle_for(tmp_path, full_plan()), root, tool_path(tmp_path))
    assert "nvidia-persistenced.service failed" in result.stdout
    assert not (root / "etc/systemd/system/persist.service").is_symlink()
    (root / "etc/systemd/system").rename(root / "etc/systemd/own")
    (root / "etc/systemd/system").symlink_to(outside)
    result = install(bundle_for(tmp_path, full_plan(), "again"), root, tool_path(tmp_path))
    assert list(outside.iterdir()) == []
    assert result.returncode == 1


@pytest.mark.parametrize(
    "install_section",
    [
        "WantedBy=%N.target\n",  # a specifier systemctl would expand
        'WantedBy="multi-user.target"\n',
        "WantedBy=multi-user.target \\\n  other.target\n",
        "Also=../../../etc/x.service\n",
    ],
)
def test_an_install_section_that_is_not_plain_enables_nothing(
    tmp_path: Path, install_section: str
) -> None:
    root = tmp_path / "image"
    unit(root, "nvidia-persistenced.service", install_section)
    result = install(bundle_for(tmp_path, full_plan()), root, tool_path(tmp_path))
    assert result.returncode == 1
    assert "enable nvidia-persistenced.service failed" in result.stdout
    assert not [name for name in links(root) if "nvidia-persistenced" in name]


@pytest.mark.skipif(SYSTEMCTL is None, reason="systemctl not installed")
def test_the_links_are_the_ones_systemctl_makes(tmp_path: Path) -> None:
    """The same image enabled by install.sh and by `systemctl --root enable` of the same units:
    drop-ins (a later one emptying a list, one in /etc hiding one in /usr/lib of that name),
    Alias=, Also=, RequiredBy=, a unit the bundle ships in /etc/systemd/system."""
    root = tmp_path / "image"
    unit(
        root,
        "nvidia-persistenced.service",
        "WantedBy=graphical.target\nRequiredBy=x.target\nAlias=persist.service\nAlso=h.service\n",
    )
    unit(root, "h.service", "WantedBy=y.target z.target\n")
    dropins = {
        f"{PACKAGED}/nvidia-persistenced.service.d/50-a.conf": "WantedBy=\n",
        f"{PACKAGED}/nvidia-persistenced.service.d/60-b.conf": "WantedBy=lost.target\n",
        "etc/systemd/system/nvidia-persistenced.service.d/60-b.conf": "WantedBy=w.target\n",
    }
    for dropin, text in dropins.items():
        (root / dropin).parent.mkdir(parents=True, exist_ok=True)
        (root / dropin).write_text("[Install]\n" + text)
    bundle = bundle_for(tmp_path, full_plan())
    tools = make_bin(tmp_path, {"systemctl": "exit 1\n"}, "no-systemctl")  # never called
    result = install(bundle, root, str(tools))
    assert result.returncode == 0, result.stdout + result.stderr
    ours = links(root)
    for link in ours:
        if ours[link] != "/dev/null":
            (root / link.lstrip("/")).unlink()
    # and the unit install.sh writes for an image build to check the kernel arguments at boot
    units = [
        name
        for name in [*enabled_units(bundle), "goldtune-kernel-args.service"]
        if (root / "etc/systemd/system" / name).exists() or (root / PACKAGED / name).exists()
    ]
    subprocess.run([SYSTEMCTL or "", f"--root={root}", "--quiet", "enable", *units], check=True)
    assert links(root) == ours
    assert ours["/etc/systemd/system/w.target.wants/nvidia-persistenced.service"] == (
        f"/{PACKAGED}/nvidia-persistenced.service"
    )
    assert "/etc/systemd/system/lost.target.wants/nvidia-persistenced.service" not in ours


def test_disable_removes_the_links_inside_the_image_only(tmp_path: Path) -> None:
    """A bundle that drops a unit disables it: its links go, a linked .wants directory is not
    entered (its link out of the image left as it is)."""
    root = tmp_path / "image"
    outside = tmp_path / "outside"
    outside.mkdir()
    (outside / "goldtune-gpu.service").symlink_to("/etc/systemd/system/goldtune-gpu.service")
    root.mkdir()
    assert install(bundle_for(tmp_path, full_plan()), root, tool_path(tmp_path)).returncode == 0
    wants = root / "etc/systemd/system/multi-user.target.wants"
    assert (wants / "goldtune-gpu.service").is_symlink()
    (root / "etc/systemd/system/sneaky.target.wants").symlink_to(outside)
    without_gpu = Plan("x", "y", ())
    result = install(bundle_for(tmp_path, without_gpu, "empty"), root, tool_path(tmp_path))
    assert "disable goldtune-gpu.service" in result.stdout
    assert not (wants / "goldtune-gpu.service").is_symlink()
    assert (outside / "goldtune-gpu.service").is_symlink()


def test_a_forged_install_record_is_refused_at_once(tmp_path: Path) -> None:
    """A record of 60,000 lines (each a path install.sh could have installed) ran minutes."""
    root = tmp_path / "image"
    record = root / "var/lib/goldtune/installed-files"
    record.parent.mkdir(parents=True)
    record.write_text("".join(f"/etc/goldtune-{n}.conf\n" for n in range(60000)))
    bundle = bundle_for(tmp_path, full_plan())
    listed = [
        line.split("\t")[1]
        for line in (bundle / "install.list").read_text().splitlines()
        if line.startswith("record\t")
    ]
    assert listed == ["/var/lib/goldtune/installed-files"]
    started = time.monotonic()
    result = install(bundle, root, tool_path(tmp_path))
    assert time.monotonic() - started < 30
    assert result.returncode == 1
    assert "is not a plain file of at most 1024 lines and 64 KiB; it was not used" in result.stdout
