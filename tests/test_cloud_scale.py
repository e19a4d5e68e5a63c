"""cloud-init at cloud scale (issue 13): gzip and MIME forms, the collector left out of first-boot
delivery, per-provider size limits, and composition with a team's cloud-config, judged by
cloud-init's own code (UserDataProcessor, the cloud-config part handler, `devel make-mime`)."""

from __future__ import annotations

import gzip
import hashlib
import json
import os
import shutil
import subprocess
from pathlib import Path

import pytest
import yaml
from click.testing import CliRunner

from generator import cli
from generator.model import layout
from generator.render import budgets, cloudinit, gzipforms, providers
from generator.render.cloudinit import CloudInitOptions
from generator.render.render import render_bundle
from tests.conftest import REPO
from tests.plans import plan_without

SYSTEM_PYTHON = "/usr/bin/python3"
MERGE = REPO / "tests" / "validators" / "cloudinit_merge.py"
EC2_LIMIT = 16 * 1024

needs_cloud_init = pytest.mark.skipif(
    shutil.which("cloud-init") is None or not Path(SYSTEM_PYTHON).exists(),
    reason="cloud-init is not installed",
)

TEAM = """#cloud-config
write_files:
  - path: /etc/team.conf
    content: "ours\\n"
runcmd:
  - echo team
"""
TEAM_MERGING = TEAM + f'merge_how: "{cloudinit.MERGE_HOW}"\n'


@pytest.fixture(scope="module")
def shipped(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """Every shipped system x profile, as `gen matrix` writes them."""
    root = tmp_path_factory.mktemp("shipped")
    result = CliRunner().invoke(
        cli.main, ["matrix", "--all-systems", "--all-profiles", "-o", str(root)]
    )
    assert result.exit_code == 0, result.output
    return root


@pytest.fixture(scope="module")
def bundle(shipped: Path) -> Path:
    return shipped / "dgx-h100-inference"


def merged(path: Path) -> dict:
    """The cloud-config cloud-init builds from this user-data at first boot."""
    result = subprocess.run(
        [SYSTEM_PYTHON, str(MERGE), str(path)], capture_output=True, text=True, timeout=60
    )
    assert result.returncode == 0, result.stderr
    return json.loads(result.stdout)


def make_mime(out: Path, *parts: Path) -> Path:
    args = [a for part in parts for a in ("-a", f"{part}:cloud-config")]
    result = subprocess.run(
        ["cloud-init", "devel", "make-mime", *args], capture_output=True, timeout=60
    )
    assert result.returncode == 0, result.stderr
    out.write_bytes(result.stdout)
    return out


def paths_written(config: dict) -> set[str]:
    return {entry["path"] for entry in config.get("write_files", [])}


def test_every_shipped_bundle_fits_ec2_compressed(shipped: Path) -> None:
    sizes = {}
    for bundle_dir in sorted(shipped.iterdir()):
        compressed = (bundle_dir / layout.USER_DATA_GZ).stat().st_size
        manifest = json.loads((bundle_dir / layout.MANIFEST).read_text())
        assert manifest["user_data"]["bytes"][layout.USER_DATA_GZ] == compressed
        assert layout.USER_DATA_GZ in manifest["user_data"]["fits"]["ec2"]
        sizes[bundle_dir.name] = compressed
    assert len(sizes) >= 32
    assert max(sizes.values()) <= EC2_LIMIT, sizes


def test_a_docker_bundle_with_kubernetes_fits_ec2_compressed(tmp_path: Path) -> None:
    """No shipped profile uses docker, whose first-boot script also carries install.sh's
    install_file and merge_daemon_json (daemon.json merged); with Kubernetes on dgx-h100 it is
    the largest user-data we know of (16019 bytes when this test was written)."""
    profile = tmp_path / "training-k8s-docker.yaml"
    profile.write_text("extends: training-k8s\ncontainers: docker\n")
    out = tmp_path / "bundle"
    result = CliRunner().invoke(
        cli.main, ["--hw", "dgx-h100", "--profile", str(profile), "-o", str(out)]
    )
    assert result.exit_code == 0, result.output
    assert (out / "rootfs" / layout.DOCKER_DAEMON_JSON.lstrip("/")).is_file()
    assert (out / layout.USER_DATA_GZ).stat().st_size <= EC2_LIMIT


def test_the_compressed_form_is_the_user_data_and_reproducible(bundle: Path) -> None:
    plain = (bundle / layout.USER_DATA).read_bytes()
    packed = (bundle / layout.USER_DATA_GZ).read_bytes()
    assert gzip.decompress(packed) == plain
    mime = (bundle / layout.USER_DATA_MIME).read_bytes()
    assert packed == gzipforms.compressed_forms(plain, mime)[0]  # no timestamp in the header
    assert packed[4:8] == b"\0\0\0\0"


def test_the_collector_is_not_delivered_at_first_boot(bundle: Path) -> None:
    config = yaml.safe_load((bundle / layout.USER_DATA).read_text())
    written = paths_written(config)
    assert layout.COLLECT_SCRIPT not in written and layout.COLLECT_DATA not in written
    assert layout.GPU_SCRIPT in written
    # install.sh still installs it into images, for gen verify --snapshot
    assert layout.COLLECT_SCRIPT in (bundle / layout.INSTALL_LIST).read_text()


def test_the_providers_limits_and_which_forms_they_take(bundle: Path) -> None:
    manifest = json.loads((bundle / layout.MANIFEST).read_text())
    fits = manifest["user_data"]["fits"]
    assert set(fits["ec2"]) == layout.GZIP_FORMS  # the plain forms are over 16 KB
    assert not layout.GZIP_FORMS & set(fits["gcp"])  # a metadata value is text
    assert set(fits["azure"]) == set(layout.USER_DATA_FORMS)


def test_size_warnings_name_each_provider_over_its_limit() -> None:
    sizes = {"bytes": {layout.USER_DATA: 70000}, "parts": []}
    lines = budgets.budget_warnings(sizes, b"", (), ())
    assert [line.split(":")[0] for line in lines] == [
        "cloud-init user-data does not fit ec2",
        "cloud-init user-data does not fit azure",
    ]
    assert "16384" in lines[0] and "65535" in lines[1]


def test_gen_warns_on_stderr_when_no_form_fits(tmp_path: Path, monkeypatch) -> None:
    tiny = providers.ProviderLimit("ec2", 100, True, "a test limit")
    limits = (tiny, *providers.PROVIDER_LIMITS[1:])
    monkeypatch.setattr(providers, "PROVIDER_LIMITS", limits)
    result = CliRunner().invoke(
        cli.main, ["--hw", "l4-inference", "--profile", "inference", "-o", str(tmp_path / "b")]
    )
    assert result.exit_code == 0, result.output
    assert "warning: cloud-init user-data does not fit ec2" in result.stderr
    assert "azure" not in result.stderr and "gcp" not in result.stderr
    manifest = json.loads((tmp_path / "b" / layout.MANIFEST).read_text())
    assert manifest["user_data"]["fits"]["ec2"] == []


def test_gen_is_quiet_when_every_provider_has_a_form(tmp_path: Path) -> None:
    result = CliRunner().invoke(
        cli.main, ["--hw", "dgx-b200", "--profile", "training-k8s", "-o", str(tmp_path / "b")]
    )
    assert result.exit_code == 0, result.output
    assert "warning" not in result.stderr


@needs_cloud_init
def test_compressed_and_mime_forms_give_cloud_init_the_same_config(bundle: Path) -> None:
    plain = merged(bundle / layout.USER_DATA)
    assert merged(bundle / layout.USER_DATA_GZ) == plain
    assert merged(bundle / layout.USER_DATA_MIME) == plain
    assert "merge_how" not in plain  # the part handler takes it out
    assert layout.GPU_SCRIPT in paths_written(plain)


@needs_cloud_init
def test_the_mime_form_with_other_bytes_still_reaches_cloud_init(tmp_path: Path) -> None:
    text = '#cloud-config\nruncmd:\n  - echo "GPU → ready"\n'.encode()
    part = tmp_path / "part.mime"
    part.write_bytes(cloudinit.mime_user_data(text))
    assert merged(part)["runcmd"] == ['echo "GPU → ready"']


@needs_cloud_init
@pytest.mark.parametrize("order", ["team-first", "goldtune-first"])
def test_composes_with_a_team_cloud_config(bundle: Path, tmp_path: Path, order: str) -> None:
    team = tmp_path / "team.yaml"
    team.write_text(TEAM_MERGING)
    ours = bundle / layout.USER_DATA
    parts = (team, ours) if order == "team-first" else (ours, team)
    config = merged(make_mime(tmp_path / "user-data", *parts))
    alone = merged(ours)
    assert paths_written(config) == paths_written(alone) | {"/etc/team.conf"}
    assert len(config["runcmd"]) == len(alone["runcmd"]) + 1


@needs_cloud_init
def test_our_part_last_keeps_a_team_part_without_merge_how(bundle: Path, tmp_path: Path) -> None:
    team = tmp_path / "team.yaml"
    team.write_text(TEAM)
    config = merged(make_mime(tmp_path / "user-data", team, bundle / layout.USER_DATA))
    assert "/etc/team.conf" in paths_written(config)
    assert layout.GPU_SCRIPT in paths_written(config)


@needs_cloud_init
def test_a_later_part_without_merge_how_replaces_ours(bundle: Path, tmp_path: Path) -> None:
    """What the README warns of: cloud-init merges a part with that part's own mergers."""
    team = tmp_path / "team.yaml"
    team.write_text(TEAM)
    config = merged(make_mime(tmp_path / "user-data", bundle / layout.USER_DATA, team))
    assert paths_written(config) == {"/etc/team.conf"}


@needs_cloud_init
def test_a_composed_compressed_delivery_fits_ec2(bundle: Path, tmp_path: Path) -> None:
    """Our 7bit MIME form, as shipped gzip-compressed: under 16 KB; make-mime's base64 of the
    same text with a team part, compressed, is larger even at level 9 (why the MIME form is not
    base64)."""
    assert (bundle / layout.USER_DATA_MIME_GZ).stat().st_size <= EC2_LIMIT
    ours = (bundle / layout.USER_DATA_MIME).read_bytes()
    team = tmp_path / "team.yaml"
    team.write_text(TEAM_MERGING)
    theirs = make_mime(tmp_path / "base64", team, bundle / layout.USER_DATA).read_bytes()
    assert len(gzip.compress(theirs, 9)) > len(gzip.compress(ours, 9))


# --- gen --cloud-init-reboot -----------------------------------------------------------------


def reboot_bundle(tmp_path: Path, *flags: str, hw: str = "dgx-h100") -> Path:
    out = tmp_path / "reboot"
    result = CliRunner().invoke(
        cli.main, ["--hw", hw, "--profile", "inference", "-o", str(out), *flags]
    )
    assert result.exit_code == 0, result.output
    return out


def test_power_state_only_when_asked(bundle: Path, tmp_path: Path) -> None:
    assert "power_state" not in yaml.safe_load((bundle / layout.USER_DATA).read_text())
    config = yaml.safe_load(
        (reboot_bundle(tmp_path, "--cloud-init-reboot") / layout.USER_DATA).read_text()
    )
    assert config["power_state"] == {
        "mode": "reboot",
        "delay": "now",
        "message": "goldtune: rebooting so that the kernel arguments take effect",
        "condition": ["test", "-e", layout.REBOOT_MARKER],
    }


def test_no_power_state_without_kernel_arguments(tmp_path: Path) -> None:
    """A plan with no kernel argument has nothing a reboot would bring in."""
    files = render_bundle(plan_without("kernel-arg"), CloudInitOptions(reboot=True))
    assert "power_state" not in yaml.safe_load(files[layout.USER_DATA][0])
    assert "the plan has no kernel argument: no reboot" in files[layout.EXPLAIN][0].decode()


@pytest.mark.skipif(shutil.which("cloud-init") is None, reason="cloud-init is not installed")
def test_power_state_passes_cloud_init_schema(tmp_path: Path) -> None:
    user_data = reboot_bundle(tmp_path, "--cloud-init-reboot") / layout.USER_DATA
    result = subprocess.run(
        ["cloud-init", "schema", "--config-file", str(user_data)],
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert result.returncode == 0, result.stdout + result.stderr
    broken = tmp_path / "broken.yaml"
    broken.write_text(user_data.read_text().replace('mode: "reboot"', 'mode: "restart"'))
    result = subprocess.run(
        ["cloud-init", "schema", "--config-file", str(broken)],
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert result.returncode != 0  # the schema does judge power_state


# The bootloader marker (power_state's condition) is tested where the first-boot script runs in
# a root of its own: tests/test_first_boot.py.


# --- gen --cloud-init-part: the composed delivery ------------------------------------------


def composed_bundle(tmp_path: Path, *parts: Path) -> Path:
    out = tmp_path / "composed"
    args = [a for part in parts for a in ("--cloud-init-part", str(part))]
    result = CliRunner().invoke(
        cli.main, ["--hw", "dgx-b200", "--profile", "training-k8s", "-o", str(out), *args]
    )
    assert result.exit_code == 0, result.output
    return out


@needs_cloud_init
def test_a_team_part_without_merge_how_composes_and_fits_ec2(tmp_path: Path) -> None:
    """The team's part first, ours last with its merge_how: nothing of either is dropped, and
    the compressed composition of the largest shipped bundle fits EC2."""
    team = tmp_path / "team.yaml"
    team.write_text(TEAM)
    bundle_dir = composed_bundle(tmp_path, team)
    config = merged(bundle_dir / layout.USER_DATA_MIME_GZ)
    alone = merged(bundle_dir / layout.USER_DATA)
    assert paths_written(config) == paths_written(alone) | {"/etc/team.conf"}
    assert config["runcmd"] == ["echo team", *alone["runcmd"]]
    packed = (bundle_dir / layout.USER_DATA_MIME_GZ).read_bytes()
    assert gzip.decompress(packed) == (bundle_dir / layout.USER_DATA_MIME).read_bytes()
    assert len(packed) <= EC2_LIMIT
    manifest = json.loads((bundle_dir / layout.MANIFEST).read_text())
    assert manifest["user_data"]["parts"] == [hashlib.sha256(TEAM.encode()).hexdigest()]
    assert layout.USER_DATA_MIME_GZ in manifest["user_data"]["fits"]["ec2"]


@pytest.mark.parametrize(
    ("content", "message"),
    [
        (b"runcmd: []\n", "a part is a cloud-config (a #cloud-config line first)"),
        (b"#cloud-config\n- a list\n", "a cloud-config is a YAML mapping"),
        (b"#cloud-config\nruncmd: [\n", "not valid YAML"),
        (b"#cloud-config\n\xff\n", "not UTF-8 text"),
        (f"#cloud-config\n--{cloudinit.MIME_BOUNDARY}\n".encode(), "the MIME form's boundary"),
    ],
)
def test_a_bad_team_part_is_one_line_exit_2_nothing_written(
    tmp_path: Path, content: bytes, message: str
) -> None:
    part = tmp_path / "team.yaml"
    part.write_bytes(content)
    out = tmp_path / "out"
    result = CliRunner().invoke(
        cli.main,
        [
            "--hw",
            "l4-inference",
            "--profile",
            "inference",
            "-o",
            str(out),
            "--cloud-init-part",
            str(part),
        ],
    )
    assert result.exit_code == 2, result.output
    lines = result.stderr.strip().splitlines()
    assert len(lines) == 1 and str(part) in lines[0] and message in lines[0], lines
    assert "a list" not in result.stderr  # the file's text is never echoed
    assert not out.exists()


def test_a_team_part_that_is_a_fifo_is_refused(tmp_path: Path) -> None:
    fifo = tmp_path / "team.yaml"
    os.mkfifo(fifo)
    result = CliRunner().invoke(
        cli.main,
        [
            "--hw",
            "l4-inference",
            "--profile",
            "inference",
            "-o",
            str(tmp_path / "o"),
            "--cloud-init-part",
            str(fifo),
        ],
    )
    assert result.exit_code == 2 and "FIFO" in result.stderr
