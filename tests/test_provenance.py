"""Signed provenance (issue 42): every bundle's in-toto statement, signed with a site's key by
`gen sign`, verified by `gen verify --pubkey`, by the node's openssl (install.sh --check
--pubkey) and by securesystemslib's own DSSE verifier; a changed bundle refused by all."""

from __future__ import annotations

import base64
import hashlib
import json
import shutil
import subprocess
import sys
from pathlib import Path

import pytest
from click.testing import CliRunner

from generator import cli
from generator.commands.generate import render_for
from generator.model.intoto import PAYLOAD_TYPE
from generator.model.layout import MANIFEST, PROVENANCE, PROVENANCE_ENVELOPE, SEALS
from generator.paths import hardware_db_dir
from generator.render.provenance import tree_digest

SYSTEM, PROFILE = "l4-inference", "inference"
SYSCTL = "rootfs/etc/sysctl.d/90-goldtune.conf"


def gen(*args: str) -> tuple[int, str, str]:
    result = CliRunner().invoke(cli.main, list(args))
    return result.exit_code, result.stdout, result.stderr


def openssl(*args: str, stdin: bytes = b"") -> subprocess.CompletedProcess[bytes]:
    if shutil.which("openssl") is None:
        pytest.skip("openssl is not installed")
    return subprocess.run(["openssl", *args], input=stdin, capture_output=True, check=False)


@pytest.fixture(scope="module")
def keys(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, Path]:
    """A site's ECDSA P-256 key pair, made by openssl as the README says."""
    folder = tmp_path_factory.mktemp("keys")
    private, public = folder / "site.pem", folder / "site.pub"
    made = openssl("genpkey", "-algorithm", "EC", "-pkeyopt", "ec_paramgen_curve:P-256")
    private.write_bytes(made.stdout)
    assert openssl("pkey", "-in", str(private), "-pubout", "-out", str(public)).returncode == 0
    return private, public


@pytest.fixture
def signed(tmp_path: Path, keys: tuple[Path, Path]) -> Path:
    bundle = tmp_path / "bundle"
    assert gen("--hw", SYSTEM, "--profile", PROFILE, "-o", str(bundle))[0] == 0
    code, out, err = gen("sign", str(bundle), "--key", str(keys[0]))
    assert code == 0, err
    assert out == f"wrote {bundle / PROVENANCE_ENVELOPE}\n"
    return bundle


def check(bundle: Path, pubkey: Path) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        ["sh", str(bundle / "install.sh"), "--check", "--pubkey", str(pubkey)],
        capture_output=True,
        text=True,
        check=False,
    )


def test_every_bundle_carries_a_statement_of_its_files_inputs_and_builder() -> None:
    files = render_for(SYSTEM, PROFILE)
    statement = json.loads(files[PROVENANCE][0])
    manifest = json.loads(files[MANIFEST][0])
    assert statement["_type"] == "https://in-toto.io/Statement/v1"
    assert statement["predicateType"] == "https://slsa.dev/provenance/v1"
    subjects = {s["name"]: s["digest"]["sha256"] for s in statement["subject"]}
    assert subjects == {
        path: hashlib.sha256(content).hexdigest()
        for path, (content, _) in files.items()
        if path == MANIFEST or path not in SEALS
    }
    build = statement["predicate"]["buildDefinition"]
    dependencies = {d["name"]: d["digest"]["sha256"] for d in build["resolvedDependencies"]}
    assert dependencies == {
        "hardware": manifest["inputs"]["hardware"]["sha256"],
        "profile": manifest["inputs"]["profile"]["sha256"],
        "catalog": tree_digest(hardware_db_dir()),
    }
    assert build["externalParameters"] == {"hardware": SYSTEM, "profile": PROFILE, "os": ""}
    builder = statement["predicate"]["runDetails"]["builder"]
    assert builder["version"] == {"goldtune": manifest["tool"]["version"]}
    assert render_for(SYSTEM, PROFILE)[PROVENANCE] == files[PROVENANCE]  # reproducible


def test_the_catalog_digest_is_what_sha256sum_prints() -> None:
    """The documented shell line recomputes it (render/provenance.py's docstring)."""
    line = "find . -type f -printf '%P\\n' | LC_ALL=C sort | xargs sha256sum | sha256sum"
    done = subprocess.run(
        ["sh", "-c", line], cwd=hardware_db_dir(), capture_output=True, text=True, check=True
    )
    assert done.stdout.split()[0] == tree_digest(hardware_db_dir())


def test_a_signed_bundle_verifies_with_gen_install_sh_and_the_library(
    signed: Path, keys: tuple[Path, Path]
) -> None:
    code, _, err = gen("verify", str(signed), "--pubkey", str(keys[1]), "--provenance-only")
    assert code == 0, err
    assert "every file as it says" in err
    done = check(signed, keys[1])
    assert done.returncode == 0, done.stderr
    assert "provenance: signed by" in done.stdout
    # securesystemslib's own DSSE verifier, matching the signature's keyid as it requires
    from securesystemslib.dsse import Envelope
    from securesystemslib.signer import SSlibKey

    from generator.bundle.provenance import load_verifying_key

    envelope = Envelope.from_dict(json.loads((signed / PROVENANCE_ENVELOPE).read_text()))
    key = load_verifying_key(keys[1])
    assert isinstance(key, SSlibKey)
    assert list(envelope.verify([key], 1)) == [key.keyid]
    assert envelope.payload == (signed / PROVENANCE).read_bytes()


def test_openssl_verifies_the_signature_over_dsse_pae(
    signed: Path, keys: tuple[Path, Path], tmp_path: Path
) -> None:
    """Interoperability: the PAE built here from the DSSE spec, the signature checked by the
    openssl command line, and the keyid the fingerprint ssh-keygen prints (go-securesystemslib's
    SHA256KeyID, which cosign's verifier compares)."""
    envelope = json.loads((signed / PROVENANCE_ENVELOPE).read_text())
    assert envelope["payloadType"] == PAYLOAD_TYPE == "application/vnd.in-toto+json"
    payload = base64.b64decode(envelope["payload"])
    pae = b"DSSEv1 %d %s %d %s" % (len(PAYLOAD_TYPE), PAYLOAD_TYPE.encode(), len(payload), payload)
    (tmp_path / "pae").write_bytes(pae)
    (signature,) = envelope["signatures"]
    (tmp_path / "sig").write_bytes(base64.b64decode(signature["sig"]))
    done = openssl(
        "dgst", "-sha256", "-verify", str(keys[1]), "-signature", str(tmp_path / "sig"),
        str(tmp_path / "pae"),
    )  # fmt: skip
    assert done.returncode == 0 and done.stdout == b"Verified OK\n", done.stderr
    (tmp_path / "pae").write_bytes(pae.replace(b"DSSEv1", b"DSSEv2"))
    refused = openssl(
        "dgst", "-sha256", "-verify", str(keys[1]), "-signature", str(tmp_path / "sig"),
        str(tmp_path / "pae"),
    )  # fmt: skip
    assert refused.returncode == 1
    if shutil.which("ssh-keygen") is not None:
        ssh_pub = subprocess.run(
            ["ssh-keygen", "-i", "-m", "PKCS8", "-f", str(keys[1])],
            capture_output=True,
            check=True,
        ).stdout
        (tmp_path / "key.ssh").write_bytes(ssh_pub)
        listed = subprocess.run(
            ["ssh-keygen", "-l", "-f", str(tmp_path / "key.ssh")],
            capture_output=True,
            text=True,
            check=True,
        ).stdout
        assert listed.split()[1] == signature["keyid"]


@pytest.mark.parametrize("change", ["edit", "add", "remove", "statement"])
def test_a_changed_bundle_is_refused_by_gen_verify_and_install_sh(
    signed: Path, keys: tuple[Path, Path], change: str
) -> None:
    if change == "edit":
        with (signed / SYSCTL).open("a") as stream:
            stream.write("vm.swappiness = 100\n")
        named = f"{SYSCTL}: differs"
    elif change == "add":
        (signed / "rootfs/etc/sysctl.d/99-extra.conf").write_text("kernel.panic = 0\n")
        named = "rootfs/etc/sysctl.d/99-extra.conf: not in"
    elif change == "remove":
        (signed / SYSCTL).unlink()
        named = f"{SYSCTL}: missing"
    else:
        (signed / PROVENANCE).write_text((signed / PROVENANCE).read_text().replace("0", "1"))
        named = f"{PROVENANCE}: differs"
    code, _, err = gen("verify", str(signed), "--pubkey", str(keys[1]), "--provenance-only")
    assert code == 1
    assert named in err
    done = check(signed, keys[1])
    assert done.returncode == 1
    assert named in done.stderr


def test_another_key_or_a_forged_signature_is_refused(
    signed: Path, keys: tuple[Path, Path], tmp_path: Path
) -> None:
    other = tmp_path / "other.pem"
    other.write_bytes(
        openssl("genpkey", "-algorithm", "EC", "-pkeyopt", "ec_paramgen_curve:P-256").stdout
    )
    other_pub = tmp_path / "other.pub"
    openssl("pkey", "-in", str(other), "-pubout", "-out", str(other_pub))
    code, _, err = gen("verify", str(signed), "--pubkey", str(other_pub), "--provenance-only")
    assert code == 1 and "no signature by" in err
    assert check(signed, other_pub).returncode == 1
    # a statement of other files under the original signature
    envelope = json.loads((signed / PROVENANCE_ENVELOPE).read_text())
    payload = base64.b64decode(envelope["payload"]).replace(b'"os": ""', b'"os": "x"')
    envelope["payload"] = base64.b64encode(payload).decode()
    (signed / PROVENANCE_ENVELOPE).write_text(json.dumps(envelope, sort_keys=True) + "\n")
    code, _, err = gen("verify", str(signed), "--pubkey", str(keys[1]), "--provenance-only")
    assert code == 1 and "no signature by" in err
    assert check(signed, keys[1]).returncode == 1


def test_sign_refuses_a_changed_bundle_and_a_wrong_key(
    tmp_path: Path, keys: tuple[Path, Path]
) -> None:
    bundle = tmp_path / "bundle"
    assert gen("--hw", SYSTEM, "--profile", PROFILE, "-o", str(bundle))[0] == 0
    code, _, err = gen("sign", str(bundle), "--key", str(keys[1]))  # the public key
    assert code == 2 and "not a PEM private key" in err
    rsa = tmp_path / "rsa.pem"
    rsa.write_bytes(openssl("genpkey", "-algorithm", "RSA").stdout)
    code, _, err = gen("sign", str(bundle), "--key", str(rsa))
    assert code == 2 and "not an ECDSA P-256 key" in err
    with (bundle / SYSCTL).open("a") as stream:
        stream.write("vm.swappiness = 100\n")
    code, _, err = gen("sign", str(bundle), "--key", str(keys[0]))
    assert code == 2 and "refusing to sign" in err
    assert not (bundle / PROVENANCE_ENVELOPE).exists()


def test_a_statement_with_a_subject_name_not_a_string_is_one_line(
    tmp_path: Path, keys: tuple[Path, Path]
) -> None:
    bundle = tmp_path / "bundle"
    assert gen("--hw", SYSTEM, "--profile", PROFILE, "-o", str(bundle))[0] == 0
    statement = json.loads((bundle / "provenance.json").read_text())
    statement["subject"][0]["name"] = 1
    (bundle / "provenance.json").write_text(json.dumps(statement))
    code, _, err = gen("sign", str(bundle), "--key", str(keys[0]))
    assert code == 2 and "not an in-toto Statement v1" in err and "Traceback" not in err


def test_a_signed_bundle_is_regenerated_in_place(signed: Path) -> None:
    """The envelope describes the bundle: `gen -o` replaces a signed bundle (and drops the
    signature, which no longer holds) instead of refusing it as a foreign file."""
    code, _, err = gen("--hw", SYSTEM, "--profile", PROFILE, "-o", str(signed))
    assert code == 0, err
    assert not (signed / PROVENANCE_ENVELOPE).exists()
    assert (signed / PROVENANCE).is_file()


def test_install_sh_needs_check_for_pubkey(signed: Path, keys: tuple[Path, Path]) -> None:
    done = subprocess.run(
        ["sh", str(signed / "install.sh"), "--pubkey", str(keys[1])],
        capture_output=True,
        text=True,
        check=False,
    )
    assert done.returncode == 2
    code, _, err = gen("verify", str(signed), "--provenance-only")
    assert code == 2 and "go with --pubkey" in err


@pytest.mark.parametrize(
    "envelope",
    [b"not json\n", b'{"payload": "%%%", "payloadType": "application/vnd.in-toto+json"}\n', b""],
    ids=["not-json", "bad-payload", "empty"],
)
def test_a_broken_envelope_is_refused_and_leaves_no_temporary(
    signed: Path, keys: tuple[Path, Path], tmp_path: Path, envelope: bytes
) -> None:
    (signed / PROVENANCE_ENVELOPE).write_bytes(envelope)
    scratch = tmp_path / "tmp"
    scratch.mkdir()
    done = subprocess.run(
        ["sh", str(signed / "install.sh"), "--check", "--pubkey", str(keys[1])],
        capture_output=True,
        text=True,
        check=False,
        env={"PATH": "/usr/bin:/bin", "TMPDIR": str(scratch)},
    )
    assert done.returncode == 1
    assert done.stderr.startswith("goldtune: error: provenance: "), done.stderr
    assert list(scratch.iterdir()) == []
    code, _, err = gen("verify", str(signed), "--pubkey", str(keys[1]), "--provenance-only")
    assert code in (1, 2) and "Traceback" not in err


def test_a_site_catalog_is_a_resolved_dependency(tmp_path: Path) -> None:
    """--catalog DIR: its tree's digest beside the shipped one's (a subprocess: the site
    catalog is the run's own state)."""
    site = tmp_path / "site"
    (site / "gpus").mkdir(parents=True)
    (site / "gpus" / "README").write_text("our models go here\n")
    bundle = tmp_path / "bundle"
    done = subprocess.run(
        [sys.executable, "-m", "generator", "--catalog", str(site), "--hw", SYSTEM,
         "--profile", PROFILE, "-o", str(bundle)],
        capture_output=True, text=True, check=False,
    )  # fmt: skip
    assert done.returncode == 0, done.stderr
    statement = json.loads((bundle / PROVENANCE).read_text())
    dependencies = statement["predicate"]["buildDefinition"]["resolvedDependencies"]
    site_digest = hashlib.sha256(
        f"{hashlib.sha256(b'our models go here' + bytes([10])).hexdigest()}  gpus/README\n".encode()
    ).hexdigest()
    assert {"name": "site-catalog", "digest": {"sha256": site_digest}} in dependencies
