"""cloud-init budgets (issue 30, item 3): every form that carries the whole delivery is held to
every provider's limit, a warning says what each part costs, and --cloud-init-part takes shell
scripts and nodeadm's NodeConfig beside cloud-configs, in the order given.

On main a 3.4 KB team part took dgx-b200 training-k8s's user-data.mime.gz to 18 KB, over EC2's
16 KB, with no warning: the warning looked at user-data.gz, which fits and lacks the part. Any
part that was not a #cloud-config was refused.
"""

from __future__ import annotations

import base64
import email
import hashlib
import json
import shutil
import subprocess
from pathlib import Path

import pytest
from click.testing import CliRunner

from generator import cli
from generator.model import layout
from generator.render import budgets, cloudinit, providers
from generator.render.budgets import complete_forms, overruns, part_costs
from tests.conftest import REPO

SYSTEM_PYTHON = "/usr/bin/python3"
PARTS_WALK = REPO / "tests" / "validators" / "cloudinit_parts.py"
needs_cloud_init = pytest.mark.skipif(
    shutil.which("cloud-init") is None or not Path(SYSTEM_PYTHON).exists(),
    reason="cloud-init is not installed",
)
EC2_LIMIT = 16 * 1024
SCRIPT = "#!/bin/sh\necho team-script >/run/team-script\n"
NODE_CONFIG = """\
---
apiVersion: node.eks.aws/v1alpha1
kind: NodeConfig
spec:
  cluster:
    name: gpu-cluster
    apiServerEndpoint: https://example.com
    certificateAuthority: Y2VydGlmaWNhdGVBdXRob3JpdHk=
    cidr: 10.100.0.0/16
"""
CLOUD_CONFIG = '#cloud-config\nwrite_files:\n  - path: /etc/team.conf\n    content: "ours\\n"\n'


def incompressible_part() -> str:
    """A 3.4 KB cloud-config most of which gzip cannot shrink (a token: hash bytes, base64)."""
    noise = b"".join(hashlib.sha256(index.to_bytes(4, "big")).digest() for index in range(78))
    token = base64.b64encode(noise).decode()
    return f"#cloud-config\nwrite_files:\n  - path: /etc/team/token\n    content: {token}\n"


def gen(*args: str) -> tuple[int, str, str]:
    result = CliRunner().invoke(cli.main, list(args))
    return result.exit_code, result.stdout, result.stderr


def composed(tmp_path: Path, *parts: tuple[str, str], system: str = "l4-inference") -> Path:
    """The bundle of ``system`` x its profile with each (file name, text) as a part, in order."""
    args = []
    for name, text in parts:
        (tmp_path / name).write_text(text)
        args += ["--cloud-init-part", str(tmp_path / name)]
    profile = "training-k8s" if system == "dgx-b200" else "inference"
    out = tmp_path / "bundle"
    code, _, err = gen("--hw", system, "--profile", profile, "-o", str(out), *args)
    assert code == 0, err
    return out


# --- which forms are held to the limits ---------------------------------------------------------


def test_a_team_part_that_takes_the_mime_form_over_ec2_is_warned_with_its_cost(
    tmp_path: Path,
) -> None:
    """The issue's case: user-data.gz fits EC2, user-data.mime.gz (the only gzip form with the
    team's part) does not; the warning names that form and what each part adds to it."""
    part = tmp_path / "team.yaml"
    part.write_text(incompressible_part())
    assert 3300 < part.stat().st_size < 3500
    out = tmp_path / "bundle"
    code, _, err = gen("--hw", "dgx-b200", "--profile", "training-k8s", "-o", str(out),
        "--cloud-init-part", str(part),
    )  # fmt: skip
    assert code == 0, err
    manifest = json.loads((out / layout.MANIFEST).read_text())
    sizes = manifest["user_data"]["bytes"]
    assert sizes[layout.USER_DATA_GZ] <= EC2_LIMIT < sizes[layout.USER_DATA_MIME_GZ]
    (line,) = [line for line in err.splitlines() if "warning" in line]
    mime_gz = sizes[layout.USER_DATA_MIME_GZ]
    assert line.startswith(
        "goldtune: warning: cloud-init user-data does not fit ec2: the smallest form that "
        f"carries every part, {layout.USER_DATA_MIME_GZ}, is {mime_gz} bytes, the limit 16384"
    )
    costs = part_costs(
        (out / layout.USER_DATA).read_bytes(), (part.read_bytes(),), layout.USER_DATA_MIME_GZ
    )
    assert f"goldtune's user-data {costs[0]}, {part} (cloud-config) {costs[1]};" in line
    assert costs[0] <= EC2_LIMIT and costs[1] > 2000  # the team's part is what no longer fits
    assert "azure" not in err and "gcp" not in err  # the MIME forms fit those


def test_without_parts_every_form_counts() -> None:
    sizes = {"bytes": dict.fromkeys(layout.USER_DATA_FORMS, 100), "parts": []}
    assert complete_forms(sizes) == list(layout.USER_DATA_FORMS)
    sizes["parts"] = ["digest"]
    assert complete_forms(sizes) == [layout.USER_DATA_MIME, layout.USER_DATA_MIME_GZ]


@pytest.mark.parametrize(
    ("mime_gz", "mime", "over"),
    [
        (16384, 70000, []),  # every provider has a form
        (16385, 70000, ["ec2"]),  # EC2 takes 16 KB; Azure still has the .gz form
        (70000, 70000, ["ec2", "azure"]),  # GCP takes the plain text, 256 KiB
        (70000, 300000, ["ec2", "azure", "gcp"]),
    ],
)
def test_each_provider_is_held_to_its_limit_by_the_forms_it_takes(
    mime_gz: int, mime: int, over: list[str]
) -> None:
    """With parts, only the MIME forms; GCP's metadata value is text, so never a .gz form,
    whatever its size; the plain forms, small as they may be, do not count."""
    sizes = {
        "bytes": {
            layout.USER_DATA: 10,
            layout.USER_DATA_GZ: 10,
            layout.USER_DATA_MIME: mime,
            layout.USER_DATA_MIME_GZ: mime_gz,
        },
        "parts": ["digest"],
    }
    found = overruns(sizes)
    assert [overrun.limit.provider for overrun in found] == over
    smaller = layout.USER_DATA_MIME_GZ if mime_gz < mime else layout.USER_DATA_MIME
    for overrun in found:
        assert overrun.form == (
            layout.USER_DATA_MIME if overrun.limit.provider == "gcp" else smaller
        )


def test_a_warning_without_parts_names_the_smallest_form(monkeypatch) -> None:
    tiny = providers.PROVIDER_LIMITS[0]._replace(limit_bytes=100)
    monkeypatch.setattr(providers, "PROVIDER_LIMITS", (tiny,))
    sizes = {"bytes": {layout.USER_DATA: 900, layout.USER_DATA_GZ: 300}, "parts": []}
    (line,) = budgets.budget_warnings(sizes, b"", (), ())
    assert line.startswith(
        f"cloud-init user-data does not fit ec2: the smallest form, {layout.USER_DATA_GZ}, is "
        "300 bytes, the limit 100"
    )
    assert "each part" not in line


def test_the_costs_of_the_plain_mime_form_add_up_to_it() -> None:
    user_data = b"#cloud-config\nruncmd: [true]\n"
    parts = (CLOUD_CONFIG.encode(), SCRIPT.encode(), NODE_CONFIG.encode())
    costs = part_costs(user_data, parts, layout.USER_DATA_MIME)
    assert sum(costs) == len(cloudinit.mime_user_data(user_data, parts))
    assert costs[0] == len(cloudinit.mime_user_data(user_data))


# --- parts of other MIME types, in the order given ----------------------------------------------


def mime_parts(bundle: Path) -> list[tuple[str, str, str]]:
    """(Content-Type, file name, text) of each part of the bundle's MIME form."""
    message = email.message_from_bytes((bundle / layout.USER_DATA_MIME).read_bytes())
    return [
        (part.get_content_type(), part.get_filename(), part.get_payload(decode=True).decode())
        for part in message.walk()
        if not part.is_multipart()
    ]


def test_a_script_a_node_config_and_a_cloud_config_go_in_the_order_given(tmp_path: Path) -> None:
    bundle = composed(
        tmp_path, ("node.yaml", NODE_CONFIG), ("setup.sh", SCRIPT), ("team.yaml", CLOUD_CONFIG)
    )
    parts = mime_parts(bundle)
    assert [(kind, name) for kind, name, _ in parts] == [
        ("application/node.eks.aws", "part-01.yaml"),
        ("text/x-shellscript", "part-02.sh"),
        ("text/cloud-config", "part-03.cfg"),
        ("text/cloud-config", "goldtune.cfg"),  # ours last (its merge_how keeps the others)
    ]
    # each byte for byte (the newline before a boundary belongs to the boundary, RFC 2046 5.1.1)
    texts = [text for _, _, text in parts[:3]]
    assert texts == [part.rstrip("\n") for part in (NODE_CONFIG, SCRIPT, CLOUD_CONFIG)]


def test_the_part_names_sort_in_the_order_given() -> None:
    """cloud-init runs the script parts in the order of their names (runparts sorts): part-10
    must not run before part-2."""
    scripts = tuple(f"#!/bin/sh\necho {index}\n".encode() for index in range(12))
    message = email.message_from_bytes(cloudinit.mime_user_data(b"#cloud-config\n{}\n", scripts))
    names = [part.get_filename() for part in message.walk() if not part.is_multipart()][:-1]
    assert names == sorted(names) and len(names) == 12


@needs_cloud_init
def test_cloud_init_writes_the_scripts_in_order_and_skips_the_node_config(tmp_path: Path) -> None:
    """cloud-init's own part handlers on the composed gzip form: the team's scripts land in the
    instance's scripts/ in the order given (and before goldtune's runcmd script, which its
    cc_runcmd writes as scripts/runcmd: 'part-' sorts first), the NodeConfig part is skipped,
    goldtune's and the team's cloud-configs merge."""
    second = "#!/bin/sh\necho second\n"
    bundle = composed(
        tmp_path,
        ("setup.sh", SCRIPT),
        ("node.yaml", NODE_CONFIG),
        ("team.yaml", CLOUD_CONFIG),
        ("later.sh", second),
    )
    result = subprocess.run(
        [SYSTEM_PYTHON, str(PARTS_WALK), str(bundle / layout.USER_DATA_MIME_GZ)],
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert result.returncode == 0, result.stderr
    walked = json.loads(result.stdout)
    # as delivered: the text less its last newline (that one belongs to the MIME boundary)
    assert walked["scripts"] == [
        ["part-01.sh", SCRIPT.rstrip("\n")],
        ["part-04.sh", second.rstrip("\n")],
    ]
    assert sorted([*(name for name, _ in walked["scripts"]), "runcmd"])[-1] == "runcmd"
    assert "/etc/team.conf" in walked["write_files"]
    assert len(walked["write_files"]) > 1  # goldtune's files too
    assert "node.eks.aws" not in json.dumps(walked)


@pytest.mark.parametrize(
    ("content", "message"),
    [
        (b"runcmd: []\n", "a part is a cloud-config (a #cloud-config line first), a shell"),
        (NODE_CONFIG.replace("node.eks.aws/", "other.io/").encode(), "or a nodeadm NodeConfig"),
        (NODE_CONFIG.replace("NodeConfig", "Other").encode(), "or a nodeadm NodeConfig"),
        (b"- a list\n", "a part is a YAML mapping"),
        (f"#!/bin/sh\n--{cloudinit.MIME_BOUNDARY}\n".encode(), "the MIME form's boundary"),
        (b"#!/bin/sh\n\xff\n", "not UTF-8 text"),
    ],
)
def test_a_part_of_no_known_kind_is_one_line_exit_2(
    tmp_path: Path, content: bytes, message: str
) -> None:
    part = tmp_path / "part"
    part.write_bytes(content)
    out = tmp_path / "out"
    code, _, err = gen("--hw", "l4-inference", "--profile", "inference", "-o", str(out),
        "--cloud-init-part", str(part),
    )  # fmt: skip
    assert code == 2
    (line,) = err.strip().splitlines()
    assert str(part) in line and message in line, line
    assert not out.exists()


def test_more_parts_than_names_keep_in_order_is_bad_input(tmp_path: Path) -> None:
    part = tmp_path / "setup.sh"
    part.write_text(SCRIPT)
    args = ["--cloud-init-part", str(part)] * (cloudinit.MAX_TEAM_PARTS + 1)
    out = tmp_path / "out"
    code, _, err = gen("--hw", "l4-inference", "--profile", "inference", "-o", str(out), *args)
    assert code == 2
    assert "--cloud-init-part: 100 parts; at most 99" in err
    assert not out.exists()


def test_gen_matrix_warns_for_each_bundle_a_part_takes_over_a_limit(tmp_path: Path) -> None:
    """The same check for every bundle `gen matrix` writes (it used to warn for none)."""
    part = tmp_path / "team.yaml"
    part.write_text(incompressible_part())
    out = tmp_path / "bundles"
    code, _, err = gen(
        "matrix", "--hw", "dgx-b200", "--hw", "l4-inference", "--profile", "training-k8s",
        "-o", str(out), "-j", "1", "--cloud-init-part", str(part),
    )  # fmt: skip
    assert code == 0, err
    warnings = [line for line in err.splitlines() if "warning" in line]
    assert len(warnings) == 1, err  # the l4 bundle is smaller: its .mime.gz fits
    assert warnings[0].startswith(
        f"goldtune: warning: {out / 'dgx-b200-training-k8s'}: cloud-init user-data does not "
        "fit ec2: the smallest form that carries every part, cloud-init/user-data.mime.gz,"
    )
    assert f"{part} (cloud-config)" in warnings[0]
