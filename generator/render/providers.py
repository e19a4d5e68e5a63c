"""The cloud providers' user-data limits, and which form of a bundle's user-data fits each."""

# No `from __future__ import annotations`: a NamedTuple turns each string annotation into
# a compiled ForwardRef, ~0.15 ms a record at import (bench/bench.py's cold gen).
import hashlib
from collections.abc import Mapping
from typing import Any, NamedTuple

from generator.model import layout
from generator.render.cloudinit import CloudInitOptions


class ProviderLimit(NamedTuple):
    provider: str
    limit_bytes: int  # of the user-data as given, before the API's own base64
    takes_bytes: bool  # the field carries any bytes (the gzip form), not only text
    source: str


PROVIDER_LIMITS = (
    ProviderLimit(
        "ec2",
        16 * 1024,
        True,
        "https://docs.aws.amazon.com/AWSEC2/latest/UserGuide/instancedata-add-user-data.html: "
        "'User data is limited to 16 KB, in raw form, before it is base64-encoded'",
    ),
    ProviderLimit(
        "azure",
        65535,
        True,
        "Azure Compute REST API, OSProfile.customData: 'a base-64 encoded string ... decoded "
        "to a binary array ... The maximum length of the binary array is 65535 bytes'",
    ),
    ProviderLimit(
        "gcp",
        256 * 1024,
        False,  # a metadata value is a string: the gzip form cannot be one
        "Compute Engine API, Metadata items[].value: 'free-form strings ... size must be less "
        "than or equal to 262144 bytes (256 KiB)' (the user-data key cloud-init's GCE source "
        "reads)",
    ),
)


# the forms that carry every --cloud-init-part beside goldtune's own
MIME_FORMS = (layout.USER_DATA_MIME, layout.USER_DATA_MIME_GZ)


def fits(limit: ProviderLimit, path: str, size: int) -> bool:
    return size <= limit.limit_bytes and (limit.takes_bytes or path not in layout.GZIP_FORMS)


def gzip_forms_limit() -> int:
    """The smallest user-data limit of a provider whose field takes the gzip forms (bytes)."""
    return min(limit.limit_bytes for limit in PROVIDER_LIMITS if limit.takes_bytes)


def delivery_sizes(
    files: Mapping[str, tuple[bytes, int]], options: CloudInitOptions
) -> dict[str, Any]:
    """Each user-data form's size and, per provider, the forms that fit its limit and carry the
    whole delivery (with --cloud-init-part files only the MIME forms carry them: user-data and
    user-data.gz, goldtune's part alone, fit nothing then); the digest of each part in the MIME
    forms, and whether power_state was asked for."""
    forms = [path for path in layout.USER_DATA_FORMS if path in files]
    sizes = {path: len(files[path][0]) for path in forms}
    complete = [path for path in forms if path in MIME_FORMS] if options.parts else forms
    return {
        "parts": [hashlib.sha256(part).hexdigest() for part in options.parts],
        "reboot": options.reboot,
        "bytes": sizes,
        "fits": {
            limit.provider: [path for path in complete if fits(limit, path, sizes[path])]
            for limit in PROVIDER_LIMITS
        },
    }
