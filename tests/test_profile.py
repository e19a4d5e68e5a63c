"""Workload profiles: extends, provenance of knobs, overrides, bad profiles."""

from __future__ import annotations

import pytest

from generator.errors import InputError
from generator.inputs.profile import DEFAULT_ORIGIN, load_profile


def test_shipped_extends_chain_and_provenance():
    profile, _ = load_profile("inference-latency")
    assert profile.chain == ("inference-latency", "inference")
    assert profile.intent == "inference"
    assert profile.smt == "disable" and profile.origins["smt"] == "inference-latency"
    assert profile.cstates == "shallow" and profile.origins["cstates"] == "inference"
    assert profile.origins["hugepages_1g_percent"] == DEFAULT_ORIGIN


def test_child_override_replaces_parent_override(write):
    write(
        "base.yaml",
        """\
        intent: training
        overrides:
          - {kind: sysctl, key: vm.swappiness, value: 5, reason: parent wants 5}
          - {kind: sysctl, key: vm.dirty_ratio, value: 10, reason: parent}
        """,
    )
    leaf = write(
        "leaf.yaml",
        """\
        extends: base.yaml
        overrides:
          - {kind: sysctl, key: vm.swappiness, value: "10", reason: child wins}
        """,
    )
    profile, _ = load_profile(str(leaf))
    by_key = {o.key: o for o in profile.overrides}
    assert by_key["vm.swappiness"].reason == "child wins"
    assert by_key["vm.dirty_ratio"].reason == "parent"


def test_extends_a_shipped_profile(write):
    leaf = write("mine.yaml", "extends: training\nmultinode: true\n")
    profile, _ = load_profile(str(leaf))
    assert profile.chain == ("mine", "training") and profile.multinode


BAD = [
    (
        "cycle",
        {"a.yaml": "extends: b.yaml\nintent: training\n", "b.yaml": "extends: ./a.yaml\n"},
        "a.yaml",
        "extends",
        "extends cycle: a -> b -> a",
    ),
    (
        "self cycle",
        {"a.yaml": "extends: a.yaml\nintent: training\n"},
        "a.yaml",
        "extends",
        "extends cycle",
    ),
    ("unknown parent", {"a.yaml": "extends: nosuch\n"}, "a.yaml", "extends", "no shipped profile"),
    (
        "a bare name is never a sibling file",
        {"a.yaml": "extends: b\n", "b.yaml": "intent: training\n"},
        "a.yaml",
        "extends",
        "no shipped profile",
    ),
    ("no intent", {"a.yaml": "thp: madvise\n"}, "a.yaml", "intent", "required"),
    (
        "bad knob value",
        {"a.yaml": "intent: gaming\n"},
        "a.yaml",
        "intent",
        "invalid value 'gaming'",
    ),
    (
        "unknown knob",
        {"a.yaml": "intent: training\nturbo: true\n"},
        "a.yaml",
        "turbo",
        "unknown field",
    ),
    (
        "string for number",
        {"a.yaml": "intent: training\nhugepages_1g_percent: '10'\n"},
        "a.yaml",
        "hugepages_1g_percent",
        "expected int",
    ),
    (
        "MIG layout with a name that is no MIG profile",
        {"a.yaml": 'intent: training\ngpu_mig_layout: {"3g.40gb; reboot": 1}\n'},
        "a.yaml",
        "gpu_mig_layout",
        "",
    ),
    (
        "MIG layout with a count above 7",
        {"a.yaml": 'intent: training\ngpu_mig_layout: {"1g.10gb": 8}\n'},
        "a.yaml",
        "gpu_mig_layout",
        "invalid value 8: expected less than or equal to 7",
    ),
    (
        # failed before: the plan's gpu.conf grammar refused it as "a goldtune bug" (exit 1)
        "MIG layout with more instances than any GPU has",
        {"a.yaml": 'intent: training\ngpu_mig_layout: {"1g.23gb": 7, "1g.23gb+me": 1}\n'},
        "a.yaml",
        "gpu_mig_layout",
        "8 instances (set by a): no GPU has more than 7 MIG instances",
    ),
    (
        "MIG layout while a parent turns MIG off",
        {
            "a.yaml": 'extends: b.yaml\ngpu_mig_layout: {"7g.80gb": 1}\n',
            "b.yaml": "intent: training\ngpu_mig: disable\n",
        },
        "a.yaml",
        "gpu_mig_layout",
        "gpu_mig is disable (set by b)",
    ),
    (
        # kubeReserved memory is sized from maxPods: the knob feeds both (issue 26; on main the
        # override was taken and the reservation stayed sized for 110 pods)
        "override of a value other settings are sized from",
        {
            "a.yaml": (
                "intent: training\noverrides: [{kind: kubelet, key: maxPods, value: 250, "
                "reason: dense node}]\n"
            )
        },
        "a.yaml",
        "overrides[0].key",
        "write max_pods: 250 instead",
    ),
    (
        "max_pods beyond the bound",
        {"a.yaml": "intent: training\nmax_pods: 0\n"},
        "a.yaml",
        "max_pods",
        "greater than or equal to 1",
    ),
    (
        "runtime_config not an owner",
        {"a.yaml": "intent: training\nruntime_config: operator\n"},
        "a.yaml",
        "runtime_config",
        "",
    ),
    (
        "override without reason",
        {"a.yaml": "intent: training\noverrides: [{kind: sysctl, key: vm.swappiness, value: 1}]\n"},
        "a.yaml",
        "overrides[0].reason",
        "required",
    ),
    (
        "override bad kind",
        {
            "a.yaml": (
                "intent: training\noverrides: [{kind: grub, key: x, value: 1, reason: why not}]\n"
            )
        },
        "a.yaml",
        "overrides[0].kind",
        "invalid value",
    ),
    (
        "override multiline",
        {
            "a.yaml": (
                "intent: training\n"
                'overrides: [{kind: sysctl, key: vm.swappiness, value: "1\\n2", reason: why not}]\n'
            )
        },
        "a.yaml",
        "overrides[0].value",
        "",
    ),
]


@pytest.mark.parametrize("label,files,culprit,path,message", BAD, ids=[b[0] for b in BAD])
def test_bad_profiles(write, label, files, culprit, path, message):
    paths = {name: write(name, text) for name, text in files.items()}
    first = paths[next(iter(files))]
    with pytest.raises(InputError) as caught:
        load_profile(str(first))
    problems = (
        [p for p in caught.value.problems if p.path.startswith(path)]
        if path
        else caught.value.problems
    )
    assert problems, str(caught.value)
    assert message in str(problems[0])
