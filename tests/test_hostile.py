"""Hostile inputs, bundles, snapshots and images (issue 11): each case was reproduced on main as a
traceback, a hang, a leak of a file's content or a read outside the bundle.

Everything hostile is built in a temporary directory; nothing here reads or changes this
machine's /etc beyond naming /etc/hostname as a link target that must never be followed.
"""

from __future__ import annotations

import hashlib
import json
import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from generator.bundle.read import read_bundle
from generator.errors import InputError
from generator.foreign import (
    EscapesRootError,
    TooManyLinksError,
    read_beneath,
    read_foreign,
    resolve_within,
)
from tests.conftest import MINIMAL_HW, REPO

SECRET = "root:$6$s3cr3t-hash$QQQQQQQQ:19000:0:99999:7:::\ndaemon:*:19000:0:99999:7:::\n"


Result = subprocess.CompletedProcess[str]


def gen(*args: str, cwd: Path | None = None, timeout: float = 60) -> Result:
    env = {**os.environ, "PYTHONPATH": str(REPO)}
    return subprocess.run(
        [sys.executable, "-m", "generator", *args],
        capture_output=True,
        text=True,
        env=env,
        timeout=timeout,
        cwd=cwd,
    )


def check_hw(hw: Path) -> Result:
    return gen("check", "--hw", str(hw), "--profile", "inference")


def check_profile(profile: Path | str, cwd: Path | None = None) -> Result:
    return gen("check", "--hw", "l4-inference", "--profile", str(profile), cwd=cwd)


def assert_one_line_exit_2(result: subprocess.CompletedProcess[str], needle: str) -> str:
    assert result.returncode == 2, result.stdout + result.stderr
    assert "Traceback" not in result.stderr
    lines = result.stderr.strip().splitlines()
    assert len(lines) == 1, result.stderr
    assert needle in lines[0], lines[0]
    return lines[0]


# --- item 7: only regular files, never a hang -----------------------------------------------------


@pytest.fixture
def fifo(tmp_path: Path) -> Path:
    path = tmp_path / "fifo.yaml"
    os.mkfifo(path)
    return path


def test_fifo_as_hardware_does_not_hang(fifo: Path, tmp_path: Path):
    result = gen("--hw", str(fifo), "--profile", "inference", "-o", str(tmp_path / "b"), timeout=20)
    assert_one_line_exit_2(result, f"{fifo}: is a FIFO, expected a regular file")
    assert not (tmp_path / "b").exists()


def test_fifo_as_extends_parent_does_not_hang(fifo: Path, tmp_path: Path):
    profile = tmp_path / "p.yaml"
    profile.write_text(f"extends: {fifo}\nintent: training\n")
    result = gen("check", "--hw", "l4-inference", "--profile", str(profile), timeout=20)
    assert_one_line_exit_2(result, "is a FIFO")


def test_fifo_as_snapshot_does_not_hang(fifo: Path, tmp_path: Path):
    bundle = tmp_path / "bundle"
    assert gen("--hw", "l4-inference", "--profile", "inference", "-o", str(bundle)).returncode == 0
    result = gen("verify", str(bundle), "--snapshot", str(fifo), timeout=20)
    assert_one_line_exit_2(result, "is a FIFO")


def test_dev_zero_and_a_huge_snapshot_are_refused(tmp_path: Path):
    with pytest.raises(InputError, match="is a character device"):
        read_foreign(Path("/dev/zero"), 1024)
    huge = tmp_path / "huge.log"
    with huge.open("wb") as handle:  # sparse: the size is checked before anything is read
        handle.truncate(1536 * 1024 * 1024)
    with pytest.raises(InputError, match="larger than 64 MiB"):
        from generator.verify.run import read_snapshot

        read_snapshot(huge)


def test_a_file_that_grows_past_the_cap_is_refused(tmp_path: Path):
    """The cap counts the bytes really read, not only the size fstat reported."""
    path = tmp_path / "f"
    path.write_bytes(b"x" * 100)
    assert read_foreign(path, 100) == b"x" * 100
    with pytest.raises(InputError, match="larger than"):
        read_foreign(path, 99)


def test_read_beneath_never_follows_a_link(tmp_path: Path):
    root = tmp_path / "bundle"
    (root / "rootfs").mkdir(parents=True)
    (root / "rootfs" / "etc").symlink_to("/etc")
    (root / "plain").write_text("ok")
    (root / "link").symlink_to("plain")
    assert read_beneath(root, "plain", 10) == b"ok"
    with pytest.raises(InputError, match="symbolic link"):
        read_beneath(root, "link", 10)
    with pytest.raises(InputError, match="symbolic link"):
        read_beneath(root, "rootfs/etc/hostname", 1024)
    with pytest.raises(InputError, match="plain relative path"):
        read_beneath(root, "../bundle/plain", 10)


# --- item 6: no tracebacks ----------------------------------------------------------------------

HW_WITH = "cpu: {{vendor: intel, sockets: 1, cores_per_socket: 4}}\nmemory_gib: {}\n"


@pytest.mark.parametrize(
    "value,needle",
    [
        ("!!bool maybe", "line 2, column 13: invalid YAML: not a valid !!bool value"),
        ("!!int abc", "not a valid !!int value"),
        ("!!float abc", "not a valid !!float value"),
        ("!!timestamp notadate", "not a valid !!timestamp value"),
        ("9" * 5000, "not a valid !!int value"),
        ("!!int 0x", "not a valid !!int value"),
        (
            "!!int ''",
            "not a valid !!int value",
        ),  # an IndexError, found by tests/test_hostile_fuzz.py
    ],
)
def test_tagged_scalars_that_do_not_parse_are_one_line(tmp_path: Path, value: str, needle: str):
    hw = tmp_path / "hw.yaml"
    hw.write_text(HW_WITH.format(value))
    assert_one_line_exit_2(gen("check", "--hw", str(hw), "--profile", "inference"), needle)


@pytest.mark.parametrize("which", ["hw", "profile"])
def test_name_null_is_one_line(tmp_path: Path, which: str):
    path = tmp_path / f"{which}.yaml"
    path.write_text("name: null\n" + (MINIMAL_HW if which == "hw" else "intent: training\n"))
    args = (
        ["--hw", str(path), "--profile", "inference"]
        if which == "hw"
        else ["--hw", "l4-inference", "--profile", str(path)]
    )
    assert_one_line_exit_2(gen("check", *args), f"{path}: name: is empty (null)")


# --- item 3: never echo a foreign file ----------------------------------------------------------


def test_extends_a_password_file_echoes_none_of_it(tmp_path: Path):
    secrets = tmp_path / "shadow"
    secrets.write_text(SECRET)
    profile = tmp_path / "p.yaml"
    profile.write_text(f"extends: {secrets}\nintent: training\n")
    line = assert_one_line_exit_2(
        gen("check", "--hw", "l4-inference", "--profile", str(profile)),
        "not a goldtune input of this kind",
    )
    assert "s3cr3t" not in line and "daemon" not in line and "19000" not in line


def test_hw_symlinked_to_a_password_file_echoes_none_of_it(tmp_path: Path):
    secrets = tmp_path / "shadow"
    secrets.write_text(SECRET)
    (tmp_path / "hw.yaml").symlink_to(secrets)
    result = gen("check", "--hw", str(tmp_path / "hw.yaml"), "--profile", "inference")
    line = assert_one_line_exit_2(result, "not a goldtune input of this kind")
    assert "s3cr3t" not in result.stdout + result.stderr and "daemon" not in line


def test_many_unknown_fields_are_one_line_of_short_keys(tmp_path: Path):
    keys = "".join(f"key{index}_{'x' * 200}: 1\n" for index in range(20))
    hw = tmp_path / "hw.yaml"
    hw.write_text(MINIMAL_HW + keys)
    line = assert_one_line_exit_2(check_hw(hw), "20 unknown fields")
    assert len(line) < 300, line


def test_a_key_with_escape_sequences_is_escaped(tmp_path: Path):
    hw = tmp_path / "hw.yaml"
    hw.write_text(MINIMAL_HW + '"\\e]0;pwned\\a\\e[2J": 1\n')
    line = assert_one_line_exit_2(check_hw(hw), "unknown field")
    assert "\x1b" not in line and "\\x1b]0;pwned\\x07" in line


# --- item 4: diff checks the bundle first, never follows a link out of it ------------------------


@pytest.fixture(scope="module")
def clean_bundle(tmp_path_factory: pytest.TempPathFactory) -> Path:
    bundle = tmp_path_factory.mktemp("diff") / "clean"
    assert gen("--hw", "l4-inference", "--profile", "inference", "-o", str(bundle)).returncode == 0
    return bundle


def tampered_copy(clean: Path, tmp_path: Path) -> Path:
    """A copy whose rootfs/etc is a link to a directory outside it with the same file names."""
    copy = tmp_path / "tampered"
    shutil.copytree(clean, copy, symlinks=True)
    outside = tmp_path / "outside"
    shutil.copytree(copy / "rootfs" / "etc", outside)
    for path in outside.rglob("*.conf"):
        path.write_text("HOST-SECRET-CONTENT\n")
    shutil.rmtree(copy / "rootfs" / "etc")
    (copy / "rootfs" / "etc").symlink_to(outside)
    return copy


@pytest.mark.parametrize("output_format", ["terminal", "markdown", "json"])
def test_diff_of_a_bundle_with_a_linked_directory_prints_nothing_from_outside(
    clean_bundle: Path, tmp_path: Path, output_format: str
):
    copy = tampered_copy(clean_bundle, tmp_path)
    result = gen("diff", "--format", output_format, str(clean_bundle), str(copy))
    assert result.returncode == 2, result.stdout + result.stderr
    assert "HOST-SECRET-CONTENT" not in result.stdout + result.stderr
    assert result.stdout == ""
    assert "does not match the bundle's manifest.json" in result.stderr
    assert "Traceback" not in result.stderr


def test_a_manifest_entry_reached_through_a_link_is_tampered(clean_bundle: Path, tmp_path: Path):
    copy = tampered_copy(clean_bundle, tmp_path)
    # even with the manifest rewritten to match the outside files, the link itself is tampering
    manifest = json.loads((copy / "manifest.json").read_text())
    for entry in manifest["files"]:
        if entry["path"].startswith("rootfs/etc/") and entry["path"].endswith(".conf"):
            entry["sha256"] = hashlib.sha256(b"HOST-SECRET-CONTENT\n").hexdigest()
    (copy / "manifest.json").write_text(json.dumps(manifest))
    bundle = read_bundle(copy)
    assert "rootfs/etc" in bundle.unlisted
    assert any(path.startswith("rootfs/etc/") for path in bundle.tampered)


# --- item 2: verify --root never runs the image's shell code ------------------------------------


def grub_image(root: Path, files: dict[str, str]) -> Path:
    for path, text in files.items():
        target = root / path.lstrip("/")
        target.parent.mkdir(parents=True, exist_ok=True)
        target.write_text(text)
    return root


def kernel_arg_check(tmp_path: Path, files: dict[str, str]):  # type: ignore[no-untyped-def]
    from generator.model.setting import Setting
    from generator.verify.image_cmdline import check_kernel_arg
    from generator.verify.imagefs import Image

    image = Image(grub_image(tmp_path / "image", files))
    setting = Setting("kernel-arg", "iommu", "pt", "because", rule="test.boot")
    return check_kernel_arg(setting, image)


OUR_DROPIN = (
    'GRUB_CMDLINE_LINUX_DEFAULT="'
    '${GRUB_CMDLINE_LINUX_DEFAULT:+$GRUB_CMDLINE_LINUX_DEFAULT }iommu=pt"\n'
)


@pytest.mark.parametrize(
    "payload",
    [
        'GRUB_CMDLINE_LINUX_DEFAULT="$(touch {marker})"\n',
        "GRUB_CMDLINE_LINUX=`touch {marker}`\n",
        "touch {marker}; GRUB_CMDLINE_LINUX=x\n",
        'GRUB_CMDLINE_LINUX="${{X:-$(touch {marker})}}"\n',
        "while :; do :; done\nGRUB_CMDLINE_LINUX=x\n",  # looped forever under sh: TimeoutExpired
        'if touch {marker}; then GRUB_CMDLINE_LINUX_DEFAULT="iommu=pt"; fi\n',
        ". /dev/stdin\n",
    ],
)
def test_root_never_executes_grub_files_and_says_what_it_could_not_judge(
    tmp_path: Path, payload: str
):
    from generator.verify.verdicts import Verdict

    marker = tmp_path / "PWNED"
    files = {
        "/etc/default/grub": 'GRUB_CMDLINE_LINUX_DEFAULT="quiet"\n',
        "/etc/default/grub.d/50-evil.cfg": payload.format(marker=marker),
        "/etc/default/grub.d/90-goldtune.cfg": OUR_DROPIN,
    }
    check = kernel_arg_check(tmp_path, files)
    assert not marker.exists(), "the image's shell code ran on the host"
    assert check.verdict == Verdict.NOT_JUDGED, check
    where = "/etc/default/grub.d/50-evil.cfg: line "
    assert f"{where}1" in check.reason or f"{where}2" in check.reason, check.reason


@pytest.mark.parametrize(
    "files,verdict",
    [
        (
            {
                "/etc/default/grub": 'GRUB_CMDLINE_LINUX_DEFAULT="quiet"\nGRUB_CMDLINE_LINUX=""\n',
                "/etc/default/grub.d/90-goldtune.cfg": OUR_DROPIN,
            },
            "ok",
        ),
        ({"/etc/default/grub.d/90-goldtune.cfg": OUR_DROPIN}, "ok"),  # no /etc/default/grub at all
        (
            {
                "/etc/default/grub": (
                    "GRUB_DISTRIBUTOR=`lsb_release -i -s 2> /dev/null || echo Debian`\n"
                    "GRUB_CMDLINE_LINUX_DEFAULT='quiet'  # a comment\n"
                    "export GRUB_CMDLINE_LINUX_DEFAULT\n"
                ),
                "/etc/default/grub.d/90-goldtune.cfg": OUR_DROPIN,
            },
            "ok",
        ),  # Debian's backticks: not ours
        ({"/etc/default/grub": 'GRUB_CMDLINE_LINUX="${GRUB_CMDLINE_LINUX} iommu=pt"\n'}, "ok"),
        ({"/etc/default/grub": 'GRUB_CMDLINE_LINUX="$GRUB_CMDLINE_LINUX iommu=off"\n'}, "differs"),
        (
            {
                "/etc/default/grub.d/90-goldtune.cfg": OUR_DROPIN,
                "/etc/default/grub.d/99-local.cfg": 'GRUB_CMDLINE_LINUX_DEFAULT="quiet"\n',
            },
            "missing",
        ),
        # bash only (grub-mkconfig's sh fails), and a variable set outside these files
        ({"/etc/default/grub": 'GRUB_CMDLINE_LINUX+=" iommu=pt"\n'}, "not-judged"),
        ({"/etc/default/grub": 'GRUB_CMDLINE_LINUX="$MY_ARGS"\n'}, "not-judged"),
    ],
)
def test_root_reads_grub_assignments_as_data(tmp_path: Path, files: dict[str, str], verdict: str):
    assert str(kernel_arg_check(tmp_path, files).verdict) == verdict


def test_root_with_a_fifo_as_grub_file_does_not_hang(tmp_path: Path):
    image = grub_image(tmp_path / "image", {"/etc/default/grub.d/90-goldtune.cfg": OUR_DROPIN})
    os.mkfifo(image / "etc/default/grub")
    os.mkfifo(image / "etc/default/grub.d/50-fifo.cfg")
    assert str(kernel_arg_check(tmp_path, {}).verdict) == "ok"


def test_verify_root_cli_with_a_hostile_grub_file(tmp_path: Path, clean_bundle: Path):
    marker = tmp_path / "PWNED"
    evil = f"GRUB_CMDLINE_LINUX=$(touch {marker})\n"
    grub_image(tmp_path / "image", {"/etc/default/grub.d/50-evil.cfg": evil})
    result = gen("verify", str(clean_bundle), "--root", str(tmp_path / "image"), timeout=60)
    assert result.returncode == 1 and "Traceback" not in result.stderr
    assert not marker.exists()
    assert "not-judged" in result.stdout and "not judged" in result.stdout.splitlines()[-1]


# --- item 11: control characters are escaped on a terminal --------------------------------------

ESCAPES = "\x1b]0;owned\x07\x1b[2J\x9b31m\u202e"
CONTROLS = {"\x1b", "\x07", "\x9b", "\u202e"}


def test_verify_escapes_snapshot_values(tmp_path: Path, clean_bundle: Path):
    snapshot = tmp_path / "snap.log"
    snapshot.write_text(
        f"goldtune-snapshot\tbegin\tx\nsysctl\tvm.swappiness\t{ESCAPES}\n"
        f"meta\thostname\th{ESCAPES}\ngoldtune-snapshot\tend\tx\n"
    )
    result = gen("verify", str(clean_bundle), "--snapshot", str(snapshot))
    assert result.returncode == 1, result.stderr
    assert not CONTROLS & set(result.stdout + result.stderr)
    assert "\\x1b]0;owned\\x07" in result.stdout


def test_explain_escapes_a_profile_reason(tmp_path: Path):
    profile = tmp_path / "p.yaml"
    profile.write_text(
        "extends: inference\noverrides:\n"
        "  - {kind: sysctl, key: vm.swappiness, value: 2, "
        'reason: "fine\\e[2J\\e]0;owned\\a\\u202e"}\n'
    )
    result = gen("explain", "--hw", "l4-inference", "--profile", str(profile), "--key", "swap")
    assert result.returncode == 0, result.stderr
    assert "\x1b" not in result.stdout and "\u202e" not in result.stdout
    assert "fine\\x1b[2J" in result.stdout


@pytest.mark.parametrize("output_format", ["terminal", "markdown"])
def test_diff_escapes_reasons_and_file_text(tmp_path: Path, clean_bundle: Path, output_format: str):
    profile = tmp_path / "p.yaml"
    profile.write_text(
        "extends: inference\noverrides:\n"
        "  - {kind: sysctl, key: vm.swappiness, value: 2, "
        'reason: "fine\\e[2J\\u202e"}\n'
    )
    other = tmp_path / "other"
    assert gen("--hw", "l4-inference", "--profile", str(profile), "-o", str(other)).returncode == 0
    result = gen("diff", "--format", output_format, str(clean_bundle), str(other))
    assert result.returncode == 1, result.stderr
    assert "\x1b" not in result.stdout and "\u202e" not in result.stdout
    # Markdown shows the escape's backslash and bracket as character references (issue 29)
    shown = "fine&#92;x1b&#91;2J" if output_format == "markdown" else "fine\\x1b[2J"
    assert shown in result.stdout


# --- item 8: a file in the current directory never shadows a shipped name ------------------------


@pytest.mark.parametrize(
    "planted", ["inference", "inference.yaml", "l4-inference", "l4-inference.yaml"]
)
def test_a_file_in_the_cwd_does_not_shadow_shipped_names(tmp_path: Path, planted: str):
    (tmp_path / planted).write_text("intent: training\nsmt: disable\nname: planted\n")
    explain = ("explain", "--hw", "l4-inference", "--profile", "inference-latency", "--json")
    result = gen(*explain, cwd=tmp_path)
    assert result.returncode == 0, result.stderr
    shipped = gen(*explain, cwd=REPO)
    assert result.stdout == shipped.stdout


def test_a_bare_name_that_is_only_a_local_file_says_how_to_name_the_file(tmp_path: Path):
    (tmp_path / "mine.yaml").write_text("intent: training\n")
    assert_one_line_exit_2(
        check_profile("mine", cwd=tmp_path),
        "mine: no shipped profile of that name (a bare name is a shipped "
        "profile; to read the file, give it as a path: ./mine.yaml)",
    )
    assert check_profile("./mine.yaml", cwd=tmp_path).returncode == 0


def test_extends_path_is_relative_to_the_file_that_names_it(tmp_path: Path):
    (tmp_path / "team").mkdir()
    (tmp_path / "team" / "base.yaml").write_text("intent: training\nsmt: disable\n")
    (tmp_path / "team" / "leaf.yaml").write_text("extends: base.yaml\n")
    (tmp_path / "base.yaml").write_text("intent: inference\n")  # in the cwd: must not be the parent
    result = gen("check", "--hw", "l4-inference", "--profile", "team/leaf.yaml", cwd=tmp_path)
    assert result.returncode == 0, result.stderr
    assert "profile leaf -> base, intent training" in result.stdout


# --- item 6: in gen matrix one bad file fails only its own combinations ---------------------------


def test_matrix_goes_on_past_hostile_files(tmp_path: Path, fifo: Path):
    bad = {
        "tag.yaml": HW_WITH.format("!!bool maybe"),
        "null-name.yaml": "name: null\n" + MINIMAL_HW,
        "digits.yaml": HW_WITH.format("9" * 5000),
        "shadow.yaml": SECRET,
    }
    for name, text in bad.items():
        (tmp_path / name).write_text(text)
    args = [arg for name in [*bad, fifo.name] for arg in ("--hw", str(tmp_path / name))]
    result = gen(
        "matrix",
        *args,
        "--hw",
        "l4-inference",
        "--profile",
        "inference",
        "-o",
        str(tmp_path / "out"),
        timeout=120,
    )
    assert result.returncode == 1, result.stdout + result.stderr
    assert "Traceback" not in result.stderr and "s3cr3t" not in result.stdout + result.stderr
    assert "1 written, 5 failed" in result.stdout
    assert (tmp_path / "out" / "l4-inference-inference" / "manifest.json").is_file()


# --- item 12: the smaller ones ------------------------------------------------------------------


def test_a_long_output_name_works_or_is_one_clean_line(tmp_path: Path):
    from generator.bundle.write import MAX_NAME_BYTES

    longest = tmp_path / ("b" * MAX_NAME_BYTES)
    assert gen("--hw", "l4-inference", "--profile", "inference", "-o", str(longest)).returncode == 0
    too_long = tmp_path / ("c" * (MAX_NAME_BYTES + 1))
    result = gen("--hw", "l4-inference", "--profile", "inference", "-o", str(too_long))
    assert_one_line_exit_2(result, f"the directory name is 256 bytes; at most {MAX_NAME_BYTES}")
    assert sorted(p.name for p in tmp_path.iterdir()) == ["b" * MAX_NAME_BYTES]


def test_a_hand_made_manifest_naming_goldtune_does_not_make_a_bundle(tmp_path: Path):
    target = tmp_path / "data"
    target.mkdir()
    (target / "important.db").write_text("keep me")
    manifest = {
        "tool": {"name": "goldtune"},
        "files": [
            {
                "path": "important.db",
                "sha256": hashlib.sha256(b"keep me").hexdigest(),
                "mode": "0644",
            }
        ],
    }
    (target / "manifest.json").write_text(json.dumps(manifest))
    result = gen("--hw", "l4-inference", "--profile", "inference", "-o", str(target))
    assert_one_line_exit_2(result, "that is not a goldtune bundle")
    assert (target / "important.db").read_text() == "keep me"
    # a forged plan.json listed with the wrong digest is not enough either
    (target / "plan.json").write_text('{"format": 1, "tool": "goldtune", "settings": []}')
    manifest["files"].append({"path": "plan.json", "sha256": "0" * 64, "mode": "0644"})
    (target / "manifest.json").write_text(json.dumps(manifest))
    assert gen("--hw", "l4-inference", "--profile", "inference", "-o", str(target)).returncode == 2
    assert (target / "important.db").read_text() == "keep me"


def test_a_real_bundle_is_still_replaced(tmp_path: Path):
    target = tmp_path / "bundle"
    for profile in ("inference", "training"):
        assert gen("--hw", "l4-inference", "--profile", profile, "-o", str(target)).returncode == 0
    assert json.loads((target / "plan.json").read_text())["profile"] == "training"


def test_string_type_errors_say_string(tmp_path: Path):
    hw = tmp_path / "hw.yaml"
    hw.write_text(MINIMAL_HW + "description: [1]\n")
    line = assert_one_line_exit_2(
        gen("check", "--hw", str(hw), "--profile", "inference"),
        "description: expected string, got list [1]",
    )
    assert "stringing" not in line


def test_a_bad_override_value_is_one_line_without_pydantic_internals(tmp_path: Path):
    profile = tmp_path / "p.yaml"
    profile.write_text(
        "intent: training\noverrides: [{kind: sysctl, key: vm.swappiness, "
        "value: [1], reason: why not}]\n"
    )
    line = assert_one_line_exit_2(
        check_profile(profile),
        "overrides[0].value: invalid value [1]: expected a string or an integer",
    )
    assert "constrained-str" not in line


# --- the suite must not fail because the machine is busy -----------------------------------------


@pytest.mark.parametrize(
    "text,counts",
    [
        (
            "[ 61.2] vm systemd-udevd[201]: nvme0n1: Worker [230] processing SEQNUM=2345 "
            "is taking a long time",
            False,
        ),
        (
            "[ 61.2] vm systemd-udevd[201]: sda: Spawned process '/bin/x' [240] "
            "is taking longer than 59s to complete",
            False,
        ),
        (
            "[ 91.2] vm systemd-udevd[201]: nvme0n1: Worker [230] processing SEQNUM=2345 killed",
            True,
        ),
        (
            "[ 9.8] vm (udev-worker)[312]: could not read from "
            "'/sys/module/powernow_k8/initstate': No such device",
            False,
        ),
        (
            "[ 9.8] vm (udev-worker)[312]: could not read from "
            "'/sys/module/nvidia/parameters/NVreg_EnableGpuFirmware': No such device",
            True,
        ),
        (
            "[ 9.8] vm (udev-worker)[312]: could not read from "
            "'/sys/module/powernow_k8/initstate': Permission denied",
            True,
        ),
        (
            "[ 5.1] vm systemd-udevd[201]: /etc/udev/rules.d/60-goldtune-io-scheduler.rules:3 "
            "Invalid value",
            True,
        ),
        (
            "[ 5.1] vm systemd-sysctl[150]: Couldn't write '60' to 'vm/swappiness': Invalid "
            "argument",
            True,
        ),
    ],
)
def test_journal_lines_are_classified_by_meaning(text: str, counts: bool):
    from generator.verify.health import is_config_error, parse_journal_line

    assert is_config_error(parse_journal_line(text)) is counts


def test_boot_timeouts_come_from_measured_figures_with_an_override(monkeypatch: pytest.MonkeyPatch):
    from tests.boot import test_boot

    monkeypatch.delenv("GOLDTUNE_BOOT_TIMEOUT_S", raising=False)
    assert test_boot.boot_timeout_s("cloud-init") >= 4 * 140
    assert test_boot.boot_timeout_s("rootfs") >= 4 * 75
    monkeypatch.setenv("GOLDTUNE_BOOT_TIMEOUT_S", "1800")
    assert test_boot.boot_timeout_s("cloud-init") == 1800


def test_a_fifo_as_the_targets_manifest_does_not_hang(tmp_path: Path):
    """A guard, not a regression: the old lstat check refused a FIFO too; the size cap is new."""
    target = tmp_path / "bundle"
    target.mkdir()
    os.mkfifo(target / "manifest.json")
    result = gen("--hw", "l4-inference", "--profile", "inference", "-o", str(target), timeout=20)
    assert_one_line_exit_2(result, "not a goldtune bundle")


def test_resolve_within_keeps_every_link_inside_the_root(tmp_path: Path) -> None:
    """The one resolver of detect's trees and verify's images (generator/foreign.py)."""
    (tmp_path / "etc").mkdir()
    (tmp_path / "etc" / "real").write_text("x")
    (tmp_path / "etc" / "abs").symlink_to("/etc/real")  # counts from the root, not the host
    (tmp_path / "etc" / "up").symlink_to("../../../etc/real")
    (tmp_path / "etc" / "loop").symlink_to("loop")
    assert resolve_within(tmp_path, "/etc/abs") == tmp_path / "etc" / "real"
    assert resolve_within(tmp_path, "/etc/missing/x") is None
    assert resolve_within(tmp_path, "/etc/up", clamp_at_root=True) == tmp_path / "etc" / "real"
    with pytest.raises(EscapesRootError):
        resolve_within(tmp_path, "/etc/up")
    with pytest.raises(TooManyLinksError):
        resolve_within(tmp_path, "/etc/loop")
