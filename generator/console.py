"""The `gen` command's entry point: its console script and ``python -m generator``.

The command line's modules (click's, goldtune's cli and what it imports) are imported with the
cyclic garbage collector paused, and what they made is frozen (left out of later passes: the
modules, classes, functions and tables live until the process ends anyway) before it is on
again. Its passes over them cost ~3.5 ms of a cold `gen`'s CPU (31 interleaved runs). Then
cli.console runs the command with the collector as it was (the main job pauses it for its run).
"""

from generator.gcpause import CollectorPaused

with CollectorPaused():
    from generator.cli import console


def main() -> None:
    console()
