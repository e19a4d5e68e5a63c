"""Sign a bundle's provenance statement with a site's key and verify it later.

The envelope is DSSE (github.com/secure-systems-lab/dsse envelope.md, protocol.md): the
statement as the base64 payload, payloadType ``application/vnd.in-toto+json``, and one
signature over PAE(payloadType, payload), made and checked by securesystemslib (the in-toto
project's library: ``dsse.Envelope``, ``CryptoSigner``, ``SSlibKey``) on pyca/cryptography.

The key is ECDSA P-256 with SHA-256, the signature DER-encoded: what cosign's own keys are, what
sigstore's and go-securesystemslib's DSSE verifiers check (``ecdsa.VerifyASN1``), and what
``openssl dgst -sha256 -verify KEY.pub`` checks on every target distribution (OpenSSL 1.1.1 of
RHEL 8 included), so install.sh verifies the same envelope with the node's openssl. The
signature's keyid is the key's SSH-style fingerprint (``SHA256:`` and the unpadded base64 of the
sha256 of its SSH wire form, what ``ssh-keygen -l`` prints): go-securesystemslib
(dsse/verify.go, SHA256KeyID) computes exactly that for a verifier without a keyid of its own,
as cosign's is, and skips a signature whose non-empty keyid differs. The keyid is a hint (DSSE):
verification here tries the key on every signature whatever its keyid.
"""

from __future__ import annotations

import base64
import hashlib
import json
from pathlib import Path
from typing import Any

from generator import TOOL
from generator.bundle.read import MAX_BUNDLE_FILE_BYTES, present_entries, read_bundle_file
from generator.errors import GenerationError, InputError, Problem
from generator.foreign import read_beneath, read_foreign
from generator.model.intoto import PAYLOAD_TYPE, PREDICATE_TYPE, STATEMENT_TYPE
from generator.model.layout import PROVENANCE, PROVENANCE_ENVELOPE, SEALS

MAX_KEY_BYTES = 64 * 1024
KEY_HINT = (
    "an unencrypted ECDSA P-256 key in PEM: openssl genpkey -algorithm EC -pkeyopt "
    "ec_paramgen_curve:P-256 -out key.pem; openssl pkey -in key.pem -pubout -out key.pub"
)
MISSING_LIBRARY = (
    f"signing and verifying provenance needs securesystemslib and cryptography: "
    f"pip install '{TOOL}[provenance]'"
)


def _library() -> Any:
    """securesystemslib's DSSE and signer modules, imported only by the commands that sign."""
    try:
        from securesystemslib import dsse, signer
    except ImportError:  # an install without the provenance extra
        raise GenerationError(MISSING_LIBRARY) from None
    return dsse, signer


def key_id(public_key: Any) -> str:
    """The key's SSH-style SHA256 fingerprint (module docstring)."""
    from cryptography.hazmat.primitives import serialization

    line = public_key.public_bytes(
        serialization.Encoding.OpenSSH, serialization.PublicFormat.OpenSSH
    )
    wire = base64.b64decode(line.split()[1])
    return "SHA256:" + base64.b64encode(hashlib.sha256(wire).digest()).decode().rstrip("=")


def _p256(key: Any, source: str) -> Any:
    from cryptography.hazmat.primitives.asymmetric import ec

    curve = getattr(key, "curve", None)
    if not isinstance(curve, ec.SECP256R1):
        raise InputError(Problem(source, "", "not an ECDSA P-256 key", KEY_HINT))
    return key


def load_signing_key(path: Path) -> Any:
    """A securesystemslib signer for the private key in ``path``; a bad key: InputError."""
    _, signer = _library()
    from cryptography.hazmat.primitives import serialization

    try:
        private = serialization.load_pem_private_key(read_foreign(path, MAX_KEY_BYTES), None)
    except (ValueError, TypeError) as error:  # not PEM, or encrypted (TypeError)
        why = "encrypted" if isinstance(error, TypeError) else "not a PEM private key"
        raise InputError(Problem(str(path), "", why, KEY_HINT)) from None
    public = _p256(private, str(path)).public_key()
    return signer.CryptoSigner(private, signer.SSlibKey.from_crypto(public, key_id(public)))


def load_verifying_key(path: Path) -> Any:
    """securesystemslib's key for the public key in ``path``; a bad key: InputError."""
    _, signer = _library()
    from cryptography.hazmat.primitives import serialization

    try:
        public = serialization.load_pem_public_key(read_foreign(path, MAX_KEY_BYTES))
    except ValueError:
        raise InputError(Problem(str(path), "", "not a PEM public key", KEY_HINT)) from None
    return signer.SSlibKey.from_crypto(_p256(public, str(path)), key_id(public))


def sign_statement(statement: bytes, signing_key: Any) -> bytes:
    """The DSSE envelope of ``statement``, one JSON line (the *.intoto.jsonl form)."""
    dsse, _ = _library()
    envelope = dsse.Envelope(statement, PAYLOAD_TYPE, {})
    envelope.sign(signing_key)
    return (json.dumps(envelope.to_dict(), sort_keys=True) + "\n").encode("utf-8")


def subject_digests(statement: bytes, source: str) -> dict[str, str]:
    """name -> sha256 of the statement's subjects; a statement of another shape: InputError."""
    try:
        data = json.loads(statement)
        if data["_type"] != STATEMENT_TYPE or data["predicateType"] != PREDICATE_TYPE:
            raise ValueError
        subjects = {item["name"]: item["digest"]["sha256"] for item in data["subject"]}
        if not all(isinstance(x, str) for pair in subjects.items() for x in pair):
            raise ValueError
        return subjects
    except (ValueError, KeyError, TypeError):
        why = f"not an in-toto Statement v1 with a {PREDICATE_TYPE} predicate"
        raise InputError(Problem(source, "", why)) from None


def differing_files(bundle_dir: Path, subjects: dict[str, str]) -> list[str]:
    """One line per file that is not as the statement says: changed, missing, or not in it."""
    lines = []
    for name, digest in sorted(subjects.items()):
        try:
            content = read_beneath(bundle_dir, name, MAX_BUNDLE_FILE_BYTES)
        except InputError:
            lines.append(f"{name}: missing (or not a regular file)")
            continue
        if hashlib.sha256(content).hexdigest() != digest:
            lines.append(f"{name}: differs from the provenance statement")
    for name in sorted(present_entries(bundle_dir) - subjects.keys() - SEALS):
        lines.append(f"{name}: not in the provenance statement")
    return lines


def sign_bundle(bundle_dir: Path, signing_key: Any) -> bytes:
    """The envelope of the bundle's provenance.json, once its files are what it says."""
    statement = read_bundle_file(bundle_dir, PROVENANCE)
    changed = differing_files(bundle_dir, subject_digests(statement, str(bundle_dir / PROVENANCE)))
    if changed:
        problems = [Problem(f"{bundle_dir}/{line}", "", "refusing to sign") for line in changed]
        raise InputError(problems)
    return sign_statement(statement, signing_key)


def read_envelope(path: Path, raw: bytes | None = None) -> Any:
    """The DSSE envelope of ``path`` (its bytes ``raw`` where already read): its first line (an
    .intoto.jsonl), or the whole file."""
    dsse, _ = _library()
    if raw is None:
        raw = read_foreign(path, MAX_BUNDLE_FILE_BYTES)
    text = raw.decode("utf-8", errors="replace")
    try:
        envelope = dsse.Envelope.from_dict(json.loads(text.strip().splitlines()[0]))
    except (ValueError, KeyError, TypeError, IndexError, AttributeError):
        raise InputError(Problem(str(path), "", "not a DSSE envelope")) from None
    if envelope.payload_type != PAYLOAD_TYPE:
        raise InputError(Problem(str(path), "payloadType", f"is not {PAYLOAD_TYPE}"))
    return envelope


def verify_provenance(bundle_dir: Path, public_key: Any, envelope_path: Path | None) -> list[str]:
    """What is wrong with the bundle's signed provenance (nothing: signed by ``public_key`` and
    every file as its statement says). The signature first: nothing of an unsigned payload is
    read."""
    if envelope_path is None:  # the bundle's own file: read beneath it, never through a link
        path = bundle_dir / PROVENANCE_ENVELOPE
        envelope = read_envelope(path, read_bundle_file(bundle_dir, PROVENANCE_ENVELOPE))
    else:
        path = envelope_path
        envelope = read_envelope(path)
    from securesystemslib.exceptions import UnverifiedSignatureError

    pae = envelope.pae()
    for signature in envelope.signatures.values():
        try:
            public_key.verify_signature(signature, pae)
            break
        except UnverifiedSignatureError:
            continue
    else:
        return [f"{path}: no signature by {public_key.keyid}"]
    lines = differing_files(bundle_dir, subject_digests(envelope.payload, str(path)))
    try:
        unsigned = read_bundle_file(bundle_dir, PROVENANCE)
    except InputError:
        unsigned = envelope.payload  # a bundle without the unsigned copy: the envelope is it
    if unsigned != envelope.payload:
        lines.append(f"{PROVENANCE}: differs from the signed statement")
    return lines
