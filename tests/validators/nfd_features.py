"""Node Feature Discovery's reading of a features.d file and its label rules, ported.

The reading is kubernetes-sigs/node-feature-discovery source/local/local.go: getFileContent
(a regular file of at most MaxFeatureFileSize = 65536 bytes, else the whole file is ignored;
lines split on "\\n"), parseFeatureFile (each line trimmed of white space; empty lines skipped; a
line starting with "#" is a comment, and one starting with "# +" a directive, parseDirectives:
expiry-time=<RFC 3339>, no-label, no-feature, anything else an error; every other line is
``<key>[=<value>]``, split at the first "=", the value "true" when there is none).

The rules a label must pass are those nfd-worker applies to the local source (pkg/nfd-worker/
nfd-worker.go GetFeatureLabels: validation.IsQualifiedName of the name, IsValidLabelValue of the
value, a label failing either is dropped) and nfd-master (pkg/apis/nfd/validate/validate.go
Label: a name without a namespace is refused; a kubernetes.io namespace only as
feature.node.kubernetes.io, profile.node.kubernetes.io or a sub-namespace of either). The two
Kubernetes checks are apimachinery's pkg/util/validation/validation.go: a qualified name is
[prefix/]name, the name at most 63 characters of [A-Za-z0-9._-] with alphanumeric ends, the
prefix a DNS-1123 subdomain (at most 253 characters, lower-case labels joined by dots); a label
value is empty or at most 63 characters of the same set with alphanumeric ends.
"""

from __future__ import annotations

import re

MAX_FEATURE_FILE_SIZE = 65536
DIRECTIVE_PREFIX = "# +"
DIRECTIVES = ("expiry-time", "no-label", "no-feature")
NAME = re.compile(r"(?:[A-Za-z0-9][-A-Za-z0-9_.]*)?[A-Za-z0-9]")
NAME_MAX = 63
SUBDOMAIN = re.compile(r"[a-z0-9](?:[-a-z0-9]*[a-z0-9])?(?:\.[a-z0-9](?:[-a-z0-9]*[a-z0-9])?)*")
SUBDOMAIN_MAX = 253
VALUE = re.compile(r"(?:(?:[A-Za-z0-9][-A-Za-z0-9_.]*)?[A-Za-z0-9])?")
VALUE_MAX = 63
ALLOWED_K8S_NS = ("feature.node.kubernetes.io", "profile.node.kubernetes.io")


def parse_feature_file(text: str) -> tuple[dict[str, str], list[str]]:
    """(labels as NFD reads them, directive errors), for a file with no expiry in the past."""
    labels: dict[str, str] = {}
    errors: list[str] = []
    skip_label = False
    for raw in text.split("\n"):
        line = raw.strip()
        if not line:
            continue
        if line.startswith("#"):
            if line.startswith(DIRECTIVE_PREFIX):
                key = line[len(DIRECTIVE_PREFIX) :].split("=", 1)[0]
                if key not in DIRECTIVES:
                    errors.append(f"unknown feature file directive {key!r}")
                skip_label = skip_label or key == "no-label"
            continue
        key, sep, value = line.partition("=")
        if not skip_label:
            labels[key] = value if sep else "true"
        skip_label = False
    return labels, errors


def label_problems(name: str, value: str) -> list[str]:
    """Why nfd-worker or nfd-master would drop this label (empty: it is published)."""
    problems = []
    prefix, slash, short = name.rpartition("/")
    if not slash:
        problems.append(f"{name}: no namespace (nfd-master refuses unprefixed names)")
    elif not (len(prefix) <= SUBDOMAIN_MAX and SUBDOMAIN.fullmatch(prefix)):
        problems.append(f"{name}: the namespace is not a DNS subdomain")
    elif (prefix == "kubernetes.io" or prefix.endswith(".kubernetes.io")) and not any(
        prefix == ns or prefix.endswith("." + ns) for ns in ALLOWED_K8S_NS
    ):
        problems.append(f"{name}: a kubernetes.io namespace NFD denies")
    if not (len(short) <= NAME_MAX and NAME.fullmatch(short)):
        problems.append(f"{name}: not a qualified name")
    if not (len(value) <= VALUE_MAX and VALUE.fullmatch(value)):
        problems.append(f"{name}={value}: not a label value (63 characters of [A-Za-z0-9._-])")
    return problems


def problems_of(content: bytes) -> list[str]:
    """What NFD would ignore, refuse or drop in this feature file (empty: every label is set)."""
    if len(content) > MAX_FEATURE_FILE_SIZE:
        return [f"{len(content)} bytes: NFD ignores a file over {MAX_FEATURE_FILE_SIZE}"]
    labels, problems = parse_feature_file(content.decode("utf-8", errors="replace"))
    if not labels:
        problems.append("no label")
    for name, value in labels.items():
        problems += label_problems(name, value)
    return problems
