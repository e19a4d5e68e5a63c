"""`gen detect`: describe this machine, or a captured tree, as a hardware YAML.

The recipe: read the tree, ask the driver (only about this machine), describe, check the
result with the same loader `gen check` uses, write it. A description the format rejects is a
bug of detect and fails; one that names hardware the catalog lacks is written, and each
missing entry (or any other refusal `gen check` will give) is reported as a warning.
"""

from __future__ import annotations

import os
import stat
import tempfile
from pathlib import Path

import click

from generator.bundle.write import check_name_lengths
from generator.detect.describe import Machine, describe
from generator.detect.driver import DriverReport, parse_nvidia_smi, query_driver
from generator.detect.driver_amd import MAX_JSON_BYTES, parse_amd_smi, run_amd_smi
from generator.detect.tree import Tree
from generator.errors import GenerationError, InputError, Problem
from generator.inputs.catalog import Catalog, load_catalog
from generator.inputs.hardware import resolve_facts
from generator.inputs.hardware_spec import HardwareSpec
from generator.inputs.schema import validate_model
from generator.inputs.yamlio import parse_yaml_text

CAPTURE_SCRIPT = Path(__file__).resolve().parent.parent / "detect" / "capture.sh"
# Where the capture script leaves nvidia-smi's answer inside the tarball.
CAPTURED_SMI = "/goldtune-capture/nvidia-smi-q-x.xml"
CAPTURED_AMD_SMI = "/goldtune-capture/amd-smi-static.json"


def capture_script() -> str:
    return CAPTURE_SCRIPT.read_text(encoding="utf-8")


def driver_facts(tree: Tree, live: bool) -> DriverReport | str:
    """The driver's answers: asked here when live; read from the capture otherwise."""
    if live:
        return query_driver()
    xml = tree.read(CAPTURED_SMI, limit=8 * 1024 * 1024)
    if xml is None:
        return "the capture holds no nvidia-smi -q -x output"
    return parse_nvidia_smi(xml.encode("utf-8"), source="captured nvidia-smi -q -x")


def amd_driver_facts(tree: Tree, live: bool) -> DriverReport | str:
    """amd-smi's answers: asked here when live (only when it is installed, bounded); read from
    the capture otherwise."""
    if live:
        answer = run_amd_smi()
        return parse_amd_smi(answer) if isinstance(answer, bytes) else answer
    text = tree.read(CAPTURED_AMD_SMI, limit=MAX_JSON_BYTES)
    if text is None:
        return "the capture holds no amd-smi static --json output"
    return parse_amd_smi(text.encode("utf-8"), source="captured amd-smi static --json")


def command_line(root: Path | None) -> str:
    return "gen detect" + (f" --root {root}" if root is not None else "")


def detect_text(root: Path | None) -> tuple[str, list[str]]:
    """(the description, warnings about hardware the catalog lacks)."""
    tree = Tree(root if root is not None else Path("/"))
    if root is not None and not root.is_dir():
        raise InputError(Problem(str(root), "", "not a directory (expected an unpacked capture)"))
    live = root is None
    catalog = load_catalog()
    distros = tuple(sorted(catalog.distros))
    machine = Machine(
        tree, catalog, driver_facts(tree, live), live, distros, amd_driver_facts(tree, live)
    )
    text = describe(machine, command_line(root))
    return text, check_description(text, catalog)


def check_description(text: str, catalog: Catalog) -> list[str]:
    """Problems `gen check` would report, as warnings; a schema failure is detect's own bug."""
    data = parse_yaml_text(text, "<detected>")
    data.setdefault("name", "detected")
    try:
        spec = validate_model(HardwareSpec, data, "<detected>")
    except InputError as error:
        raise GenerationError(
            "gen detect wrote a description the format rejects (a bug): " + "; ".join(error.lines())
        ) from None
    try:
        resolve_facts(spec, catalog, "<detected>")
    except InputError as error:
        return [_gap(problem) for problem in error.problems]
    return []


def _gap(problem: Problem) -> str:
    """What `gen check` will say, without the placeholder file name and the list of known keys."""
    text = f"{problem.path}: {problem.message}"
    if problem.path.startswith("gpus[") and problem.hint.startswith("no catalog entry"):
        text += " (written by PCI device id: add a hardware_db/gpus/ entry with that id)"
    return text


def write_atomically(path: Path, text: str, mode: int = 0o644) -> None:
    """Write beside ``path`` and rename, so a failed run leaves the old file as it was.

    Only a regular file is replaced: a rename over a device node (``/dev/null`` as root), a
    FIFO, a socket or a link would replace that node itself, so anything else is refused.
    """
    try:
        existing = os.lstat(path).st_mode
    except FileNotFoundError:
        existing = None
    except OSError as error:
        raise GenerationError(f"{path}: cannot write: {error.strerror}") from None
    if existing is not None and stat.S_ISDIR(existing):
        raise InputError(Problem(str(path), "", "is a directory; -o takes a file"))
    if existing is not None and not stat.S_ISREG(existing):
        raise InputError(
            Problem(
                str(path),
                "",
                "is not a regular file (a link, FIFO or device); -o replaces only a regular file",
            )
        )
    directory = path.parent if str(path.parent) else Path(".")
    try:
        fd, temporary = tempfile.mkstemp(prefix=f".{path.name}.", dir=directory)
    except OSError as error:
        raise GenerationError(f"{path}: cannot write: {error.strerror}") from None
    try:
        with os.fdopen(fd, "w", encoding="utf-8") as handle:
            handle.write(text)
        os.chmod(temporary, mode)
        os.replace(temporary, path)
    except OSError as error:
        os.unlink(temporary)
        raise GenerationError(f"{path}: cannot write: {error.strerror}") from None


def run_detect(output: Path | None, root: Path | None, capture: bool) -> None:
    if capture:
        if root is not None:
            raise click.UsageError("--capture writes the capture script; --root reads a capture")
        emit(capture_script(), output, mode=0o755)
        return
    text, warnings = detect_text(root)
    emit(text, output)
    for warning in warnings:
        click.echo(f"warning: `gen check` will refuse this description: {warning}", err=True)


def emit(text: str, output: Path | None, mode: int = 0o644) -> None:
    if output is None:
        click.echo(text, nl=False)
    else:
        check_name_lengths(output, "file")  # exit 2, not the write's "File name too long"
        write_atomically(output, text, mode)
