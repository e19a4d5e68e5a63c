"""`gen verify --root` never says "ok" for what the image undoes (issue 29, family 4).

Each image below is made in tmp_path from a good one (tests/test_verify.py's ROOT_FILES) plus one
hostile change that keeps goldtune's setting from taking effect at boot, or that verify cannot
evaluate offline. On the integration base of issue 29 every one of them was judged "ok"; now each
is "differs" where verify can tell the bundle is undone, else "not-judged" naming the file.
"""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from generator.bundle.read import read_bundle
from generator.verify.run import verify_checks
from generator.verify.verdicts import Check, Verdict
from tests.test_verify import ROOT_FILES, ROOT_LINKS, ROOT_SETTINGS, image_tree, make_bundle

OK, DIFFERS, NOT_JUDGED = Verdict.OK, Verdict.DIFFERS, Verdict.NOT_JUDGED
GRUB_D = "/etc/default/grub.d"
GPU_UNIT = "/etc/systemd/system/goldtune-gpu.service"


def checks_of(
    tmp_path: Path, files: dict[str, str], links: dict[str, str] | None = None
) -> dict[tuple[str, str], Check]:
    """The checks of the good image changed by ``files`` and ``links``, made in ``tmp_path``
    (an ``image`` directory there already may hold what a dict cannot: a FIFO, a sparse file)."""
    overlay = {
        f"rootfs{path}": (text, 0o644) for path, text in ROOT_FILES.items() if "goldtune" in path
    }
    bundle = make_bundle(tmp_path, ROOT_SETTINGS, overlay)
    root = image_tree(tmp_path / "image", {**ROOT_FILES, **files}, {**ROOT_LINKS, **(links or {})})
    checks, _ = verify_checks(read_bundle(bundle), root, None)
    return {(c.kind, c.key): c for c in checks}


def test_the_good_image_is_ok(tmp_path: Path) -> None:
    """The baseline every hostile case changes: the settings below are ok without the change."""
    found = checks_of(tmp_path, {})
    for key in (("kernel-arg", "iommu"), ("gpu", "persistence"), ("sysctl", "vm.swappiness")):
        assert found[key].verdict == OK, found[key]
    assert found[("service", "goldtune-gpu.service")].verdict == OK


# --- GRUB: what grub-mkconfig's sh does that a line-by-line reading does not --------------------

LOCAL = f"{GRUB_D}/99-local.cfg"
SNEAKED = "GRUB_CMDLINE_LINUX_DEFAULT=iommu=pt\n"  # read as an assignment only line by line


@pytest.mark.parametrize(
    ("files", "line"),
    [
        # a continuation joins the name: sh sets GRUB_CMDLINE_LINUX_DEFAULT=quiet
        ({LOCAL: 'GRUB_CMD\\\nLINE_LINUX_DEFAULT="quiet"\n'}, 1),
        # the quote opened on line 1 hides line 2 from sh; read line by line it is an assignment
        (
            {LOCAL: 'GRUB_CMDLINE_LINUX_DEFAULT=quiet; echo "\n' + SNEAKED + '"\n'},
            1,
        ),
        # the same through a substitution of another variable, and through a here-document
        (
            {
                LOCAL: 'GRUB_CMDLINE_LINUX_DEFAULT=quiet\nGRUB_DISTRIBUTOR=$(echo "\n'
                + SNEAKED
                + '")\n'
            },
            2,
        ),
        (
            {LOCAL: "GRUB_CMDLINE_LINUX_DEFAULT=quiet\n: <<EOF\n" + SNEAKED + "EOF\n"},
            2,
        ),
        # an exit (or return, or a failing command under grub-mkconfig's set -e) before
        # goldtune's drop-in is sourced: update-grub never writes its argument
        ({"/etc/default/grub": 'GRUB_CMDLINE_LINUX_DEFAULT="quiet"\nexit 0\n'}, 2),
        ({f"{GRUB_D}/50-stop.cfg": "return\n"}, 1),
        ({f"{GRUB_D}/50-stop.cfg": "GRUB_TIMEOUT=5 && false\n"}, 1),
        ({f"{GRUB_D}/50-stop.cfg": "[ -e /nonexistent ]\n"}, 1),
    ],
    ids=[
        "continued-name",
        "open-quote",
        "open-substitution",
        "here-document",
        "exit",
        "return",
        "assignment-and-command",
        "failing-test",
    ],
)
def test_grub_code_that_undoes_the_argument_is_not_judged(
    tmp_path: Path, files: dict[str, str], line: int
) -> None:
    check = checks_of(tmp_path, files)[("kernel-arg", "iommu")]
    assert check.verdict == NOT_JUDGED, check
    (path,) = files
    assert f"{path}: line {line}" in check.reason, check.reason


def test_harmless_grub_lines_are_still_judged(tmp_path: Path) -> None:
    """: / true / echo with plain words, comments ending in a backslash, export: judged."""
    text = (
        "# a comment \\\n: nothing\ntrue\necho plain words\nexport GRUB_TIMEOUT\nGRUB_TIMEOUT=5\n"
    )
    assert (
        checks_of(tmp_path, {f"{GRUB_D}/50-fine.cfg": text})[("kernel-arg", "iommu")].verdict == OK
    )


def test_a_grub_d_file_that_cannot_be_read_is_not_judged(tmp_path: Path) -> None:
    """A FIFO in grub.d is sourced by grub-mkconfig ([ -e ]) and hangs it; one at
    /etc/default/grub is not sourced (test -f) and changes nothing."""
    for name in ("main", "grub.d"):
        (tmp_path / name / "image/etc/default/grub.d").mkdir(parents=True)
        os.mkfifo(tmp_path / name / "image/etc/default/grub")
    os.mkfifo(tmp_path / "grub.d/image/etc/default/grub.d/95-fifo.cfg")
    assert checks_of(tmp_path / "main", {})[("kernel-arg", "iommu")].verdict == OK
    check = checks_of(tmp_path / "grub.d", {})[("kernel-arg", "iommu")]
    assert check.verdict == NOT_JUDGED and f"{GRUB_D}/95-fifo.cfg" in check.reason, check


# --- the bundle's own unit: an image drop-in that empties ExecStart or adds a condition --------


@pytest.mark.parametrize(
    ("path", "text", "verdict"),
    [
        (f"{GPU_UNIT}.d/50-local.conf", "[Service]\nExecStart=\n", DIFFERS),
        (f"{GPU_UNIT}.d/50-local.conf", "[Service]\nExecStart=\nExecStart=/bin/false\n", DIFFERS),
        ("/etc/systemd/system/goldtune-.service.d/x.conf", "[Service]\nExecStart=\n", DIFFERS),
        ("/usr/lib/systemd/system/service.d/x.conf", "[Service]\nExec\\\nStart=\n", NOT_JUDGED),
        ("/usr/lib/systemd/system/service.d/x.conf", "[Service]\nExecStart=\\\n\n", DIFFERS),
        (f"{GPU_UNIT}.d/50-local.conf", "[Unit]\nConditionPathExists=/nonexistent\n", NOT_JUDGED),
        (f"{GPU_UNIT}.d/50-local.conf", "[Unit]\nAssertKernelVersion=<2.6\n", NOT_JUDGED),
        (f"{GPU_UNIT}.d/50-local.conf", "[Service]\nExecStartPre=/bin/false\n", NOT_JUDGED),
    ],
    ids=[
        "emptied",
        "replaced",
        "prefix-drop-in",
        "continued-name",
        "continued-empty",
        "condition",
        "assertion",
        "failing-pre",
    ],
)
def test_a_drop_in_that_undoes_the_bundles_unit(
    tmp_path: Path, path: str, text: str, verdict: Verdict
) -> None:
    found = checks_of(tmp_path, {path: text})
    for key in (("gpu", "persistence"), ("service", "goldtune-gpu.service")):
        assert found[key].verdict == verdict, found[key]
        assert path in found[key].reason, found[key].reason


def test_a_mask_above_the_bundles_unit_and_a_harmless_drop_in(tmp_path: Path) -> None:
    control = "/etc/systemd/system.control/goldtune-gpu.service"
    (tmp_path / "masked").mkdir()
    found = checks_of(tmp_path / "masked", {}, {control: "/dev/null"})
    assert found[("gpu", "persistence")].verdict == DIFFERS, found[("gpu", "persistence")]
    harmless = {f"{GPU_UNIT}.d/50-doc.conf": "[Unit]\nDescription=x\n[Install]\nAlias=y.service\n"}
    assert checks_of(tmp_path, harmless)[("gpu", "persistence")].verdict == OK


# --- a drop-in over the read cap, or not a file, is not skipped silently -----------------------


def test_a_sysctl_file_over_the_read_cap_is_not_judged(tmp_path: Path) -> None:
    image = tmp_path / "image"
    (image / "etc/sysctl.d").mkdir(parents=True)
    big = image / "etc/sysctl.d/99-big.conf"
    with big.open("wb") as handle:  # sparse: 17 MiB that take no disk
        handle.seek(17 * 1024 * 1024)
        handle.write(b"\nvm.swappiness = 60\n")
    check = checks_of(tmp_path, {})[("sysctl", "vm.swappiness")]
    assert check.verdict == NOT_JUDGED, check
    assert "/etc/sysctl.d/99-big.conf" in check.reason and "larger than" in check.reason


def test_a_fifo_among_the_sysctl_files_is_not_judged(tmp_path: Path) -> None:
    image = tmp_path / "image"
    (image / "etc/sysctl.d").mkdir(parents=True)
    os.mkfifo(image / "etc/sysctl.d/99-fifo.conf")
    check = checks_of(tmp_path, {})[("sysctl", "vm.swappiness")]
    assert check.verdict == NOT_JUDGED and "/etc/sysctl.d/99-fifo.conf" in check.reason, check
