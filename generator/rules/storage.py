"""Storage: I/O schedulers by device kind, matched so one image fits every unit of a model."""

from __future__ import annotations

from generator.inputs.facts import Facts
from generator.inputs.profile import Profile
from generator.rules.base import Output, io_scheduler, rule


def _kinds(facts: Facts) -> set[str]:
    return {disk.kind for disk in facts.disks}


@rule("storage.nvme-scheduler")
def nvme_scheduler(facts: Facts, profile: Profile) -> Output:
    """No I/O scheduler on NVMe: the device's own queues do better than any software one."""
    if "nvme" in _kinds(facts):
        yield io_scheduler(
            "nvme",
            "none",
            "NVMe has deep hardware queues; a software scheduler only "
            "adds latency (pinned, since some distributions default to mq-deadline)",
        )


@rule("storage.ssd-scheduler")
def ssd_scheduler(facts: Facts, profile: Profile) -> Output:
    """mq-deadline on SATA/SAS SSDs: bounded latency with little overhead."""
    if "ssd" in _kinds(facts):
        yield io_scheduler(
            "ssd",
            "mq-deadline",
            "SATA/SAS SSDs have one shallow queue; mq-deadline "
            "keeps reads from starving behind checkpoint writes",
        )


@rule("storage.hdd-scheduler")
def hdd_scheduler(facts: Facts, profile: Profile) -> Output:
    """mq-deadline on rotational disks: built in, and sequential streams stay sequential."""
    if "hdd" in _kinds(facts):
        yield io_scheduler(
            "hdd",
            "mq-deadline",
            "rotational disks serve large sequential streams "
            "(datasets, checkpoints); mq-deadline is built into every kernel, unlike bfq",
        )
