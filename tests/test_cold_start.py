"""A cold `gen`: the cache's file reads, the end of a run, the command line's import."""

from __future__ import annotations

import os
import stat
import subprocess
import sys
from pathlib import Path

import jinja2
import pytest

from generator.cache import file_bytes, read_entry
from generator.paths import files_ending


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


# --- the end of a run: Python's own exit, atexit handlers and teardown included ------------

CONSOLE = """
import atexit, os, sys

def teardown(event, arguments, write=os.write):  # Python's finalization announces its end
    if event == "cpython.PyInterpreterState_Clear":
        write(1, b"torn down\\n")

sys.addaudithook(teardown)
atexit.register(print, "atexit handler ran")
from generator.console import console
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


@pytest.mark.parametrize(
    ("arguments", "status", "output"),
    [
        (("--hw", "dgx-h100", "--profile", "inference", "-o", "{out}"), 0, "wrote {out}\n"),
        (("--hw", "no-such-system", "--profile", "inference", "-o", "{out}"), 2, ""),
        (("schema", "profile"), 0, None),
    ],
    ids=["main job", "failed main job", "other command"],
)
def test_every_run_ends_through_pythons_own_exit(
    tmp_path: Path, arguments: tuple[str, ...], status: int, output: str | None
) -> None:
    """One way to end a process: its atexit handlers, then the interpreter's teardown (on main
    a main job that succeeded ended with os._exit, without the teardown)."""
    out = str(tmp_path / "b")
    done = run_console(*(argument.format(out=out) for argument in arguments))
    assert done.returncode == status, done.stderr
    assert done.stdout.endswith("atexit handler ran\ntorn down\n")
    if output is not None:
        assert done.stdout == output.format(out=out) + "atexit handler ran\ntorn down\n"


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
    # the atexit handlers still ran (their output went where the full device's had gone) and
    # the interpreter ended as always
    assert done.stdout == "torn down\n"
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


# --- review findings: an earlier run in the process, short reads ----------------------------

AFTER_A_RUN = """
import sys
from click.testing import CliRunner
from generator.cli import main
from generator.console import console
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
    from generator.errors import GenerationError
    from generator.render.engine import render_text
    from generator.render.outputs import Output

    (tmp_path / "bad.j2").write_text("{% if %}x")
    loader = jinja2.FileSystemLoader(str(tmp_path))
    env = jinja2.Environment(loader=loader, autoescape=False)  # noqa: S701 -- not HTML
    for name in ("bad.j2", "missing.j2"):
        with pytest.raises(GenerationError, match=f"^template {name}: "):
            render_text(env, Output("f", name, 0o644), {})
