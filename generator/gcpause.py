"""The cyclic garbage collector paused while a run makes what it keeps to its end (the command
line's modules at start-up: console.py; the main job's run: cli.py). It imports nothing but
gc: console.py pauses the collector before anything else is imported."""

import gc


class CollectorPaused:
    """The cyclic garbage collector off while the block runs, as it was afterwards.

    For a run of the main job (measured): what the run creates is kept until it ends anyway:
    the 70 passes the collector made over it (the pipeline's imports, validators, plan,
    templates) cost about 20 ms of a cold run's CPU and freed some 500 objects; without them a
    run peaks 0.8 MB higher. Afterwards the objects are frozen (left out of later passes) before
    the collector is on again: else its first pass, due at once, would walk all of them (25
    ms). A caller that runs the main job many times in one process (tests through click's
    CliRunner) keeps what each run left frozen (some 65 objects a run, measured), a cost chosen
    over a 25 ms pass per run.
    """

    def __enter__(self) -> None:
        self.enabled = gc.isenabled()
        gc.disable()

    def __exit__(self, *exception: object) -> None:
        gc.freeze()
        if self.enabled:
            gc.enable()
