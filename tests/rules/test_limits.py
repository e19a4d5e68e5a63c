"""limits.*: nofile and memlock for logins ('*' and root) and services, aio contexts, inotify
watches."""

from __future__ import annotations

import pytest

from generator.model.setting import Setting
from generator.plan.checks import NR_OPEN_DEFAULT, check_nofile
from generator.rules import limits
from generator.rules.base import Rule

from .helpers import H100X8, Case, case_ids, check_case, facts, profile, settings_of

DOMAINS = ("*", "root")  # pam_limits never applies '*' to root, so root gets its own lines


def login_lines(domain: str, item: str, value: str) -> set[tuple[str, str, str]]:
    return {("limit", f"{domain} soft {item}", value), ("limit", f"{domain} hard {item}", value)}


NOFILE_STAR = login_lines("*", "nofile", "1048576")
NOFILE_ROOT = login_lines("root", "nofile", "1048576")
# services: systemd's soft 1024 (select(2)), a hard limit raised to fs.nr_open's default
NOFILE = NOFILE_STAR | NOFILE_ROOT | {("systemd-manager", "DefaultLimitNOFILE", "1024:1048576")}
MEMLOCK_STAR = login_lines("*", "memlock", "unlimited")
MEMLOCK_ROOT = login_lines("root", "memlock", "unlimited")
MEMLOCK = MEMLOCK_STAR | MEMLOCK_ROOT | {("systemd-manager", "DefaultLimitMEMLOCK", "infinity")}

INOTIFY_INSTANCES = ("sysctl", "fs.inotify.max_user_instances", "8192")

CASES: tuple[Case, ...] = (
    Case("nofile-inference", limits.nofile, NOFILE),
    Case("nofile-training-gpus", limits.nofile, NOFILE, hw={"gpus": [H100X8]}, intent="training"),
    Case("memlock-inference", limits.memlock, MEMLOCK),
    Case("memlock-training", limits.memlock, MEMLOCK, intent="training"),
    Case("nofile-grace", limits.nofile, NOFILE, hw={"cpu": {"vendor": "nvidia"}}),
    Case(
        "memlock-gpus-rdma",
        limits.memlock,
        MEMLOCK,
        hw={
            "gpus": [H100X8],
            "nics": [{"name": "ib0", "role": "compute", "rdma": True, "speed_gbps": 400}],
        },
    ),
    Case("aio-inference", limits.aio, {("sysctl", "fs.aio-max-nr", "1048576")}),
    Case("aio-training", limits.aio, {("sysctl", "fs.aio-max-nr", "1048576")}, intent="training"),
    # instances for every container host; watches for training (inference: the RAM-scaled default)
    Case(
        "inotify-training",
        limits.inotify,
        {INOTIFY_INSTANCES, ("sysctl", "fs.inotify.max_user_watches", "1048576")},
        intent="training",
    ),
    Case("inotify-inference", limits.inotify, {INOTIFY_INSTANCES}, note="max_user_watches left"),
)


@pytest.mark.parametrize("case", CASES, ids=case_ids(CASES))
def test_limits_rule(case: Case) -> None:
    check_case(case)


@pytest.mark.parametrize("intent", ["inference", "training"])
def test_nofile_within_nr_open_for_logins_root_and_services(intent: str) -> None:
    output = limits.nofile.apply(facts(), profile(intent))
    values = {**settings_of(output, "limit"), **settings_of(output, "systemd-manager")}
    logins = [values[f"{domain} {kind} nofile"] for domain in DOMAINS for kind in ("soft", "hard")]
    service_hard = values["DefaultLimitNOFILE"].partition(":")[2]
    assert set(logins) == {service_hard}
    assert int(service_hard) <= NR_OPEN_DEFAULT


def test_services_keep_the_soft_limit_select_can_handle() -> None:
    """systemd.exec(5) LimitNOFILE=: select(2) fails above descriptor 1023, so services keep
    systemd's soft 1024 and raise it themselves; only the hard limit is raised. On main the
    manager default was 1048576 soft and hard (tuning-review-3 D-N1)."""
    output = limits.nofile.apply(facts(), profile("training"))
    soft, _, hard = settings_of(output, "systemd-manager")["DefaultLimitNOFILE"].partition(":")
    assert (soft, hard) == ("1024", str(NR_OPEN_DEFAULT))


@pytest.mark.parametrize("rule", [limits.nofile, limits.memlock], ids=["nofile", "memlock"])
def test_root_lines_match_the_star_lines_and_say_why(rule: Rule) -> None:
    output = rule.apply(facts(), profile("inference"))
    lines = {s.key: s for s in output if isinstance(s, Setting) and s.kind == "limit"}
    assert {key.split()[0] for key in lines} == set(DOMAINS)
    for key, setting in lines.items():
        domain, rest = key.split(" ", 1)
        if domain == "root":
            assert setting.value == lines[f"* {rest}"].value
            assert "'*' lines do not apply to root" in setting.reason
        else:
            assert "root" not in setting.reason


def test_every_nofile_limit_passes_the_nr_open_check() -> None:
    """checks.check_nofile reads every limit ending in ' nofile', root's included."""
    settings = [
        s for s in limits.nofile.apply(facts(), profile("training")) if isinstance(s, Setting)
    ]
    assert check_nofile(settings) == []
    too_big = [s._replace(value="2097152") if s.key == "root hard nofile" else s for s in settings]
    assert [finding.message.split("=")[0] for finding in check_nofile(too_big)] == [
        "limit root hard nofile"
    ]


def test_an_amd_node_names_no_cuda_in_its_memlock_reasons() -> None:
    """AMD GPUs: the reason names RDMA registration (ib_umem_get), not CUDA; NVIDIA's keeps
    CUDA (failed before: every AMD bundle said 'CUDA pinned host memory')."""
    amd = limits.memlock.apply(facts(gpus=[{"model": "MI300X", "count": 8}]), profile("training"))
    reasons = {s.reason for s in amd if isinstance(s, Setting)}
    assert reasons and not any("CUDA" in reason for reason in reasons)
    assert all("ib_umem_get" in reason for reason in reasons)
    nvidia = limits.memlock.apply(facts(gpus=[H100X8]), profile("training"))
    assert all("CUDA pinned" in s.reason for s in nvidia if isinstance(s, Setting))
