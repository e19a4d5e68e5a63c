"""`gen sign` and `gen verify --pubkey`: the bundle's provenance statement signed with a site's
key, and checked before anything else is (generator/bundle/provenance.py does the work; this
module imports click only, as the command line's modules must)."""

from __future__ import annotations

import sys
from collections.abc import Callable
from functools import wraps
from pathlib import Path
from typing import Any, TypeVar

import click

from generator import TOOL
from generator.commands.options import PATH

F = TypeVar("F", bound=Callable[..., Any])


def check_signed_provenance(bundle: Path, pubkey: Path, envelope: Path | None) -> None:
    """One line on stderr: the provenance verified, or each file that is not as it says and
    exit status 1. A bad key or envelope raises InputError (exit 2)."""
    from generator.bundle.provenance import load_verifying_key, verify_provenance

    key = load_verifying_key(pubkey)
    problems = verify_provenance(bundle, key, envelope)
    for line in problems:
        click.echo(f"{TOOL}: provenance: {line}", err=True)
    if problems:
        sys.exit(1)
    click.echo(f"{TOOL}: provenance: signed by {key.keyid}; every file as it says", err=True)


def provenance_check(func: F) -> F:
    """--pubkey, --provenance and --provenance-only for `gen verify` (its BUNDLE argument): the
    signed statement is checked first, and a bundle that fails it is not compared further."""

    @click.option(
        "--provenance-only",
        is_flag=True,
        help="With --pubkey: check the signed provenance only (a build host), not the machine.",
    )
    @click.option(
        "--provenance",
        "envelope",
        type=PATH,
        metavar="FILE",
        help="The signed provenance (a DSSE envelope) if not BUNDLE/provenance.intoto.jsonl.",
    )
    @click.option(
        "--pubkey",
        type=PATH,
        metavar="FILE",
        help="First verify the bundle's signed provenance with this public key (PEM, ECDSA "
        "P-256): signed by it, and every file of the bundle as its statement says (exit 1 if "
        "not).",
    )
    @wraps(func)
    def wrapper(
        *args: Any,
        pubkey: Path | None,
        envelope: Path | None,
        provenance_only: bool,
        **kwargs: Any,
    ) -> Any:
        if pubkey is None and (envelope is not None or provenance_only):
            raise click.UsageError("--provenance and --provenance-only go with --pubkey")
        if pubkey is not None:
            check_signed_provenance(kwargs["bundle"], pubkey, envelope)
            if provenance_only:
                sys.exit(0)
        return func(*args, **kwargs)

    return wrapper  # type: ignore[return-value]


def sign_options(func: F) -> F:
    func = click.option(
        "-o",
        "--output",
        type=PATH,
        metavar="FILE",
        help="Write the envelope to FILE instead of BUNDLE/provenance.intoto.jsonl.",
    )(func)
    func = click.option(
        "--key",
        required=True,
        type=PATH,
        metavar="FILE",
        help="The site's private key: PEM, ECDSA P-256, unencrypted.",
    )(func)
    return click.argument("bundle", type=PATH, metavar="BUNDLE")(func)


def run_sign(bundle: Path, key: Path, output: Path | None) -> None:
    """Sign the bundle's provenance.json, once its files are what it says."""
    from generator.bundle.provenance import load_signing_key, sign_bundle
    from generator.commands.detect import write_atomically
    from generator.model.layout import PROVENANCE_ENVELOPE

    envelope = sign_bundle(bundle, load_signing_key(key))
    target = output or bundle / PROVENANCE_ENVELOPE
    write_atomically(target, envelope.decode("utf-8"))
    click.echo(f"wrote {target}")


SIGN_HELP = """Sign the bundle's provenance statement with the site's key.

\b
  gen sign out/dgx-h100-inference --key site-key.pem
  gen verify out/dgx-h100-inference --pubkey site-key.pub --provenance-only
  sh out/dgx-h100-inference/install.sh --check --pubkey site-key.pub

Every bundle carries provenance.json, an in-toto Statement v1 with a SLSA provenance v1
predicate: each file of the bundle with its sha256, the inputs' digests (hardware file,
profile, catalog), goldtune's version. This writes it signed, as a DSSE envelope, to
BUNDLE/provenance.intoto.jsonl: what cosign verify-blob-attestation, in-toto's and
securesystemslib's verifiers read, and install.sh --check --pubkey verifies with openssl. A
bundle whose files differ from its statement is not signed.

Exit status: 0 signed, 1 failure, 2 bad input (a changed bundle, a bad key; nothing written).
"""
