"""EC2's user-data limit as a gate (issue 42): `--require-fit PROVIDER` fails the build (exit 2,
nothing written) when no cloud-init form that carries every --cloud-init-part fits;
manifest.json never lists a form as fitting a provider when that form lacks the team's parts;
every shipped bundle fits EC2 on its own.

On main before this: with a team part that took `user-data.mime.gz` over 16 KB, gen warned and
exited 0, and manifest.json listed `user-data.gz` (goldtune's part alone) as fitting EC2.
"""

from __future__ import annotations

import hashlib
import json
from pathlib import Path

import pytest
from click.testing import CliRunner

from generator import cli
from generator.commands.options import PROVIDERS
from generator.model import layout
from generator.render.providers import PROVIDER_LIMITS
from tests import bundle_digest

EC2_LIMIT = 16 * 1024
# The largest shipped bundle: about 16,320 bytes of user-data.mime.gz, some 60 to spare.
LARGEST = ["--hw", "dgx-h100", "--profile", "training-k8s"]


def gen(*args: str) -> tuple[int, str, str]:
    result = CliRunner().invoke(cli.main, list(args))
    return result.exit_code, result.stdout, result.stderr


@pytest.fixture
def team_part(tmp_path: Path) -> Path:
    """A cloud-config of a team's own that deflate cannot shrink much (a 640-digit token)."""
    token = "".join(hashlib.sha256(bytes([index])).hexdigest() for index in range(10))
    part = tmp_path / "team.yaml"
    part.write_text(
        f"#cloud-config\nwrite_files:\n  - path: /etc/team-token\n    content: {token}\n"
    )
    return part


def test_the_option_names_every_provider_goldtune_knows() -> None:
    assert tuple(limit.provider for limit in PROVIDER_LIMITS) == PROVIDERS


def test_every_shipped_bundle_fits_ec2_without_team_parts() -> None:
    """The 96 bundles of tests/bundle_digest.py (every system x profile, the examples, dgx-h100
    for every distribution table): the compressed MIME form within 16 KB, and listed so."""
    over, largest = [], 0
    for name, hardware, profile, distro in bundle_digest.shipped():
        files = bundle_digest.rendered(hardware, profile, distro)
        size = len(files[layout.USER_DATA_MIME_GZ][0])
        largest = max(largest, size)
        fits = json.loads(files[layout.MANIFEST][0])["user_data"]["fits"]["ec2"]
        if size > EC2_LIMIT or layout.USER_DATA_MIME_GZ not in fits:
            over.append(f"{name}: {size}")
    assert over == [], f"over EC2's {EC2_LIMIT} bytes: {over}"
    assert largest > EC2_LIMIT - 200  # the check sees the bundles near the limit


def test_a_team_part_over_ec2_warns_without_the_gate(tmp_path: Path, team_part: Path) -> None:
    out = tmp_path / "bundle"
    code, _, err = gen(*LARGEST, "--cloud-init-part", str(team_part), "-o", str(out))
    assert code == 0, err
    assert "warning: cloud-init user-data does not fit ec2" in err
    user_data = json.loads((out / layout.MANIFEST).read_text())["user_data"]
    assert user_data["bytes"][layout.USER_DATA_MIME_GZ] > EC2_LIMIT
    # user-data.gz fits, but carries no team part: it is not the delivery, so not listed
    assert user_data["bytes"][layout.USER_DATA_GZ] <= EC2_LIMIT
    assert user_data["fits"]["ec2"] == []
    assert user_data["fits"]["azure"] == [layout.USER_DATA_MIME_GZ]  # the plain one is 64 KB+


def test_require_fit_fails_and_writes_nothing(tmp_path: Path, team_part: Path) -> None:
    out = tmp_path / "bundle"
    args = [*LARGEST, "--cloud-init-part", str(team_part), "--require-fit", "ec2", "-o", str(out)]
    code, stdout, err = gen(*args)
    assert code == 2, err  # the inputs make a delivery EC2 refuses: bad input
    assert not out.exists() and "wrote" not in stdout
    (line,) = err.splitlines()
    assert line.startswith("goldtune: error: cloud-init user-data does not fit ec2: ")
    assert f"{team_part} (cloud-config)" in line and line.endswith(" (--require-fit)")


def test_require_fit_passes_a_bundle_that_fits(tmp_path: Path, team_part: Path) -> None:
    out = tmp_path / "bundle"
    args = ["--hw", "l4-inference", "--profile", "inference", "--cloud-init-part", str(team_part)]
    code, _, err = gen(*args, "--require-fit", "ec2", "--require-fit", "gcp", "-o", str(out))
    assert code == 0, err
    assert (out / layout.MANIFEST).exists()


def test_require_fit_goes_after_the_command_name() -> None:
    code, _, err = gen("--require-fit", "ec2", "matrix", "--hw", "l4-inference")
    assert code == 2 and "--require-fit go after the command name" in err


def test_matrix_require_fit_fails_the_combination_over_the_limit(
    tmp_path: Path, team_part: Path
) -> None:
    root = tmp_path / "out"
    code, stdout, err = gen(
        "matrix", "--hw", "dgx-h100", "--hw", "l4-inference", "--profile", "training-k8s",
        "--cloud-init-part", str(team_part), "--require-fit", "ec2", "-o", str(root),
    )  # fmt: skip
    assert code == 1, err
    assert "1 written, 1 failed" in stdout
    assert not (root / "dgx-h100-training-k8s").exists()
    assert (root / "l4-inference-training-k8s" / layout.MANIFEST).exists()
    assert "does not fit ec2" in stdout


def test_the_fleet_gate_with_require_fit_stops_on_a_bundle_over_the_limit(
    tmp_path: Path, team_part: Path
) -> None:
    """--check regenerates with the same parts; one over EC2 is the gate's bad input (exit 2),
    named with its combination; without the flag it is compared as usual."""
    root = tmp_path / "bundles"
    args = ["matrix", *LARGEST, "--cloud-init-part", str(team_part)]
    code, _, err = gen(*args, "-o", str(root))
    assert code == 0, err
    code, _, err = gen(*args, "--check", str(root))
    assert code == 0, err
    code, _, err = gen(*args, "--check", str(root), "--require-fit", "ec2")
    assert code == 2
    assert "dgx-h100 x training-k8s" in err and "does not fit ec2" in err
