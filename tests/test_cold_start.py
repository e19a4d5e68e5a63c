"""The shortcuts of a cold `gen` (issue 17) give exactly what the plain code gives."""

from __future__ import annotations

import os
import re
import stat
import subprocess
import sys
from pathlib import Path

import jinja2
import pytest

from generator.cache import file_bytes, read_entry
from generator.paths import files_ending
from generator.patterns import compiled_at_first_use
from generator.render.render import TemplateLoader, make_environment


def test_files_ending_lists_what_glob_lists(tmp_path: Path) -> None:
    for name in ("b.yaml", "a.yaml", ".hidden.yaml", ".yaml", "c.yml", "d.yaml.bak", "E.YAML"):
        (tmp_path / name).write_text("x: 1\n")
    (tmp_path / "folder.yaml").mkdir()
    assert files_ending(tmp_path, ".yaml") == sorted(tmp_path.glob("*.yaml"))
    assert files_ending(tmp_path / "missing", ".yaml") == sorted((tmp_path / "missing").glob("*"))
    (tmp_path / "file").write_text("")
    assert files_ending(tmp_path / "file", ".yaml") == []


@pytest.mark.parametrize("size", [0, 1, 4096, 70_000])
def test_file_bytes_reads_what_read_bytes_reads(tmp_path: Path, size: int) -> None:
    path = tmp_path / "f"
    path.write_bytes(os.urandom(size))
    assert file_bytes(path) == path.read_bytes()


def test_file_bytes_reads_a_file_that_grew_after_its_size_was_taken(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    path = tmp_path / "f"
    path.write_bytes(os.urandom(200_000))
    real_fstat = os.fstat

    class Smaller:
        def __init__(self, fd: int) -> None:
            self.st_size = real_fstat(fd).st_size // 3

    monkeypatch.setattr(os, "fstat", Smaller)
    assert file_bytes(path) == path.read_bytes()


def test_a_cache_entry_that_grew_while_read_is_no_entry(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    entry = tmp_path / "cache" / "entry.json"
    entry.parent.mkdir(mode=0o755)
    entry.write_bytes(b'{"key": "k"}')
    os.chmod(entry, 0o644)
    assert read_entry(entry) == b'{"key": "k"}'
    real_fstat = os.fstat

    def smaller(fd: int) -> os.stat_result:
        info = real_fstat(fd)
        if not stat.S_ISREG(info.st_mode):
            return info
        fields = list(info)
        fields[stat.ST_SIZE] -= 1
        return os.stat_result(fields)

    monkeypatch.setattr(os, "fstat", smaller)
    assert read_entry(entry) is None


# --- templates: the source Jinja's FileSystemLoader reads -----------------------------------


def both_sources(folder: Path, name: str) -> tuple[object, object]:
    """What TemplateLoader and Jinja's FileSystemLoader give for ``name``: (text, file name) or
    the exception's type."""
    env = make_environment()
    found: list[object] = []
    for loader in (TemplateLoader(str(folder)), jinja2.FileSystemLoader(str(folder))):
        try:
            text, filename, _ = loader.get_source(env, name)
            found.append((text, filename))
        except (jinja2.TemplateNotFound, UnicodeDecodeError) as error:
            found.append(type(error))
    return found[0], found[1]


@pytest.mark.parametrize(
    ("name", "content"),
    [
        ("plain.j2", b"a {{ b }}\nc\n"),
        ("crlf.j2", b"a\r\nb\rc\r\n\r\n"),
        ("lone-cr.j2", b"\r"),
        ("empty.j2", b""),
        ("sub/inner.j2", b"in a folder\n"),
        ("utf8.j2", "\ufeffgr\u00fc\u00dfe \u2028\n".encode()),
        ("latin1.j2", b"caf\xe9\n"),
        ("big.j2", b"x" * 100_000 + b"\r\n"),
    ],
)
def test_the_template_loader_reads_what_jinjas_reads(
    tmp_path: Path, name: str, content: bytes
) -> None:
    (tmp_path / name).parent.mkdir(exist_ok=True)
    (tmp_path / name).write_bytes(content)
    ours, jinjas = both_sources(tmp_path, name)
    assert ours == jinjas


@pytest.mark.parametrize("name", ["missing.j2", "../outside.j2", "folder", "fifo"])
def test_the_template_loader_refuses_what_jinjas_refuses(tmp_path: Path, name: str) -> None:
    (tmp_path / "folder").mkdir()
    os.mkfifo(tmp_path / "fifo")  # opened without waiting for a writer
    (tmp_path.parent / "outside.j2").write_text("not a template of this folder\n")
    ours, jinjas = both_sources(tmp_path, name)
    assert ours == jinjas == jinja2.TemplateNotFound


def test_the_template_loader_tells_a_changed_template(tmp_path: Path) -> None:
    (tmp_path / "t.j2").write_text("one\n")
    _, _, uptodate = TemplateLoader(str(tmp_path)).get_source(make_environment(), "t.j2")
    assert uptodate()
    os.utime(tmp_path / "t.j2", (1, 1))
    assert not uptodate()
    (tmp_path / "t.j2").unlink()
    assert not uptodate()


def test_the_environment_reads_templates_with_the_lean_loader() -> None:
    assert type(make_environment().loader) is TemplateLoader


# --- patterns compiled at their first use -------------------------------------------------


def test_a_pattern_is_compiled_at_its_first_use_and_once(monkeypatch: pytest.MonkeyPatch) -> None:
    compiled: list[str] = []
    real_compile = re.compile

    def recording(pattern: str, flags: int = 0) -> re.Pattern[str]:
        compiled.append(pattern)
        return real_compile(pattern, flags)

    monkeypatch.setattr(re, "compile", recording)
    words = compiled_at_first_use(r"(\w+)=(\d+)", re.ASCII)
    assert compiled == []
    assert words.findall("a=1 b=2") == [("a", "1"), ("b", "2")]
    assert words.fullmatch("a=1") is not None and words.match("=1") is None
    assert words.sub(r"\2=\1", "a=1") == "1=a" and words.pattern == r"(\w+)=(\d+)"
    assert compiled == [r"(\w+)=(\d+)"]


@pytest.mark.parametrize("method", ["match", "fullmatch", "search", "findall", "sub", "split"])
def test_a_pattern_compiled_at_first_use_answers_as_the_compiled_one(method: str) -> None:
    pattern, text = r"\n(?=[^\n])", "a\n\nb\nc\n"
    lazy, eager = compiled_at_first_use(pattern), re.compile(pattern)
    arguments = ("-", text) if method == "sub" else (text,)
    for _ in range(2):  # the first call compiles, the second uses what it put in place
        ours, its = getattr(lazy, method)(*arguments), getattr(eager, method)(*arguments)
        if isinstance(its, re.Match):
            assert isinstance(ours, re.Match) and ours.span() == its.span()
        else:
            assert ours == its


# Patterns a shipped `gen` (cache hit) never uses: the first-boot body's analysis (a cache miss),
# the user-data's verbatim test (a second bundle of a process), a MIG layout, a TOML key path.
UNUSED_BY_A_COLD_GEN = (
    "generator.render.firstboot._FUNCTION_START",
    "generator.render.firstboot._ASSIGNMENT",
    "generator.render.firstboot._COMMAND_WORD",
    "generator.render.firstboot._READ_VARIABLE",
    "generator.render.delivery._PLAIN_TARGET",
    "generator.render.delivery._MODE",
    "generator.render.render._BEFORE_A_LINE",
    "generator.model.mig._PARTS",
    "generator.model.kinds.TOML_KEY_SEGMENT",
    "generator.model.probes.TOOL_WORD",
)
CHECK_UNCOMPILED = """
import importlib, sys
from generator.patterns import _FirstUse
from generator.cli import main
output, names = sys.argv[1], sys.argv[2:]
sys.argv = ["gen", "--hw", "dgx-h100", "--profile", "inference", "-o", output]
try:
    main()
except SystemExit:
    pass
for name in names:
    module, attribute = name.rsplit(".", 1)
    pattern = getattr(importlib.import_module(module), attribute)
    print(name, type(pattern) is _FirstUse and "match" not in vars(pattern))
"""


def test_a_cold_gen_compiles_none_of_the_patterns_it_does_not_use(tmp_path: Path) -> None:
    done = subprocess.run(
        [sys.executable, "-c", CHECK_UNCOMPILED, str(tmp_path / "out"), *UNUSED_BY_A_COLD_GEN],
        capture_output=True,
        text=True,
        check=True,
        cwd=Path(__file__).resolve().parent.parent,
    )
    lines = done.stdout.splitlines()
    assert lines[0].startswith("wrote ")
    assert lines[1:] == [f"{name} True" for name in UNUSED_BY_A_COLD_GEN]


# --- the end of a run: no interpreter teardown after success ------------------------------

CONSOLE = """
import atexit, os, sys

def teardown(event, arguments, write=os.write):  # Python's finalization announces its end
    if event == "cpython.PyInterpreterState_Clear":
        write(1, b"torn down\\n")

sys.addaudithook(teardown)
atexit.register(print, "atexit handler ran")
from generator.cli import console
sys.argv = ["gen", *sys.argv[1:]]
console()
"""


def run_console(*arguments: str, closed_stdout: bool = False) -> subprocess.CompletedProcess[str]:
    command = [sys.executable, "-c", CONSOLE, *arguments]
    if closed_stdout:
        command = ["sh", "-c", 'exec "$@" >&-', "sh", *command]
    return subprocess.run(
        command,
        capture_output=True,
        text=True,
        check=False,
        cwd=Path(__file__).resolve().parent.parent,
    )


def test_a_run_that_succeeded_ends_without_the_teardown(tmp_path: Path) -> None:
    done = run_console("--hw", "dgx-h100", "--profile", "inference", "-o", str(tmp_path / "b"))
    assert done.returncode == 0, done.stderr
    # flushed into the pipe, the atexit handlers run, and no object freed one by one
    assert done.stdout == f"wrote {tmp_path / 'b'}\natexit handler ran\n"
    assert (tmp_path / "b" / "manifest.json").is_file()


def test_a_run_that_failed_ends_as_before(tmp_path: Path) -> None:
    done = run_console("--hw", "no-such-system", "--profile", "inference", "-o", str(tmp_path))
    assert done.returncode == 2
    assert done.stderr.startswith("goldtune: error: no-such-system: no shipped system")
    assert done.stdout == "atexit handler ran\ntorn down\n"


def test_other_commands_end_as_before() -> None:
    done = run_console("rules")
    assert done.returncode == 0
    assert done.stdout.endswith("atexit handler ran\ntorn down\n")


def test_a_run_with_standard_output_closed_still_succeeds(tmp_path: Path) -> None:
    out = tmp_path / "b"
    done = run_console(
        "--hw", "dgx-h100", "--profile", "inference", "-o", str(out), closed_stdout=True
    )
    assert done.returncode == 0 and done.stderr == ""
    assert (out / "manifest.json").is_file()


FULL = Path("/dev/full")  # every write fails with ENOSPC (Linux's full(4))


@pytest.mark.skipif(not FULL.exists(), reason="no /dev/full on this system")
@pytest.mark.parametrize("command", ["main job", "list"])
def test_output_that_cannot_be_written_is_one_line_not_a_traceback(
    tmp_path: Path, command: str
) -> None:
    out = tmp_path / "b"
    arguments = ["--hw", "dgx-h100", "--profile", "inference", "-o", str(out)]
    script = CONSOLE.replace("console()", "sys.stdout = open('/dev/full', 'w')\nconsole()")
    done = subprocess.run(
        [sys.executable, "-c", script, *(arguments if command == "main job" else ["list"])],
        capture_output=True,
        text=True,
        check=False,
        cwd=Path(__file__).resolve().parent.parent,
    )
    assert done.returncode == 1
    assert done.stderr == "goldtune: error: cannot write the output: No space left on device\n"
    # the atexit handlers still ran (their output went to the full device), no teardown
    assert done.stdout == ""
    assert (out / "manifest.json").is_file() == (command == "main job")


IMPORT_ENTRY = """
import gc, sys
import generator  # the package's own two names, before the passes are counted
passes = []
gc.callbacks.append(lambda phase, info: phase == "start" and passes.append(info["generation"]))
if sys.argv[1] == "paused":
    gc.disable()
import generator.console
# once on, the collector may pass over what was made since the freeze (next to nothing)
print(len(passes) <= 1, gc.isenabled(), gc.get_freeze_count() > 10_000, "click" in sys.modules)
"""


@pytest.mark.parametrize(("before", "after"), [("on", "True"), ("paused", "False")])
def test_the_command_line_is_imported_without_collector_passes(before: str, after: str) -> None:
    """No pass while click and goldtune's cli are imported; what they made frozen; the
    collector afterwards as it was."""
    done = subprocess.run(
        [sys.executable, "-c", IMPORT_ENTRY, before],
        capture_output=True,
        text=True,
        check=True,
        cwd=Path(__file__).resolve().parent.parent,
    )
    assert done.stdout.split() == ["True", after, "True", "True"]


# --- review findings: an earlier run in the process, profilers, copies, short reads ---------

AFTER_A_RUN = """
import sys
from click.testing import CliRunner
from generator.cli import console, main
out = sys.argv[1]
first = CliRunner().invoke(main, ["--hw", "dgx-h100", "--profile", "inference", "-o", out])
assert first.exit_code == 0
sys.argv = ["gen", "--hw", "no-such-system", "--profile", "inference", "-o", out]
console()
"""


def test_a_failed_run_after_a_main_job_in_the_same_process_keeps_its_status(
    tmp_path: Path,
) -> None:
    done = subprocess.run(
        [sys.executable, "-c", AFTER_A_RUN, str(tmp_path / "b")],
        capture_output=True,
        text=True,
        check=False,
        cwd=Path(__file__).resolve().parent.parent,
    )
    assert done.returncode == 2, done.stderr


def test_a_profiled_run_ends_through_the_profiler_which_then_reports(tmp_path: Path) -> None:
    done = subprocess.run(
        [
            sys.executable,
            "-m",
            "cProfile",
            "-m",
            "generator",
            "--hw",
            "dgx-h100",
            "--profile",
            "inference",
            "-o",
            str(tmp_path / "b"),
        ],
        capture_output=True,
        text=True,
        check=False,
        cwd=Path(__file__).resolve().parent.parent,
    )
    assert done.returncode == 0, done.stderr
    assert "function calls" in done.stdout  # cProfile's report, printed after main returned


def test_a_pattern_stand_in_copies_and_pickles_as_a_pattern() -> None:
    import copy
    import pickle

    fresh, used = compiled_at_first_use(r"a+b"), compiled_at_first_use(r"c+")
    assert used.fullmatch("cc")
    for pattern, text in ((fresh, "aab"), (used, "ccc")):
        for twin in (
            copy.copy(pattern),
            copy.deepcopy(pattern),
            pickle.loads(pickle.dumps(pattern)),
        ):
            assert twin.fullmatch(text) is not None


def test_a_file_read_in_short_reads_is_read_whole(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    from generator import cache

    path = tmp_path / "t.j2"
    path.write_bytes(b"x" * 10_000)
    real_read = os.read
    monkeypatch.setattr(cache.os, "read", lambda fd, size: real_read(fd, min(size, 1000)))
    assert cache.file_bytes(path) == b"x" * 10_000


def test_a_template_that_does_not_compile_is_one_generation_error(tmp_path: Path) -> None:
    import jinja2

    from generator.errors import GenerationError
    from generator.render.render import Output, render_text

    (tmp_path / "bad.j2").write_text("{% if %}x")
    env = jinja2.Environment(loader=TemplateLoader(str(tmp_path)), autoescape=False)  # noqa: S701
    for name in ("bad.j2", "missing.j2"):
        with pytest.raises(GenerationError, match=f"^template {name}: "):
            render_text(env, Output("f", name, 0o644), {})
