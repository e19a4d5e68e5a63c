"""hygiene.*: desktop modules and services off on headless servers, and only there."""

from __future__ import annotations

import pytest

from generator.rules import hygiene

from .helpers import H100X8, Case, case_ids, check_case

MODULES = {
    ("modprobe", f"blacklist {m}", "")
    for m in ("bluetooth", "btusb", "snd_hda_intel", "uvcvideo", "joydev")
}
SERVICES = {
    ("service", unit, "disable")
    for unit in (
        "bluetooth.service",
        "cups.service",
        "cups.socket",
        "avahi-daemon.service",
        "avahi-daemon.socket",
        "ModemManager.service",
        "whoopsie.service",
        "apport.service",
    )
}

CASES: tuple[Case, ...] = (
    Case("modules-headless", hygiene.modules, MODULES),
    Case(
        "modules-headless-training-gpus",
        hygiene.modules,
        MODULES,
        hw={"gpus": [H100X8]},
        intent="training",
    ),
    Case("modules-not-headless", hygiene.modules, set(), knobs={"headless": False}),
    Case("services-headless", hygiene.services, SERVICES),
    Case("services-not-headless", hygiene.services, set(), knobs={"headless": False}),
    # the node's report to the fleet (issue 28): opt-in, nothing by default
    Case("prometheus-textfile-default-off", hygiene.prometheus_textfile, set()),
    Case(
        "prometheus-textfile-on",
        hygiene.prometheus_textfile,
        {("service", "goldtune-metrics.timer", "enable")},
        knobs={"prometheus_textfile": True},
    ),
    Case("nfd-features-default-off", hygiene.nfd_features, set()),
    Case(
        "nfd-features-on",
        hygiene.nfd_features,
        {("service", "goldtune-node-labels.service", "enable")},
        knobs={"nfd_features": True},
    ),
)


@pytest.mark.parametrize("case", CASES, ids=case_ids(CASES))
def test_hygiene_rule(case: Case) -> None:
    check_case(case)


@pytest.mark.parametrize("case", [CASES[0], CASES[3]], ids=["modules", "services"])
def test_reason_says_there_is_no_performance_effect(case: Case) -> None:
    assert all("no effect on performance" in item.reason for item in case.run())
