"""The `gen` command's entry point: its console script and ``python -m generator``.

The command line's modules (click's, goldtune's cli and what it imports) are imported with the
cyclic garbage collector paused, and what they made is frozen (left out of later passes: the
modules, classes, functions and tables live until the process ends anyway) before it is on
again. Its passes over them cost ~3.5 ms of a cold `gen`'s CPU (31 interleaved runs). Then
``console`` runs the command with the collector as it was (the main job pauses it for its run),
and ends it with one line where its output could not be written.
"""

from generator.gcpause import CollectorPaused

with CollectorPaused():
    import errno
    import os
    import sys
    from contextlib import suppress
    from typing import NoReturn

    from generator import TOOL
    from generator.cli import main as run_command


def main() -> None:
    console()


# A write to standard output or error that failed for want of room or a device error; a
# broken pipe (EPIPE) click ends itself, quietly, with status 1.
OUTPUT_ERRORS = frozenset({errno.ENOSPC, errno.EDQUOT, errno.EFBIG, errno.EIO})


def console() -> None:
    """The `gen` command (its console script, ``python -m generator``): ``main``, then Python's
    own exit. Output that cannot be written (``gen list >/dev/full``) ends any command with one
    line and status 1 (output_failed), not a traceback."""
    try:
        run_command()
    except SystemExit:
        # click ends every run with SystemExit. What is still buffered is written now, so that
        # a failure to write it is reported as any other, not by the interpreter's last flush.
        try:
            flush_output()
        except OSError as error:
            output_failed(error)
        except ValueError:  # a stream closed by the run: Python's own exit then
            pass
        raise
    except OSError as error:
        if not _output_failed_with(error):
            raise
        output_failed(error)


def flush_output() -> None:
    for stream in (sys.stdout, sys.stderr):
        if stream is not None:  # None: the descriptor was closed when Python started
            stream.flush()


def _output_failed_with(error: OSError) -> bool:
    """Whether ``error`` is standard output's failure (not a file's, which names it): such an
    error, and the stream still cannot be written (flushing it fails again)."""
    if error.filename is not None or error.errno not in OUTPUT_ERRORS:
        return False
    try:
        flush_output()
    except OSError:
        return True
    except ValueError:
        return False
    return False


def output_failed(error: OSError) -> NoReturn:
    """End the process after standard output or error could not be written: one line says why
    (nothing for a broken pipe: the reader left, as click has it), status 1. What is still
    buffered could not be written either: the standard streams are pointed at /dev/null first,
    so that the interpreter's last flush does not report it again (the recipe of Python's
    signal module documentation, "Note on SIGPIPE")."""
    if error.errno != errno.EPIPE:
        with suppress(OSError, ValueError, AttributeError):  # no stderr either
            sys.stderr.write(f"{TOOL}: error: cannot write the output: {error.strerror}\n")
            sys.stderr.flush()
    null = os.open(os.devnull, os.O_WRONLY)
    for stream in (sys.stdout, sys.stderr):
        with suppress(OSError, ValueError, AttributeError):  # closed, or no descriptor
            os.dup2(null, stream.fileno())
    sys.exit(1)
