"""Fuzzing each hostile class of issue 11 (hypothesis; `make test-long` runs 1,000 examples each).

- GRUB files: assignments drawn from the subset ``generator.verify.grubvars`` evaluates are
  compared with what ``sh`` computes for the same text (our generated text, run as the test user
  in a temporary directory); arbitrary shell-like text never raises and never runs.
- YAML inputs: any tag on any scalar, any key: exit 2 with one line, no traceback, no raw
  control character, nothing of the file beyond a short key.
- Bundles: any JSON as plan.json or manifest.json: an InputError or a plan, never another exception.
- Terminal text: ``printable`` leaves no control character and keeps printable text as it is.
- Captures (issue 29): a `gen detect --root` tree with one file's text, or one sysfs name, made
  hostile (numbers of thousands of digits, control characters, junk): exit 0 with YAML that
  parses and holds no control character, or exit 2 with one printable line; never a traceback.
- Fleet repositories (issue 29): a committed bundle of a `gen matrix --check` repository changed
  (a file's bytes, a planted file, a link, nested directories, a hostile name): exit 1 or 2 with
  a bounded report, never a traceback.
"""

from __future__ import annotations

import json
import shutil
import subprocess
import tempfile
from pathlib import Path

import pytest
import yaml
from click.testing import CliRunner
from hypothesis import given
from hypothesis import strategies as st

from generator.bundle.read import read_bundle
from generator.cli import main
from generator.errors import InputError
from generator.textsafe import printable, printable_lines
from generator.verify.grubvars import CMDLINE_VARS, parse_grub_files
from tests import detect_trees
from tests.conftest import MINIMAL_HW
from tests.generate import generate

# --- GRUB files ------------------------------------------------------------------------------

ARG = st.from_regex(r"[a-z_.]{1,8}(=[a-z0-9,.]{1,6})?", fullmatch=True)
NAME = st.sampled_from(CMDLINE_VARS)


@st.composite
def parts(draw: st.DrawFn) -> str:
    """One piece of a double-quoted value: text, or an expansion of one of the two variables."""
    name = draw(NAME)
    return draw(
        st.sampled_from(
            [
                draw(ARG),
                f"${name} ",
                f"${{{name}}}",
                f"${{{name}:+${name} }}",
                f"${{{name}:-{draw(ARG)}}}",
                f"${{{name}+x}}",
                f"${{{name}-{draw(ARG)}}}",
                " ",
                "\\$",
                '\\"',
            ]
        )
    )


@st.composite
def assignment(draw: st.DrawFn) -> str:
    name = draw(NAME)
    body = "".join(draw(st.lists(parts(), max_size=4)))
    quoting = draw(st.sampled_from(["double", "single", "bare"]))
    if quoting == "single":
        value = "'" + " ".join(draw(st.lists(ARG, max_size=3))) + "'"
    elif quoting == "bare":
        value = draw(ARG)
    else:
        value = f'"{body}"'
    prefix = draw(st.sampled_from(["", "export "]))
    comment = draw(st.sampled_from(["", "  # note", ""]))
    return f"{prefix}{name}={value}{comment}"


GRUB_FILES = st.lists(
    st.lists(assignment(), max_size=4).map(lambda lines: "\n".join(lines) + "\n"),
    min_size=1,
    max_size=3,
)


def sh_result(texts: list[str]) -> str:
    with tempfile.TemporaryDirectory() as tmp:
        paths = []
        for index, text in enumerate(texts):
            path = Path(tmp) / f"{index}.cfg"
            path.write_text(text)
            paths.append(str(path))
        script = (
            "unset GRUB_CMDLINE_LINUX GRUB_CMDLINE_LINUX_DEFAULT; "
            'for f in "$@"; do . "$f"; done; '
            'printf "%s %s" "${GRUB_CMDLINE_LINUX:-}" "${GRUB_CMDLINE_LINUX_DEFAULT:-}"'
        )
        done = subprocess.run(
            ["sh", "-ec", script, "sh", *paths],
            capture_output=True,
            text=True,
            timeout=10,
            check=True,
            env={"PATH": "/usr/bin:/bin"},
        )
        return done.stdout


@given(texts=GRUB_FILES)
def test_grub_parser_agrees_with_sh_on_plain_assignments(texts: list[str]) -> None:
    parsed = parse_grub_files([(f"{index}.cfg", text) for index, text in enumerate(texts)])
    assert parsed.unjudged == [], parsed.unjudged
    assert parsed.cmdline() == sh_result(texts)


SHELL_PIECES = [
    *"=$(){}`'\";:-+ \t\n\\#&|.!x",
    "GRUB_CMDLINE_LINUX",
    "GRUB_CMDLINE_LINUX_DEFAULT",
    "$(",
    "${",
    "if ",
    "fi",
    "export ",
]
SHELLISH = st.lists(st.sampled_from(SHELL_PIECES), max_size=40).map("".join)


@given(text=SHELLISH)
def test_grub_parser_never_raises_and_never_guesses_substitutions(text: str) -> None:
    parsed = parse_grub_files([("/etc/default/grub", text)])
    if parsed.cmdline() is not None:  # judged: then no substitution can have been part of a value
        assert all(value is None or "`" not in value for value in parsed.values.values() if value)


# --- YAML inputs -------------------------------------------------------------------------------

TAGS = st.sampled_from(
    [
        "!!bool",
        "!!int",
        "!!float",
        "!!timestamp",
        "!!str",
        "!!null",
        "!!binary",
        "!!map",
        "!!seq",
        "!!set",
        "!!omap",
        "!!pairs",
        "!!merge",
        "!!value",
        "!custom",
        "!!python/name:os.system",
    ]
)
SCALARS = st.one_of(
    st.text(st.characters(blacklist_categories=["Cs"]), max_size=12),
    st.integers().map(str),
    st.just("9" * 5000),
)


@given(
    tag=TAGS, scalar=SCALARS, where=st.sampled_from(["memory_gib", "name", "cpu.sockets", "key"])
)
def test_any_tagged_scalar_is_exit_2_one_line(tag: str, scalar: str, where: str) -> None:
    value = f"{tag} {json.dumps(scalar)}"
    text = MINIMAL_HW
    if where == "memory_gib":
        text = text.replace("memory_gib: 256", f"memory_gib: {value}")
    if where == "cpu.sockets":
        text = text.replace("  sockets: 2", f"  sockets: {value}")
    text += {"name": f"name: {value}\n", "key": f"{json.dumps(scalar)}: 1\n"}.get(where, "")
    with tempfile.TemporaryDirectory() as tmp:
        hw = Path(tmp) / "hw.yaml"
        hw.write_text(text)
        result = generate(hw, "inference", Path(tmp) / "bundle")
        if result.exit_code == 0:
            return  # some tags are harmless (!!str "8" as a name)
        assert result.exit_code == 2, result.output
        error = result.exception
        crashed = isinstance(error, Exception) and not isinstance(error, SystemExit)
        assert not crashed, result.exception
        lines = result.stderr.strip().splitlines()
        assert len(lines) == 1 and len(lines[0]) < 400, result.stderr
        assert printable(lines[0]) == lines[0]
        assert not (Path(tmp) / "bundle").exists()


# --- bundles -----------------------------------------------------------------------------------

JSON = st.recursive(
    st.none() | st.booleans() | st.integers() | st.text(max_size=5),
    lambda inner: (
        st.lists(inner, max_size=3) | st.dictionaries(st.text(max_size=6), inner, max_size=3)
    ),
    max_leaves=12,
)
PLANISH = st.fixed_dictionaries(
    {"format": st.just(1), "tool": st.just("goldtune")},
    optional={"settings": JSON, "notes": JSON, "warnings": JSON, "hardware": JSON},
)
MANIFESTISH = st.fixed_dictionaries({"files": JSON})


@given(plan=st.one_of(JSON, PLANISH), manifest=st.one_of(JSON, MANIFESTISH))
def test_any_json_in_a_bundle_is_bad_input_or_a_plan(plan: object, manifest: object) -> None:
    with tempfile.TemporaryDirectory() as tmp:
        root = Path(tmp)
        (root / "plan.json").write_text(json.dumps(plan))
        (root / "manifest.json").write_text(json.dumps(manifest))
        try:
            read_bundle(root)
        except InputError as error:
            assert error.exit_code == 2 and all(printable(line) == line for line in error.lines())


# --- terminal text -----------------------------------------------------------------------------


@given(text=st.text())
def test_printable_leaves_no_control_character(text: str) -> None:
    shown = printable(text)
    bidi = "\u2028\u2029\u202a\u202b\u202c\u202d\u202e\u2066\u2067\u2068\u2069"
    assert not any(ord(c) < 0x20 or 0x7F <= ord(c) <= 0x9F or c in bidi for c in shown)
    assert all(c in shown for c in text if c.isprintable() and c not in "\u2028\u2029")
    assert set(printable_lines(text)) - set(printable(text)) <= {"\n", "\t"}


@pytest.mark.parametrize(
    "kernel", ["6.8; rm -rf /", "6.8 && id", "6.8$(id)", "6.8\n", "6.8.0-45-generic\x1b[2J"]
)
def test_kernel_release_with_shell_text_is_refused(kernel: str, tmp_path: Path) -> None:
    hw = tmp_path / "hw.yaml"
    hw.write_text(MINIMAL_HW + f"os: {{kernel: {json.dumps(kernel)}}}\n")
    result = generate(hw, "inference", tmp_path / "bundle")
    assert result.exit_code == 2 and "os.kernel: invalid value" in result.stderr, result.output


# --- captures (gen detect --root) --------------------------------------------------------------

CAPTURE_FILES = [
    "proc/meminfo",
    "proc/cpuinfo",
    "proc/self/smaps",
    "proc/self/mountinfo",
    "proc/net/route",
    "proc/sys/kernel/osrelease",
    "etc/os-release",
    "sys/devices/system/cpu/online",
    "sys/devices/system/node/node0/cpulist",
    "goldtune-capture/nvidia-smi-q-x.xml",
]
HOSTILE_TEXT = st.one_of(
    st.text(st.characters(blacklist_categories=["Cs"]), max_size=40),
    st.sampled_from(["9" * 5000, "1e999", "nan", "-1", "0", "\x1b[2J", "a\nmemory_gib: 1"]),
    st.builds(
        lambda key, number: f"{key}: {number} kB\n",
        st.sampled_from(["MemTotal", "KernelPageSize", "Node 0 MemTotal"]),
        st.one_of(st.integers(min_value=0), st.just("9" * 5000)),
    ),
    st.builds(
        lambda number: (
            f'<nvidia_smi_log><gpu id="00000000:00:04.0"><fb_memory_usage><total>'
            f"{number} MiB</total></fb_memory_usage></gpu></nvidia_smi_log>"
        ),
        st.one_of(st.integers().map(str), st.just("9" * 5000), st.just("inf")),
    ),
)
HOSTILE_NAME = st.text(
    st.characters(blacklist_categories=["Cs"], blacklist_characters="/\x00"),
    min_size=1,
    max_size=20,
).filter(lambda name: name not in (".", ".."))


@given(
    where=st.sampled_from(CAPTURE_FILES),
    text=HOSTILE_TEXT,
    rename=st.one_of(
        st.none(), st.tuples(st.sampled_from(["sys/block", "sys/class/net"]), HOSTILE_NAME)
    ),
)
def test_a_hostile_capture_is_yaml_or_one_line(
    where: str, text: str, rename: tuple[str, str] | None
) -> None:
    with tempfile.TemporaryDirectory() as tmp:
        root = detect_trees.vm_without_gpus().build(Path(tmp) / "tree")
        target = root / where
        target.parent.mkdir(parents=True, exist_ok=True)
        target.write_text(text, errors="surrogateescape")
        if rename is not None:
            folder, name = rename
            first = sorted((root / folder).iterdir())[0]
            if not (root / folder / name).exists():
                first.rename(root / folder / name)
        result = CliRunner().invoke(main, ["detect", "--root", str(root)])
    crashed = result.exception is not None and not isinstance(result.exception, SystemExit)
    assert not crashed, repr(result.exception)
    assert result.exit_code in (0, 2), (result.exit_code, result.stderr)
    if result.exit_code == 2:
        lines = result.stderr.strip().splitlines()
        assert len(lines) == 1 and printable(lines[0]) == lines[0], result.stderr
        return
    assert all(c == "\n" or printable(c) == c for c in result.stdout), result.stdout
    assert isinstance(yaml.safe_load(result.stdout), dict)


# --- fleet repositories (gen matrix --check) ----------------------------------------------------

FLEET_ARGS = ["matrix", "--hw", "l4-inference", "--profile", "inference", "-j", "1"]


@pytest.fixture(scope="module")
def committed_fleet(tmp_path_factory: pytest.TempPathFactory) -> Path:
    fleet = tmp_path_factory.mktemp("fleet") / "bundles"
    result = CliRunner().invoke(main, [*FLEET_ARGS, "-o", str(fleet)])
    assert result.exit_code == 0, result.output
    return fleet


def _plant(bundle: Path, change: str, name: str, data: bytes) -> None:
    inner = bundle / "rootfs/etc"
    if change == "bytes":
        victim = sorted(p for p in inner.rglob("*") if p.is_file())[0]
        victim.write_bytes(data)
    elif change == "file":
        (inner / name).write_bytes(data)
    elif change == "link":
        (inner / name).symlink_to("/etc/passwd")
    elif change == "nested":
        folder = bundle / "n"
        for _ in range(40):
            folder = folder / "d"
        folder.mkdir(parents=True)
    elif change == "manifest":
        (bundle / "manifest.json").write_bytes(data)


@given(
    change=st.sampled_from(["bytes", "file", "link", "nested", "manifest"]),
    name=HOSTILE_NAME,
    data=st.one_of(st.binary(max_size=64), st.just(b"9" * 5000), st.just(b"[" * 5000)),
)
def test_a_hostile_fleet_repository_is_a_report_or_one_line(
    committed_fleet: Path, change: str, name: str, data: bytes
) -> None:
    with tempfile.TemporaryDirectory() as tmp:
        fleet = Path(tmp) / "bundles"
        shutil.copytree(committed_fleet, fleet, symlinks=True)
        _plant(next(fleet.iterdir()), change, name, data)
        result = CliRunner().invoke(main, [*FLEET_ARGS, "--check", str(fleet)])
    crashed = result.exception is not None and not isinstance(result.exception, SystemExit)
    assert not crashed, repr(result.exception)
    assert result.exit_code in (1, 2), (result.exit_code, result.output[-2000:])
    assert len(result.stdout) < 1_000_000
    if result.exit_code == 2:
        assert len(result.stderr.strip().splitlines()) <= 12, result.stderr
