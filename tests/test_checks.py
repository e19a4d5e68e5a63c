"""The plan's one validation pass: the grammar of every kind, the traps, and who is blamed.

A bad profile override is the user's input (exit 2, naming the profile and the override); a bad
value from a rule is goldtune's bug (exit 1, naming the rule). ``gen check`` runs the same pass.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
from click.testing import CliRunner
from plans import FULL_SETTINGS
from pydantic import ValidationError
from rules.helpers import facts, profile

from generator.cli import main
from generator.errors import GenerationError, InputError
from generator.inputs.profile import Override
from generator.model.kinds import KINDS
from generator.model.setting import Setting
from generator.plan import build as plan
from generator.plan import checks
from generator.plan.checks import check_grammar, check_plan, check_traps, kernel_int

# Keys and values that would break out of their file's syntax, or that the file cannot carry.
DO_NOT_FIT = [
    ("kernel-arg", "iommu", "$(reboot)"),
    ("kernel-arg", "quiet splash", ""),
    ("sysctl", "vm.swappiness", "1\nkernel.panic = 1"),
    ("sysfs", "/sys/../etc/shadow", "x"),
    ("sysfs", "/sys/kernel/..", "x"),
    ("sysfs", "/etc/passwd", "x"),
    ("limit", "* hard nofile", "lots"),
    ("limit", "* hard nofile", "١٠٢٤"),  # Arabic-Indic digits: \d would take them
    ("modprobe", "install nouveau", "/bin/false"),
    ("module-load", "nvidia;reboot", ""),
    ("module-load", "nvidia", "1"),
    ("udev", "nvme", 'none", RUN+="/bin/sh'),
    ("tuned", "main.include", "${f:exec:/bin/sh:-c:reboot}"),
    ("gpu", "clocks", "1980; reboot"),
    ("gpu", "clocks", "١٩٨٠"),
    ("gpu", "power-limit", "101%"),
    ("gpu", "fan", "on"),
    ("irq", "eth0;reboot", "1-3"),
    ("irq", "eth0", "١-٣"),
    ("pcie-acs", "gpus", "on"),
    ("pcie-acs", "nic ../x", "off"),
    ("pcie-acs", "nic eth0\tboot", "off"),
    ("service", "x.service; reboot", "enable"),
    ("systemd-manager", "DefaultLimitNOFILE", "1 2"),
    ("unit-dropin", "containerd.service ExecStart", "/bin/sh"),
    ("unit-dropin", "containerd.service LimitNOFILE", "1\nExecStartPre=/bin/sh"),
    ("unit-dropin", "sshd.service LimitNOFILE", "1024"),
    # the daemon's ExecStart: its own program, options as words, nothing systemd expands
    ("unit-dropin", "nvidia-persistenced.service ExecStart", "/bin/sh -c reboot"),
    ("unit-dropin", "nvidia-persistenced.service ExecStart", "-/usr/bin/nvidia-persistenced"),
    ("unit-dropin", "nvidia-persistenced.service ExecStart", "nvidia-persistenced --user $USER"),
    ("unit-dropin", "nvidia-persistenced.service ExecStart", "nvidia-persistenced --user %u"),
    ("unit-dropin", "nvidia-persistenced.service ExecStart", "/tmp/../nvidia-persistenced"),
    (
        "unit-dropin",
        "nvidia-persistenced.service ExecStart",
        "nvidia-persistenced\nExecStartPre=/bin/sh",
    ),
    ("unit-dropin", "nvidia-persistenced.service ExecStartPre", "/usr/bin/nvidia-persistenced"),
    ("unit-dropin", "nvidia-persistenced.service LimitNOFILE", "1024"),
    ("unit-dropin", "nvidia-persistenced.service WantedBy", "multi-user.target reboot.target"),
    ("containerd", 'plugins."cri".x', '"a"\n[plugins.evil]'),
    ("containerd", "version", "2"),
    ("containerd", "plugins.cri.x", "bare-word"),
    ("docker", "hosts", '"tcp://0.0.0.0:2375" ,"x"'),
    ("docker", "runtimes.nvidia.args", "[]"),
    ("kubelet", "staticPodURL", "http://x y"),
    ("nccl", "LD_PRELOAD", "/tmp/x.so"),
    ("nccl", "NCCL_SOCKET_IFNAME", "=eth0 # x"),
    ("nccl", "NCCL_IB_HCA", "=mlx5_0\nNCCL_DEBUG=INFO"),
    ("rccl", "LD_PRELOAD", "/tmp/x.so"),
    ("rccl", "NCCL_IB_HCA", "=mlx5_0\nNCCL_DEBUG=INFO"),
    ("kubelet", "evictionHard/memory.available", "1Gi\nauthentication: {}"),
]

# What the old render-time and plan-time checks disagreed on: each fits now.
FITS = [
    ("service", "data.mount", "enable"),
    ("service", "system-goldtune.slice", "disable"),
    ("tuned", "sysctl.kernel.numa_balancing", "0"),
    ("sysfs", "/sys/devices/system/cpu/cpu[0-9]*/cpufreq/scaling_governor", "performance"),
    ("modprobe", "options nvidia NVreg_RestrictProfilingToAdminUsers-x", "0"),
    ("limit", "@GPU-users hard memlock", "unlimited"),
    ("gpu", "power-limit", "80%"),
    ("irq", "ibp24s0", "1-27,57-83"),
    ("pcie-acs", "nic ibp24s0", "off"),
    ("unit-dropin", "docker.service LimitNOFILE", "1024:524288"),
    (
        "unit-dropin",
        "nvidia-persistenced.service ExecStart",
        "/usr/bin/nvidia-persistenced --user root --persistence-mode --verbose",
    ),
    ("unit-dropin", "nvidia-persistenced.service WantedBy", "multi-user.target"),
    (
        "containerd",
        'plugins."io.containerd.grpc.v1.cri".containerd.default_runtime_name',
        '"nvidia"',
    ),
    ("docker", "default-ulimits.memlock.Soft", "-1"),
    ("kubelet", "reservedSystemCPUs", "0,112"),
    ("nccl", "NCCL_IB_HCA", "=mlx5_0:1,mlx5_1:1"),
    ("nccl", "NCCL_SOCKET_IFNAME", "^docker,lo"),
    ("rccl", "NCCL_IB_HCA", "=mlx5_0:1,mlx5_1:1"),
]


@pytest.mark.parametrize(("kind", "key", "value"), DO_NOT_FIT)
def test_keys_and_values_that_do_not_fit_their_file_are_refused(
    kind: str, key: str, value: str
) -> None:
    assert check_grammar(Setting(kind, key, value, "reason", rule="test.rule")) is not None


@pytest.mark.parametrize(("kind", "key", "value"), FITS)
def test_the_one_grammar_accepts_what_the_consumers_accept(kind: str, key: str, value: str) -> None:
    assert check_grammar(Setting(kind, key, value, "reason", rule="test.rule")) is None


@pytest.mark.parametrize("spec", KINDS, ids=lambda spec: str(spec.kind))
def test_every_kinds_grammar_refuses_a_second_line(spec: Any) -> None:
    """For every row, with no case of its own (issue 43: one file less for a new kind): the
    full plan's setting of the kind fits, and the same with a second line smuggled into its key
    or its value does not. DO_NOT_FIT holds each kind's own traps beside this."""
    fits = next((s for s in FULL_SETTINGS if s.kind == spec.kind), None)
    assert fits is not None, f"kind {spec.kind}: add one of its settings to tests/plans.py"
    assert check_grammar(fits) is None, fits
    for broken in (
        fits._replace(key=f"{fits.key}\nkernel.panic"),
        fits._replace(value=f"{fits.value}\nkernel.panic = 1"),
    ):
        assert check_grammar(broken) is not None, broken


@pytest.mark.parametrize("spec", KINDS, ids=lambda spec: str(spec.kind))
def test_every_grammar_is_ascii_only(spec: Any) -> None:
    """No \\d or \\w: they match Unicode digits and letters, which reach files as bytes."""
    for pattern in (spec.key, spec.value, *spec.values.values()):
        assert "\\d" not in pattern and "\\w" not in pattern, pattern


@pytest.mark.parametrize(
    ("text", "number"),
    [
        ("0", 0),
        ("00", 0),
        ("+0", 0),
        ("0x0", 0),
        ("-0", 0),
        ("1", 1),
        ("010", 8),
        ("0x10", 16),
        (" 7 ", 7),
    ],
)
def test_kernel_int_reads_numbers_as_the_kernel_does(text: str, number: int) -> None:
    assert kernel_int(text) == number


@pytest.mark.parametrize(("text"), ["", "abc", "1.5", "٠", "0x", "1e3"])
def test_kernel_int_refuses_what_is_no_kernel_integer(text: str) -> None:
    assert kernel_int(text) is None


@pytest.mark.parametrize(
    ("kind", "key", "value"),
    [
        ("sysctl", "vm.swappiness", "0"),
        ("sysctl", "vm.swappiness", "00"),
        ("sysctl", "vm.swappiness", "+0"),
        ("kernel-arg", "intel_idle.max_cstate", "0"),
        ("kernel-arg", "intel_idle.max_cstate", "00"),
        ("kernel-arg", "intel_idle.max_cstate", "0x0"),
    ],
)
def test_traps_compare_numbers_as_numbers(kind: str, key: str, value: str) -> None:
    assert check_traps(Setting(kind, key, value, "reason")) is not None


def test_a_settings_own_verdicts_are_its_own_whatever_was_checked_before() -> None:
    """check_grammar and check_traps are kept per setting (a matrix checks the same ones): a
    setting that differs in any field, checked after one that passed or failed, gets its own."""
    fine = Setting("sysctl", "vm.swappiness", "1", "reason", rule="test.rule")
    trap = fine._replace(value="0")
    unfit = fine._replace(value="1\nvm.overcommit_memory = 1")
    for first, second in ((fine, trap), (trap, fine), (fine, unfit), (unfit, fine)):
        checked = [(check_grammar(s), check_traps(s)) for s in (first, second, first)]
        assert checked[0] == checked[2] != checked[1]
    assert (check_grammar(fine), check_traps(fine)) == (None, None)
    assert check_traps(trap) is not None
    assert check_grammar(unfit) is not None
    assert check_traps(fine._replace(kind="kernel-arg")) is None  # the trap is sysctl's


def test_a_bad_value_from_a_rule_is_a_goldtune_bug(monkeypatch: pytest.MonkeyPatch) -> None:
    real = plan.run_rules

    def with_bad_value(*args: Any) -> Any:
        proposed, notes = real(*args)
        return [
            *proposed,
            Setting("gpu", "clocks", "1980; reboot", "bad", rule="gpu.clocks"),
        ], notes

    monkeypatch.setattr(plan, "run_rules", with_bad_value)
    with pytest.raises(
        GenerationError, match=r"rule gpu\.clocks produced gpu clocks='1980; reboot'"
    ):
        plan.build_plan(facts(), profile("inference"))


@pytest.mark.parametrize(("kind", "key", "value"), DO_NOT_FIT)
def test_a_bad_override_is_the_users_input(kind: str, key: str, value: str) -> None:
    entry = {"kind": kind, "key": key, "value": value, "reason": "from a pull request"}
    try:
        Override.model_validate(entry)
    except ValidationError:
        return  # the profile format itself refuses it (exit 2 through the loader's error)
    prof = profile("inference", overrides=[entry])
    with pytest.raises(InputError) as raised:
        plan.build_plan(facts(), prof)
    assert len(raised.value.problems) == 1
    assert raised.value.problems[0].path == f"overrides: {kind} {key}"


def test_tuned_sysctl_that_sysctl_d_also_sets_is_refused() -> None:
    entry = {
        "kind": "tuned",
        "key": "sysctl.vm.swappiness",
        "value": "10",
        "reason": "tuned sets it",
    }
    with pytest.raises(
        InputError,
        match=r"tuned sysctl\.vm\.swappiness=10 and sysctl\.d vm\.swappiness=1 differ: the "
        r"live value is sysctl\.d's and tuned-adm verify fails",
    ):
        plan.build_plan(facts(), profile("inference", overrides=[entry]))


def test_a_tuned_sysctl_restating_sysctl_d_s_value_is_accepted() -> None:
    """The same value in both (what tuned.conf restates on purpose) breaks no verify."""
    entry = {
        "kind": "tuned",
        "key": "sysctl.vm.swappiness",
        "value": "1",
        "reason": "restated",
    }
    built = plan.build_plan(facts(), profile("inference", overrides=[entry]))
    assert built.get("tuned", "sysctl.vm.swappiness") is not None
    assert built.get("sysctl", "vm.swappiness") is not None


def test_sysctl_values_compare_by_words() -> None:
    assert checks.same_sysctl_value("4096  87380\t16777216", "4096 87380 16777216")
    assert not checks.same_sysctl_value("4096 87380", "4096 87381")


def test_a_tuned_sysctl_key_alone_is_accepted() -> None:
    entry = {
        "kind": "tuned",
        "key": "sysctl.kernel.sched_autogroup_enabled",
        "value": "0",
        "reason": "tuned only",
    }
    built = plan.build_plan(facts(), profile("inference", overrides=[entry]))
    assert built.get("tuned", "sysctl.kernel.sched_autogroup_enabled") is not None


def test_an_unknown_override_key_suggests_the_known_one() -> None:
    entry = {"kind": "sysctl", "key": "vm.swapiness", "value": "10", "reason": "a typo"}
    with pytest.raises(InputError, match=r"did you mean 'vm\.swappiness'"):
        plan.build_plan(facts(), profile("inference", overrides=[entry]))


@pytest.mark.parametrize(
    ("kind", "key", "value"),
    [
        ("sysctl", "net.ipv4.ip_local_reserved_ports", "30000-32767"),
        ("kernel-arg", "pcie_aspm", "off"),
    ],
)
def test_an_override_may_set_an_unlisted_key_when_it_says_so(
    kind: str, key: str, value: str
) -> None:
    entry = {"kind": kind, "key": key, "value": value, "reason": "what the fleet has always set"}
    with pytest.raises(InputError, match="unlisted: true"):
        plan.build_plan(facts(), profile("inference", overrides=[entry]))
    built = plan.build_plan(facts(), profile("inference", overrides=[{**entry, "unlisted": True}]))
    assert built.get(kind, key) is not None
    assert [w.check for w in built.warnings if key in w.text] == ["unlisted-key"]


def test_an_unlisted_override_still_obeys_the_grammar() -> None:
    entry = {
        "kind": "sysctl",
        "key": "net.x.y",
        "value": "1; reboot",
        "reason": "smuggled",
        "unlisted": True,
    }
    with pytest.raises(InputError, match="plain data"):
        plan.build_plan(facts(), profile("inference", overrides=[entry]))


def test_check_plan_reports_every_problem_at_once() -> None:
    bad = (
        Setting("sysctl", "vm.swappiness", "00", "r"),
        Setting("gpu", "fan", "on", "r"),
        Setting("limit", "* hard nofile", "99999999", "r"),
    )
    findings, _ = check_plan(bad, facts())
    assert len(findings) == 3


@pytest.fixture
def misspelt_profile(tmp_path: Path) -> Path:
    path = tmp_path / "typo.yaml"
    path.write_text(
        "extends: inference\noverrides:\n"
        "  - {kind: sysctl, key: vm.swapiness, value: 10, reason: the batch tier swaps}\n"
    )
    return path


def test_gen_check_runs_the_same_pass_as_gen(misspelt_profile: Path) -> None:
    inputs = ["--hw", "dgx-h100", "--profile", str(misspelt_profile)]
    for args in (["check", *inputs], [*inputs, "-o", str(misspelt_profile.parent / "out")]):
        result = CliRunner().invoke(main, args)
        assert result.exit_code == 2, result.output
        assert "vm.swapiness" in result.output and "did you mean 'vm.swappiness'" in result.output
    assert not (misspelt_profile.parent / "out").exists()


def test_checks_module_has_no_second_grammar() -> None:
    """The grammar lives in the kinds table only (the old checks.py and formats.py disagreed)."""
    for name in (
        "SYNTAX",
        "SERVICE_ACTIONS",
        "UDEV_MATCHES",
        "LIMIT_KEY",
        "GPU_ACTIONS",
        "TUNED_KEY",
    ):
        assert not hasattr(checks, name)


def test_pci_realloc_off_is_a_listed_kernel_arg_reported_once() -> None:
    """Issue 30: pci=realloc=off (NVIDIA's h100 tuned profile) needed unlisted: true, and the
    plan said it twice: set by the override, and "not set" in gpu.vendor-profiles' note. Fails on
    main (InputError: unknown kernel parameter 'pci')."""
    from generator.inputs.load import load_inputs
    from generator.inputs.profile import Override

    inputs = load_inputs("dgx-h100", "inference")
    entry = Override(kind="kernel-arg", key="pci", value="realloc=off", reason="as NVIDIA's")
    built = plan.build_plan(inputs.facts, inputs.profile._replace(overrides=(entry,)))
    assert built.get("kernel-arg", "pci") is not None
    assert not [w for w in built.warnings if "pci" in w.text]
    assert not [n for n in built.notes if "realloc" in n.text]
    assert [n for n in built.notes if "earlycon" in n.text]  # the rest of the note stays
    without = plan.build_plan(inputs.facts, inputs.profile)
    assert [n for n in without.notes if "pci=realloc=off" in n.text]
