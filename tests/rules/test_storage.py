"""storage.*: I/O scheduler per device kind (udev matches kinds, never serial numbers)."""

from __future__ import annotations

import pytest

from generator.rules import storage

from .helpers import Case, case_ids, check_case


def disk(name: str, kind: str, role: str = "data") -> dict[str, str]:
    return {"name": name, "kind": kind, "role": role}


NVME = disk("nvme0n1", "nvme", "os")
SSD = disk("sda", "ssd")
HDD = disk("sdb", "hdd")
ALL = [NVME, SSD, HDD]

CASES: tuple[Case, ...] = (
    Case(
        "nvme-only-nvme", storage.nvme_scheduler, {("udev", "nvme", "none")}, hw={"disks": [NVME]}
    ),
    Case("nvme-mixed", storage.nvme_scheduler, {("udev", "nvme", "none")}, hw={"disks": ALL}),
    Case("nvme-absent", storage.nvme_scheduler, set(), hw={"disks": [SSD, HDD]}),
    Case("ssd-mixed", storage.ssd_scheduler, {("udev", "ssd", "mq-deadline")}, hw={"disks": ALL}),
    Case("ssd-absent", storage.ssd_scheduler, set(), hw={"disks": [NVME]}),
    Case(
        "hdd-mixed",
        storage.hdd_scheduler,
        {("udev", "hdd", "mq-deadline")},
        hw={"disks": ALL},
        intent="training",
    ),
    Case("hdd-absent", storage.hdd_scheduler, set(), hw={"disks": [NVME, SSD]}),
    Case("no-disks-nvme", storage.nvme_scheduler, set()),
    Case("no-disks-ssd", storage.ssd_scheduler, set()),
    Case("no-disks-hdd", storage.hdd_scheduler, set()),
    # one rule line per kind, however many disks of that kind
    Case(
        "many-nvme-one-rule",
        storage.nvme_scheduler,
        {("udev", "nvme", "none")},
        hw={"disks": [disk(f"nvme{i}n1", "nvme") for i in range(10)]},
    ),
)


@pytest.mark.parametrize("case", CASES, ids=case_ids(CASES))
def test_storage_rule(case: Case) -> None:
    check_case(case)


def test_one_setting_per_kind_for_ten_disks() -> None:
    output = CASES[-1].run()
    assert len(output) == 1
