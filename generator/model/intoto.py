"""The names of the provenance formats, shared by the renderer that writes the statement and the
bundle reader that signs and verifies it: in-toto Statement v1 (github.com/in-toto/attestation
spec/v1/statement.md), SLSA provenance v1 (slsa.dev/spec/v1.0/provenance), and the DSSE
payload type of an in-toto statement (in-toto attestation spec/v1/envelope.md)."""

from __future__ import annotations

STATEMENT_TYPE = "https://in-toto.io/Statement/v1"
PREDICATE_TYPE = "https://slsa.dev/provenance/v1"
PAYLOAD_TYPE = "application/vnd.in-toto+json"
