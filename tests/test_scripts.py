"""The fixed scripts of templates/scripts/: linted once here, the same bytes in every bundle, and
each run against fake tools (a recording nvidia-smi, a fake /sys + /proc tree, a scratch image)."""

from __future__ import annotations

import os
import re
import shutil
import subprocess
import sys
from functools import cache
from pathlib import Path

import pytest
from conftest import PROFILES, SYSTEMS
from plans import full_plan
from test_install import bundle_for, make_bin, run

from generator.commands.generate import render_for
from generator.model import layout
from generator.model.layout import in_overlay
from generator.paths import templates_dir
from generator.render.delivery import STEP_COMMANDS, STEP_SUMMARIES
from generator.render.render import FIXED_SCRIPTS, RenderedFiles

SCRIPTS = templates_dir() / layout.SCRIPTS_DIR
SCRIPT_NAMES = sorted(path.name for path in SCRIPTS.iterdir())


@cache
def rendered(system: str, profile: str) -> RenderedFiles:
    return render_for(system, profile)


def test_every_fixed_script_is_an_output() -> None:
    assert sorted(output.template.rsplit("/", 1)[-1] for output in FIXED_SCRIPTS) == SCRIPT_NAMES
    assert {output.mode for output in FIXED_SCRIPTS} == {0o755}


@pytest.mark.skipif(shutil.which("shellcheck") is None, reason="shellcheck not installed")
@pytest.mark.parametrize("name", SCRIPT_NAMES)
def test_fixed_script_passes_shellcheck(name: str) -> None:
    result = subprocess.run(
        ["shellcheck", "-s", "sh", str(SCRIPTS / name)], capture_output=True, text=True, check=False
    )
    assert result.returncode == 0, result.stdout


@pytest.mark.parametrize("name", SCRIPT_NAMES)
def test_fixed_script_names_no_tool_and_no_bundle(name: str) -> None:
    """Names come from the data files and the units (layout.py), not from the script."""
    text = (SCRIPTS / name).read_text()
    assert not re.search(r"goldtune(?!-snapshot)", text)
    assert "{{" not in text and "{%" not in text


def test_scripts_are_byte_identical_in_every_shipped_bundle() -> None:
    expected = {
        output.path: (SCRIPTS / output.template.rsplit("/", 1)[-1]).read_bytes()
        for output in FIXED_SCRIPTS
    }
    for system in SYSTEMS:
        for profile in PROFILES:
            files = rendered(system, profile)
            for path, content in expected.items():
                if path in files:
                    assert files[path] == (content, 0o755), f"{system}/{profile}: {path}"
            assert layout.INSTALL_SH in files and in_overlay(layout.COLLECT_SCRIPT) in files


def test_install_sh_has_one_function_per_step() -> None:
    text = (SCRIPTS / "install.sh").read_text()
    functions = set(re.findall(r"^step_([a-z]+)\(\)", text, re.MULTILINE))
    assert functions == set(STEP_SUMMARIES)
    assert set(STEP_SUMMARIES) <= set(STEP_COMMANDS)
    for name, summary in STEP_SUMMARIES.items():
        assert f"{name}) printf '%s' \"{summary}\" ;;" in text


def test_verify_imports_neither_jinja_nor_the_renderer() -> None:
    code = (
        "import sys, generator.verify, generator.verify.run, generator.verify.snapshot\n"
        "bad = sorted(m for m in sys.modules if m == 'jinja2' or m.startswith(('jinja2.', 'generator.render')))\n"
        "print(bad)"
    )
    result = subprocess.run(
        [sys.executable, "-c", code], capture_output=True, text=True, check=True
    )
    assert result.stdout.strip() == "[]"


# --- gpu-setup ------------------------------------------------------------------------------------


def gpu_setup(tmp_path: Path, data: str, smi_log: Path) -> subprocess.CompletedProcess[str]:
    data_file = tmp_path / "gpu.conf"
    data_file.write_text(data)
    smi = 'printf "%s\\n" "$*" >>"$STUB_LOG"\nexit 0\n'
    return run(
        SCRIPTS / "gpu-setup",
        str(data_file),
        path=make_bin(tmp_path, {"nvidia-smi": smi}),
        log=smi_log,
    )


@pytest.mark.parametrize(
    "line",
    [
        "ecc\ton; reboot",
        "clocks\t$(reboot)",
        "power-limit\t5%%",
        "mig\tmaybe",
        "reboot\tnow",
        "ecc on",
        "compute-mode\tANY",
    ],
)
def test_gpu_setup_refuses_bad_data_and_calls_nothing(tmp_path: Path, line: str) -> None:
    log = tmp_path / "smi.log"
    log.touch()
    result = gpu_setup(tmp_path, f"log-as\tgt-gpu\n# r: x\necc\ton\n{line}\n", log)
    assert result.returncode == 2
    assert "line 4" in result.stdout and "nothing done" in result.stdout
    assert log.read_text() == ""


def test_gpu_setup_without_data_file_is_a_usage_error(tmp_path: Path) -> None:
    result = run(SCRIPTS / "gpu-setup", str(tmp_path / "missing"), path=make_bin(tmp_path, {}))
    assert result.returncode == 2
    assert "usage" in result.stdout


# --- irq-affinity, against a fake /sys and /proc --------------------------------------------------


def fake_tree(root: Path, interfaces: dict[str, list[int]]) -> Path:
    for interface, irqs in interfaces.items():
        msi = root / "sys/class/net" / interface / "device/msi_irqs"
        msi.mkdir(parents=True)
        for irq in irqs:
            (msi / str(irq)).write_text("msix\n")
            (root / "proc/irq" / str(irq)).mkdir(parents=True)
            (root / "proc/irq" / str(irq) / "smp_affinity_list").write_text("0-127\n")
    (root / "sys/class/net/lo").mkdir(parents=True, exist_ok=True)
    return root


def test_irq_affinity_pins_every_msi_interrupt_of_each_interface(tmp_path: Path) -> None:
    tree = fake_tree(tmp_path / "tree", {"eth0": [40, 41], "ib0": [50]})
    shutil.rmtree(tree / "proc/irq/41")  # an interrupt that went away: refused, not fatal
    data = tmp_path / "irq.conf"
    data.write_text(
        "# layout: tag\nlog-as\tgt-irq\n# irq.pin: eth0\npin\teth0\t0-3\n# irq.pin: ib0\npin\tib0\t4,6\n"
        "# irq.pin: lo\npin\tlo\t1\n# irq.pin: gone\npin\tgone0\t1\n"
    )
    env_path = make_bin(tmp_path, {"systemctl": "exit 1\n"})
    result = subprocess.run(
        [str(SCRIPTS / "irq-affinity"), str(data)],
        capture_output=True,
        text=True,
        check=False,
        env={"PATH": str(env_path), "TEST_SYSROOT": str(tree), "LC_ALL": "C"},
    )
    assert result.returncode == 0, result.stdout
    assert (tree / "proc/irq/40/smp_affinity_list").read_text() == "0-3\n"
    assert (tree / "proc/irq/50/smp_affinity_list").read_text() == "4,6\n"
    assert "gt-irq: eth0: 1 interrupts pinned to CPUs 0-3; 1 refused" in result.stdout
    assert "gt-irq: ib0: 1 interrupts pinned to CPUs 4,6; 0 refused" in result.stdout
    assert "gt-irq: lo: no MSI interrupts" in result.stdout
    assert "gt-irq: gone0: no such interface; skipped" in result.stdout
    assert "irqbalance" not in result.stdout


@pytest.mark.parametrize(
    "line", ["pin\teth0\t0-3; reboot", "pin\t../../x\t1", "pin\teth0", "unpin\teth0\t1"]
)
def test_irq_affinity_refuses_bad_data_and_pins_nothing(tmp_path: Path, line: str) -> None:
    tree = fake_tree(tmp_path / "tree", {"eth0": [40]})
    data = tmp_path / "irq.conf"
    data.write_text(f"pin\teth0\t0-3\n{line}\n")
    result = subprocess.run(
        [str(SCRIPTS / "irq-affinity"), str(data)],
        capture_output=True,
        text=True,
        check=False,
        env={"PATH": str(make_bin(tmp_path, {})), "TEST_SYSROOT": str(tree)},
    )
    assert result.returncode == 2
    assert "line 2" in result.stdout
    assert (tree / "proc/irq/40/smp_affinity_list").read_text() == "0-127\n"


# --- install.sh --root never reaches outside the image -------------------------------------------


def install(
    tmp_path: Path, root: Path, bundle: Path | None = None
) -> subprocess.CompletedProcess[str]:
    bundle = bundle or bundle_for(tmp_path, full_plan())
    return run(bundle / "install.sh", "--root", str(root), path=make_bin(tmp_path, {}))


def tree_of(directory: Path) -> list[str]:
    return sorted(str(p.relative_to(directory)) for p in directory.rglob("*"))


@pytest.mark.parametrize("link", ["etc/sysctl.d", "usr/local/libexec/goldtune", "etc"])
def test_a_relative_link_that_climbs_out_of_the_image_is_refused(tmp_path: Path, link: str) -> None:
    outside = tmp_path / "outside"
    outside.mkdir()
    root = tmp_path / "image"
    (root / link).parent.mkdir(parents=True)
    (root / link).symlink_to(os.path.relpath(outside, (root / link).parent))
    result = install(tmp_path, root)
    assert result.returncode == 1
    assert "symbolic link that leaves the image" in result.stderr
    assert tree_of(outside) == []


def test_a_relative_link_inside_the_image_is_followed_inside_it(tmp_path: Path) -> None:
    root = tmp_path / "image"
    (root / "usr/etc").mkdir(parents=True)
    (root / "etc").symlink_to("usr/etc")
    result = install(tmp_path, root)
    assert result.returncode == 0, result.stderr
    assert (root / "usr/etc/sysctl.d/90-goldtune.conf").is_file()


def test_a_planted_temporary_name_is_not_written_through(tmp_path: Path) -> None:
    victim = tmp_path / "host-file"
    victim.write_text("keep")
    root = tmp_path / "image"
    (root / "etc/sysctl.d").mkdir(parents=True)
    for name in ("90-goldtune.conf.goldtune-new", ".90-goldtune.conf.XXXXXX"):
        (root / "etc/sysctl.d" / name).symlink_to(victim)
    result = install(tmp_path, root)
    assert result.returncode == 0, result.stderr
    assert victim.read_text() == "keep"
    assert not (root / "etc/sysctl.d/90-goldtune.conf").is_symlink()


def test_a_forged_install_record_never_deletes_through_a_link(tmp_path: Path) -> None:
    host = tmp_path / "host/etc"
    host.mkdir(parents=True)
    (host / "goldtune-precious").write_text("keep")
    root = tmp_path / "image"
    (root / "var/lib/goldtune").mkdir(parents=True)
    (root / "etc").mkdir()
    (root / "etc/escape-goldtune").symlink_to(os.path.relpath(host, root / "etc"))
    (root / "var/lib/goldtune/installed-files").write_text(
        "/etc/escape-goldtune/goldtune-precious\n/etc/../../host/etc/goldtune-precious\n$(reboot)\n/bin/sh\n"
    )
    result = install(tmp_path, root)
    assert (host / "goldtune-precious").read_text() == "keep"
    assert result.returncode == 1
    assert "symbolic link that leaves the image" in result.stderr


def test_a_malformed_install_record_is_reported_and_fails_the_run(tmp_path: Path) -> None:
    root = tmp_path / "image"
    (root / "var/lib/goldtune").mkdir(parents=True)
    (root / "bin").mkdir()
    (root / "bin/sh").write_text("keep")
    (root / "var/lib/goldtune/installed-files").write_text("/bin/sh\n../x\n")
    result = install(tmp_path, root)
    assert result.returncode == 1
    assert (root / "bin/sh").read_text() == "keep"
    assert (
        "line 1 of the install record" in result.stdout
        and "line 2 of the install record" in result.stdout
    )
    assert "/bin/sh" not in result.stdout.replace("/var/lib", "")


def test_a_record_that_is_a_link_is_not_read(tmp_path: Path) -> None:
    secret = tmp_path / "secret"
    secret.write_text("/etc/sysctl.d/90-goldtune-secret.conf\n")
    root = tmp_path / "image"
    (root / "var/lib/goldtune").mkdir(parents=True)
    (root / "var/lib/goldtune/installed-files").symlink_to(secret)
    result = install(tmp_path, root)
    assert result.returncode == 1
    assert "is not a plain file" in result.stdout
    assert "secret" not in result.stdout


def test_a_directory_where_a_file_goes_fails_loudly(tmp_path: Path) -> None:
    root = tmp_path / "image"
    (root / "etc/sysctl.d/90-goldtune.conf").mkdir(parents=True)
    result = install(tmp_path, root)
    assert result.returncode == 1
    assert "is a directory where the file /etc/sysctl.d/90-goldtune.conf goes" in result.stderr
    assert tree_of(root / "etc/sysctl.d") == ["90-goldtune.conf"]


def test_die_does_not_print_its_exit_status(tmp_path: Path) -> None:
    result = install(tmp_path, tmp_path / "nonexistent")
    assert result.returncode == 2
    assert result.stderr.rstrip().endswith(f"no such directory: {tmp_path / 'nonexistent'}")


@pytest.mark.parametrize(
    "line",
    [
        "file\t0644\t/etc/../x",
        "file\t644\t/etc/x",
        "service\tstart\tx.service",
        "step\tsh -c reboot",
        "text\t/etc/x\t$(reboot)",
        'kernel-arg\ta"b',
    ],
)
def test_install_sh_refuses_a_bad_install_list_and_writes_nothing(
    tmp_path: Path, line: str
) -> None:
    bundle = bundle_for(tmp_path, full_plan())
    with (bundle / "install.list").open("a") as handle:
        handle.write(line + "\n")
    root = tmp_path / "image"
    root.mkdir()
    result = install(tmp_path, root, bundle)
    assert result.returncode == 2
    assert "install.list: line" in result.stderr
    assert tree_of(root) == []


def test_install_sh_may_remove_the_daemon_json_it_installed() -> None:
    """daemon.json is the one overlay file without the tool's name in its path: install.sh's
    stale_candidate names it, or a bundle that drops containers: docker fails on its record."""
    install_sh = (templates_dir() / layout.SCRIPTS_DIR / "install.sh").read_text()
    candidates = install_sh.split("stale_candidate() {", 1)[1].split("\n}\n", 1)[0]
    assert f"{layout.DOCKER_DAEMON_JSON})" in candidates
