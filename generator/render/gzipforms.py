"""The two gzip forms of the user-data, the plain one and the MIME one, deflated once for both."""

from __future__ import annotations

import gzip
import struct
import zlib
from typing import Protocol

from generator.render.providers import gzip_forms_limit

# zlib's default level, and its smallest output (see compressed_forms).
FAST_LEVEL = 6
SMALLEST_LEVEL = 9


def gzip_header(level: int) -> bytes:
    """gzip's member header (RFC 1952, 2.3): deflate, no flags, mtime 0 (byte-identical run to
    run), XFL 2 at level 9 ("maximum compression") and 0 at the levels between, OS 3 (Unix): what
    gzip.compress(..., mtime=0) writes through zlib."""
    extra_flags = b"\x02" if level == SMALLEST_LEVEL else b"\x00"
    return b"\x1f\x8b\x08\x00\x00\x00\x00\x00" + extra_flags + b"\x03"


# How far back a deflate match reaches (RFC 1951, 2.2: distances up to 32768 bytes).
WINDOW = 32 * 1024
# The user-data's first bytes get a deflate block of their own, which the MIME form deflates
# again after its head: zlib puts a whole user-data in one block, one set of Huffman codes, and
# its first part (the small config files) is not like the rest (the scripts). Measured over the
# 267 bundles of every shipped system x profile, distro, and docker + Kubernetes variant: at
# 8-14 KiB both forms are 45-80 bytes smaller than one whole deflate; with the head alone in the
# MIME form's first block the plain form is 6-7 larger and the MIME form 56-74 (two of them then
# over EC2's 16 KB).
FIRST_BLOCK = 8 * 1024
# A final empty block (RFC 1951, 3.2.3 and 3.2.6: BFINAL 1, fixed codes, end-of-block 0000000).
FINAL_EMPTY_BLOCK = b"\x03\x00"


def compressed_forms(user_data: bytes, mime: bytes) -> tuple[bytes, bytes]:
    """gzip of the user-data and of its MIME form (mime_user_data), each one gzip member.

    cloud-init inflates gzip-compressed user-data before reading it ("Gzip compressed content",
    cloud-init's User-Data Formats documentation; ``util.decomp_gzip`` in user_data.py).

    The level: zlib's default (FAST_LEVEL), unless a form would then be larger than the smallest
    limit of a provider that takes the gzip forms (EC2's 16 KB, PROVIDER_LIMITS); then both are
    deflated again at SMALLEST_LEVEL. So a form fits every provider it would fit if it were
    always deflated at 9 (where the fast forms fit they are kept; where they do not, the level-9
    forms are written), and only bundles near that limit pay for the last bytes: on a shipped
    user-data (dgx-h100 inference, 58 KB) level 9 is 0.9 % smaller (117 bytes of 13.6 KB) and
    takes about three times the CPU. Of the 267 shipped system x profile x distro and docker
    bundles, the 8 docker + Kubernetes ones on 8-GPU systems get 9.
    """
    limit = gzip_forms_limit()
    forms = _compressed_forms(user_data, mime, FAST_LEVEL)
    if max(len(form) for form in forms) <= limit:
        return forms
    plain, mime_gz = _compressed_forms(user_data, mime, SMALLEST_LEVEL)
    # Spliced, a form can come out a few bytes larger than one whole deflate of its text (with
    # a large team part, up to 15 bytes in a review's 261 cases): over the limit, the smaller.
    return _smaller(plain, user_data, limit), _smaller(mime_gz, mime, limit)


def _smaller(form: bytes, text: bytes, limit: int) -> bytes:
    """``form``, or the whole level-9 deflate of ``text`` where that is smaller and ``form`` is
    over ``limit``."""
    if len(form) <= limit:
        return form
    whole = gzip.compress(text, compresslevel=SMALLEST_LEVEL, mtime=0)
    return whole if len(whole) < len(form) else form


def _compressed_forms(user_data: bytes, mime: bytes, level: int) -> tuple[bytes, bytes]:
    """Both gzip forms at ``level``. A MIME form carrying the user-data verbatim (ASCII:
    `_mime_part`'s 7bit) reuses the user-data's deflate from its second block on, as pigz joins
    blocks compressed apart: the two forms cost one deflate of the user-data, not two. Any
    other MIME form (base64) is deflated whole."""
    first, rest = _deflated_user_data(user_data, level)
    plain = _gzip_member((first, rest, FINAL_EMPTY_BLOCK), user_data, level)
    at = mime.rfind(user_data)
    if at < 0:
        return plain, gzip.compress(mime, compresslevel=level, mtime=0)
    end = at + len(user_data)
    # what comes before the user-data (the MIME head, any team parts), then its first bytes
    head = mime[:at] + user_data[:FIRST_BLOCK]
    mime_first = _deflated(_deflater(level), head, zlib.Z_SYNC_FLUSH)
    # the closing boundary may match what the decoder's window holds: the bytes just before it
    window = mime[max(0, end - WINDOW) : end]
    tail = _deflated(_deflater(level, window), mime[end:], zlib.Z_FINISH)
    return plain, _gzip_member((mime_first, rest, tail), mime, level)


def _deflated_user_data(user_data: bytes, level: int) -> tuple[bytes, bytes]:
    """The user-data's raw deflate in two segments, each ending in a sync flush (the block ends,
    then an empty stored block: byte-aligned, not final; RFC 1951, 3.2.3-3.2.4): its first
    FIRST_BLOCK bytes, and the rest. The rest's matches reach no further back than the
    user-data's first byte, so it goes on any stream whose output so far ends with those first
    bytes: the plain form's, or the MIME form's (its head, then the same first bytes)."""
    deflater = _deflater(level)
    first = _deflated(deflater, user_data[:FIRST_BLOCK], zlib.Z_SYNC_FLUSH)
    return first, _deflated(deflater, user_data[FIRST_BLOCK:], zlib.Z_SYNC_FLUSH)


class Deflater(Protocol):
    """What ``zlib.compressobj`` returns, as far as the gzip forms use it."""

    def compress(self, data: bytes, /) -> bytes: ...

    def flush(self, mode: int = ..., /) -> bytes: ...


def _deflater(level: int, window: bytes = b"") -> Deflater:
    """Raw deflate (no zlib wrapper) at ``level``, zlib's default memory level as gzip.compress
    has it; ``window``: the output before this segment, which its matches may refer to."""
    if window:
        return zlib.compressobj(level, zlib.DEFLATED, -15, 8, zlib.Z_DEFAULT_STRATEGY, window)
    return zlib.compressobj(level, zlib.DEFLATED, -15)


def _deflated(deflater: Deflater, data: bytes, flush: int) -> bytes:
    return deflater.compress(data) + deflater.flush(flush)


def _gzip_member(segments: tuple[bytes, ...], content: bytes, level: int) -> bytes:
    """One gzip member of a deflate stream given in segments, the last one final: the header,
    the stream, then CRC-32 and ISIZE (the length modulo 2**32), little-endian (RFC 1952, 2.3.1)."""
    trailer = struct.pack("<II", zlib.crc32(content), len(content) & 0xFFFFFFFF)
    return gzip_header(level) + b"".join(segments) + trailer
