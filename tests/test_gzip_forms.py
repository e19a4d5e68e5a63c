"""The two gzip forms of the user-data (gzipforms.compressed_forms): the MIME form's deflate reuses
the plain form's from its second block on. Each form must inflate to exactly its text for
Python's gzip, for the command-line gzip, and for cloud-init's own ``util.decomp_gzip``."""

from __future__ import annotations

import gzip
import hashlib
import shutil
import subprocess
import zlib
from functools import cache
from pathlib import Path

import pytest
from hypothesis import given
from hypothesis import strategies as st

from generator.commands.generate import render_for
from generator.model import layout
from generator.render import gzipforms, providers
from generator.render.cloudinit import mime_user_data
from generator.render.gzipforms import FIRST_BLOCK, WINDOW, compressed_forms

SYSTEM_PYTHON = "/usr/bin/python3"
TEAM = b"#cloud-config\nwrite_files:\n  - path: /etc/team.conf\n    content: ours\n"
# cloud-init's own inflate (cloudinit/util.py), strict: decomp_gzip's default quiet=True hands
# back the compressed bytes unchanged when they do not inflate.
DECOMP_GZIP = """
import hashlib, sys
from cloudinit import util
for path in sys.argv[1:]:
    with open(path, "rb") as f:
        data = util.decomp_gzip(f.read(), quiet=False, decode=False)
    print(hashlib.sha256(data).hexdigest())
"""

needs_cloud_init = pytest.mark.skipif(
    shutil.which("cloud-init") is None or not Path(SYSTEM_PYTHON).exists(),
    reason="cloud-init is not installed",
)


@cache
def shipped_user_data() -> bytes:
    """A shipped user-data: ~58 KB, longer than deflate's window and the first block."""
    return render_for("dgx-h100", "inference")[layout.USER_DATA][0]


def forms_of(user_data: bytes, parts: tuple[bytes, ...] = ()) -> dict[str, tuple[bytes, bytes]]:
    """Each gzip form with the text it must inflate to."""
    mime = mime_user_data(user_data, parts)
    plain_gz, mime_gz = compressed_forms(user_data, mime)
    return {"plain": (plain_gz, user_data), "mime": (mime_gz, mime)}


def shared_segment(user_data: bytes, level: int = gzipforms.FAST_LEVEL) -> bytes:
    """What the MIME form reuses of the plain form's deflate: all but its first block."""
    return gzipforms._deflated_user_data(user_data, level)[1]


def assert_one_member_of(packed: bytes, text: bytes) -> None:
    """One gzip member holding exactly ``text``, its trailer right (zlib checks CRC-32 and
    ISIZE), and nothing after it: a final block set mid-stream leaves bytes unused."""
    inflater = zlib.decompressobj(31)
    assert inflater.decompress(packed) == text
    assert inflater.eof and inflater.unused_data == b""
    assert gzip.decompress(packed) == text


def test_both_shipped_forms_inflate_to_their_text() -> None:
    files = render_for("dgx-h100", "inference")
    for packed, text in (
        (layout.USER_DATA_GZ, layout.USER_DATA),
        (layout.USER_DATA_MIME_GZ, layout.USER_DATA_MIME),
    ):
        assert_one_member_of(files[packed][0], files[text][0])


def test_the_mime_form_reuses_the_user_data_deflate() -> None:
    user_data = shipped_user_data()
    (plain_gz, _), (mime_gz, _) = forms_of(user_data).values()
    rest = shared_segment(user_data)
    assert len(rest) > len(mime_gz) * 3 // 4  # most of it, past the first block
    assert rest in plain_gz and rest in mime_gz


def test_a_team_part_before_ours_still_shares_the_deflate() -> None:
    user_data = shipped_user_data()
    forms = forms_of(user_data, (TEAM, TEAM))
    for packed, text in forms.values():
        assert_one_member_of(packed, text)
    assert shared_segment(user_data) in forms["mime"][0]


def test_a_non_ascii_user_data_is_deflated_whole() -> None:
    """Its MIME part is base64 (`_mime_part`): the user-data is not in it verbatim."""
    user_data = shipped_user_data() + "# caf\u00e9\n".encode()
    forms = forms_of(user_data)
    for packed, text in forms.values():
        assert_one_member_of(packed, text)
    mime = forms["mime"][1]
    # base64 hides the text's repetitions: the MIME form is over EC2's limit at the fast level
    levels = (gzipforms.FAST_LEVEL, gzipforms.SMALLEST_LEVEL)
    assert forms["mime"][0] in [gzip.compress(mime, compresslevel=x, mtime=0) for x in levels]


@pytest.mark.parametrize(
    "size", [0, 1, FIRST_BLOCK - 1, FIRST_BLOCK, FIRST_BLOCK + 1, 3 * WINDOW + 5]
)
@pytest.mark.parametrize("head_size", [0, 7, WINDOW + 100])
def test_any_split_inflates_to_its_text(size: int, head_size: int) -> None:
    """User-data shorter than the first block, as long, longer than the window; a head long
    enough to push the window's start past it; repetitive text, so that matches reach far."""
    pattern = b"write_files: /etc/sysctl.d/90-goldtune.conf 0644 net.core.rmem_max\n"
    user_data = (pattern * (size // len(pattern) + 1))[:size]
    head = (b"Content-Type: text/cloud-config\n" * (head_size // 32 + 1))[:head_size]
    mime = head + user_data + b"--end--\n"
    plain_gz, mime_gz = compressed_forms(user_data, mime)
    assert_one_member_of(plain_gz, user_data)
    assert_one_member_of(mime_gz, mime)


@given(
    user_data=st.binary(max_size=3 * FIRST_BLOCK),
    head=st.binary(max_size=600),
    tail=st.binary(max_size=600),
)
def test_any_bytes_around_the_user_data_inflate(user_data: bytes, head: bytes, tail: bytes) -> None:
    mime = head + user_data + tail
    plain_gz, mime_gz = compressed_forms(user_data, mime)
    assert_one_member_of(plain_gz, user_data)
    assert_one_member_of(mime_gz, mime)


@pytest.mark.parametrize("non_ascii", [False, True], ids=["spliced", "whole"])
def test_the_forms_are_the_same_run_to_run(non_ascii: bool) -> None:
    """No timestamp, no file name; the same bytes from a second render."""
    user_data = shipped_user_data() + ("# caf\u00e9\n".encode() if non_ascii else b"")
    first, second = forms_of(user_data), forms_of(bytes(user_data))
    assert first == second
    for packed, _ in first.values():
        assert packed[:10] in (gzipforms.gzip_header(6), gzipforms.gzip_header(9))
        assert packed[4:8] == b"\0\0\0\0"  # mtime
        assert packed[3] == 0  # flags: no name, no comment, no extra field


def write_forms(tmp_path: Path) -> dict[Path, bytes]:
    """The plain, MIME and team-part MIME forms on disk, with the text each must give."""
    user_data = shipped_user_data()
    written = {}
    for label, parts in (("", ()), ("team-", (TEAM,))):
        for name, (packed, text) in forms_of(user_data, parts).items():
            path = tmp_path / f"{label}{name}.gz"
            path.write_bytes(packed)
            written[path] = text
    return written


def test_the_gzip_command_reads_both_forms(tmp_path: Path) -> None:
    for path, text in write_forms(tmp_path).items():
        assert subprocess.run(["gzip", "-t", str(path)], capture_output=True).returncode == 0
        result = subprocess.run(["zcat", str(path)], capture_output=True)
        assert result.returncode == 0 and result.stdout == text, result.stderr


@needs_cloud_init
def test_cloud_init_inflates_both_forms(tmp_path: Path) -> None:
    written = write_forms(tmp_path)
    result = subprocess.run(
        [SYSTEM_PYTHON, "-c", DECOMP_GZIP, *map(str, written)],
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert result.returncode == 0, result.stderr
    assert result.stdout.split() == [hashlib.sha256(text).hexdigest() for text in written.values()]


# --- the level: 6 unless a form would not fit the smallest gzip-taking limit (EC2's) ------------


def test_a_shipped_bundle_far_from_the_limit_is_deflated_at_the_fast_level() -> None:
    user_data = shipped_user_data()
    mime = mime_user_data(user_data)
    forms = compressed_forms(user_data, mime)
    assert forms == gzipforms._compressed_forms(user_data, mime, gzipforms.FAST_LEVEL)
    assert max(map(len, forms)) <= providers.gzip_forms_limit() == 16 * 1024


@pytest.mark.parametrize("parts", [(), (TEAM,)], ids=["alone", "team-part"])
def test_forms_over_the_limit_at_the_fast_level_are_deflated_at_9(
    monkeypatch: pytest.MonkeyPatch, parts: tuple[bytes, ...]
) -> None:
    user_data = shipped_user_data()
    mime = mime_user_data(user_data, parts)
    fast = gzipforms._compressed_forms(user_data, mime, gzipforms.FAST_LEVEL)
    smallest = gzipforms._compressed_forms(user_data, mime, gzipforms.SMALLEST_LEVEL)
    # the larger fast form one byte over the limit: both forms go to level 9
    monkeypatch.setattr(gzipforms, "gzip_forms_limit", lambda: max(map(len, fast)) - 1)
    assert compressed_forms(user_data, mime) == smallest
    assert [form[:10] for form in smallest] == [gzipforms.gzip_header(9)] * 2
    for packed, text in zip(smallest, (user_data, mime), strict=True):
        assert_one_member_of(packed, text)
    # exactly at the limit: the fast forms
    monkeypatch.setattr(gzipforms, "gzip_forms_limit", lambda: max(map(len, fast)))
    assert compressed_forms(user_data, mime) == fast


def test_every_form_fits_a_limit_it_would_fit_at_level_9(monkeypatch: pytest.MonkeyPatch) -> None:
    """For any limit between the two levels' sizes, the forms written fit wherever the level-9
    forms would: choosing the fast level never costs a gzipforms."""
    user_data = shipped_user_data() + b"# and a part of its own\n"
    mime = mime_user_data(user_data, (TEAM,))
    fast = gzipforms._compressed_forms(user_data, mime, gzipforms.FAST_LEVEL)
    smallest = gzipforms._compressed_forms(user_data, mime, gzipforms.SMALLEST_LEVEL)
    sizes = sorted({*map(len, fast), *map(len, smallest)})
    for limit in range(sizes[0] - 2, sizes[-1] + 3):
        monkeypatch.setattr(gzipforms, "gzip_forms_limit", lambda limit=limit: limit)
        written = compressed_forms(user_data, mime)
        for ours, level_9 in zip(written, smallest, strict=True):
            assert len(ours) <= limit or len(level_9) > limit, limit


def test_a_form_over_the_limit_is_the_smaller_of_spliced_and_whole(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """A team part that carries text like the user-data's own (a copy of a script) makes one
    whole deflate of the MIME form smaller than the spliced one, whose user-data segments cannot
    refer back to the part: past the limit every byte counts, so the smaller is written."""
    user_data = shipped_user_data()
    lines = user_data.decode().splitlines(keepends=True)[400:900]
    team = b"#cloud-config\n# a copy of our scripts\n" + "".join(lines).encode()
    mime = mime_user_data(user_data, (team,))
    spliced = gzipforms._compressed_forms(user_data, mime, gzipforms.SMALLEST_LEVEL)
    whole = [gzip.compress(text, compresslevel=9, mtime=0) for text in (user_data, mime)]
    assert len(whole[1]) < len(spliced[1])  # the case this test is about
    monkeypatch.setattr(gzipforms, "gzip_forms_limit", lambda: 1000)  # every form over it
    written = compressed_forms(user_data, mime)
    assert written == (spliced[0], whole[1])  # the plain form's splice is the smaller
    for packed, text in zip(written, (user_data, mime), strict=True):
        assert_one_member_of(packed, text)
