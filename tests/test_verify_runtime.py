"""gen verify for the container runtime and kubelet layer (issue 14): each check ok on a good
machine or image, and failing on the broken one it exists for."""

from __future__ import annotations

import os
import subprocess
from pathlib import Path

import pytest

from generator.bundle.read import Bundle
from generator.model.setting import Plan, Setting
from generator.verify import image, image_runtime, live
from generator.verify.snapshot import Snapshot
from generator.verify.verdicts import Verdict

CRI = 'plugins."io.containerd.grpc.v1.cri".containerd'


def planned(kind: str, key: str, value: str) -> Setting:
    return Setting(kind, key, value, "because", rule="test.rule")


MEMLOCK = planned("unit-dropin", "containerd.service LimitMEMLOCK", "infinity")
NOFILE = planned("unit-dropin", "containerd.service LimitNOFILE", "1048576")
RUNTIME = planned("containerd", f"{CRI}.default_runtime_name", '"nvidia"')
DOCKER = planned("docker", "default-runtime", '"nvidia"')
SHM = planned("docker", "default-shm-size", '"8G"')
POLICY = planned("kubelet", "cpuManagerPolicy", "static")
RESERVED = planned("kubelet", "reservedMemory/1", "25677Mi")
BUNDLE = Bundle(Path("/nonexistent"), Plan("box", "k8s", (MEMLOCK, NOFILE, RUNTIME, POLICY)))
Rows = dict[str, list[tuple[str, str]]]


def snapshot(**sections: list[tuple[str, str]]) -> live.Live:
    records = {name.replace("_", "-"): list(rows) for name, rows in sections.items()}
    return live.Live.of(Snapshot(records=records), BUNDLE)


def unit_rows(nofile: str = "1048576", running: str = "1048576") -> Rows:
    unit = "containerd.service"
    return {
        "runtime_unit": [
            (f"{unit}:ActiveState", "active"),
            (f"{unit}:LoadState", "loaded"),
            (f"{unit}:LimitNOFILE", nofile),
            (f"{unit}:LimitNOFILESoft", nofile),
            (f"{unit}:LimitMEMLOCK", "infinity"),
            (f"{unit}:LimitMEMLOCKSoft", "infinity"),
        ],
        "runtime_limits": [
            (unit, f"Max open files {running} {running} files"),
            (unit, "Max locked memory unlimited unlimited bytes"),
        ],
    }


# --- live ------------------------------------------------------------------------------------


def test_live_unit_limits_configured_and_running() -> None:
    machine = snapshot(**unit_rows())
    assert live.check_unit_dropin(NOFILE, machine).verdict == Verdict.OK
    assert live.check_unit_dropin(MEMLOCK, machine).verdict == Verdict.OK


def test_live_unit_limit_overridden_by_a_later_dropin() -> None:
    check = live.check_unit_dropin(NOFILE, snapshot(**unit_rows(nofile="infinity")))
    assert check.verdict == Verdict.DIFFERS and "later drop-in" in check.reason


def test_live_unit_running_with_the_old_limits_needs_a_restart() -> None:
    check = live.check_unit_dropin(NOFILE, snapshot(**unit_rows(running="1073741816")))
    assert check.verdict == Verdict.DIFFERS and "restart" in check.reason


def dump(*lines: str) -> Rows:
    return {"containerd_dump": [("-", line) for line in lines]}


def test_live_containerd_merged_config() -> None:
    good = dump("version = 2", f"[{CRI}]", 'default_runtime_name = "nvidia"')
    assert live.check_containerd(RUNTIME, snapshot(**good)).verdict == Verdict.OK
    migrated = dump(
        "version = 3",
        '[plugins."io.containerd.cri.v1.runtime".containerd]',
        'default_runtime_name = "nvidia"',
    )
    assert live.check_containerd(RUNTIME, snapshot(**migrated)).verdict == Verdict.OK
    not_imported = dump("version = 2", f"[{CRI}]", 'default_runtime_name = "runc"')
    assert live.check_containerd(RUNTIME, snapshot(**not_imported)).verdict == Verdict.DIFFERS
    unread = dump('imports = ["/etc/containerd/config.toml"]', "version = 2")
    check = live.check_containerd(RUNTIME, snapshot(**unread))
    assert check.verdict == Verdict.MISSING and "not in effect" in check.reason
    assert live.check_containerd(RUNTIME, snapshot()).verdict == Verdict.NOT_APPLICABLE


def test_live_containerd_reads_a_version_3_setting_in_either_dump() -> None:
    """A containerd 2 target's key (io.containerd.cri.v1.runtime) is found in 2.x's version 3
    dump, and in 1.x's version 2 dump where install.sh wrote the drop-in as version 2 (an image
    whose containerd is older than the table says). Failed before: only v2 keys were mapped."""
    v3_key = planned(
        "containerd",
        'plugins."io.containerd.cri.v1.runtime".containerd.default_runtime_name',
        '"nvidia"',
    )
    v3_dump = dump(
        "version = 3",
        '[plugins."io.containerd.cri.v1.runtime".containerd]',
        'default_runtime_name = "nvidia"',
    )
    v2_dump = dump("version = 2", f"[{CRI}]", 'default_runtime_name = "nvidia"')
    assert live.check_containerd(v3_key, snapshot(**v3_dump)).verdict == Verdict.OK
    assert live.check_containerd(v3_key, snapshot(**v2_dump)).verdict == Verdict.OK


DROPIN_DIR = "/etc/kubernetes/kubelet.conf.d"
OURS_LIVE = f"{DROPIN_DIR}/90-goldtune.conf"
OURS_YAML = (
    'cpuManagerPolicy: "static"\n'
    'reservedMemory:\n  - numaNode: 1\n    limits:\n      memory: "25677Mi"\n'
)


def kubelet_rows(arguments: str, files: dict[str, str]) -> Rows:
    """kubelet.service running with ARGUMENTS, having read FILES in this order."""
    return {
        "runtime_unit": [("kubelet.service:ActiveState", "active")],
        "runtime_cmdline": [("kubelet.service", arguments)],
        "kubelet_file": [("-", path) for path in files],
        "kubelet_config": [
            (path, line) for path, text in files.items() for line in text.splitlines()
        ],
    }


PLAIN = "/usr/bin/kubelet --config=/var/lib/kubelet/config.yaml"
WITH_DIR = PLAIN + f" --config-dir={DROPIN_DIR}"
MAIN = {"/var/lib/kubelet/config.yaml": "kind: KubeletConfiguration\ncpuManagerPolicy: none\n"}


def test_live_kubelet_must_read_the_dropin_directory() -> None:
    without = snapshot(**kubelet_rows(PLAIN, MAIN))
    assert live.check_kubelet(POLICY, without).verdict == Verdict.DIFFERS
    with_dir = snapshot(**kubelet_rows(WITH_DIR, {**MAIN, OURS_LIVE: OURS_YAML}))
    check = live.check_kubelet(POLICY, with_dir)
    assert (check.verdict, check.actual) == (Verdict.OK, f"static (from {OURS_LIVE})")
    assert live.check_kubelet(RESERVED, with_dir).verdict == Verdict.OK


def test_live_kubelet_effective_config_is_the_merge_of_its_files_and_flags() -> None:
    """kubelet's merge (kubelet-config-directory-merging): a later file wins field by field,
    a list is replaced whole, and a command-line flag wins over every file."""
    local = f"{DROPIN_DIR}/95-local.conf"
    later = {**MAIN, OURS_LIVE: OURS_YAML, local: "cpuManagerPolicy: none\n"}
    check = live.check_kubelet(POLICY, snapshot(**kubelet_rows(WITH_DIR, later)))
    assert check.verdict == Verdict.DIFFERS and local in check.reason, check
    # a map in a later file is merged key by key: our reservedMemory is untouched by it
    maps = {**MAIN, OURS_LIVE: OURS_YAML, local: "kubeReserved:\n  cpu: 100m\n"}
    assert live.check_kubelet(RESERVED, snapshot(**kubelet_rows(WITH_DIR, maps))).verdict == (
        Verdict.OK
    )
    # a list in a later file replaces ours: node 1's reservation is gone
    node0 = "reservedMemory:\n  - numaNode: 0\n    limits:\n      memory: 1Gi\n"
    replaced = {**MAIN, OURS_LIVE: OURS_YAML, local: node0}
    check = live.check_kubelet(RESERVED, snapshot(**kubelet_rows(WITH_DIR, replaced)))
    assert check.verdict == Verdict.MISSING, check
    flagged = snapshot(**kubelet_rows(WITH_DIR + " --cpu-manager-policy none", later))
    check = live.check_kubelet(POLICY, flagged)
    assert check.verdict == Verdict.DIFFERS and "--cpu-manager-policy" in check.reason, check


@pytest.mark.parametrize(
    "text",
    ["cpuManagerPolicy: &p static\nx: *p\n", "cpuManagerPolicy: [unclosed\n", "- a list\n"],
    ids=["alias", "broken", "not-a-mapping"],
)
def test_live_kubelet_file_that_does_not_parse_is_missing_not_a_crash(text: str) -> None:
    files = {**MAIN, OURS_LIVE: text}
    check = live.check_kubelet(POLICY, snapshot(**kubelet_rows(WITH_DIR, files)))
    assert check.verdict == Verdict.MISSING and OURS_LIVE in check.reason, check


def collector_functions(*names: str) -> str:
    """The named shell functions of the fixed collector, as it defines them."""
    text = (Path(__file__).resolve().parents[1] / "templates/scripts/collect").read_text()
    found = []
    for name in names:
        start = text.index(f"\n{name}() {{") + 1
        found.append(text[start : text.index("\n}\n", start) + 3])
    return "".join(found)


def test_collector_records_the_files_of_the_running_kubelet_in_its_order(tmp_path: Path) -> None:
    """A real process whose arguments are a kubelet's: the collector reads /proc/PID/cmdline and
    records --config, then --config-dir's *.conf files by name, each line as it is; a FIFO and
    a file of another suffix are not read."""
    main = tmp_path / "config.yaml"
    main.write_text("kind: KubeletConfiguration\ncpuManagerPolicy: none\n")
    dropins = tmp_path / "conf.d"
    dropins.mkdir()
    (dropins / "95-local.conf").write_text("topologyManagerPolicy: best-effort\n")
    (dropins / "90-goldtune.conf").write_text(OURS_YAML)
    (dropins / "50-notes.txt").write_text("cpuManagerPolicy: none\n")
    os.mkfifo(dropins / "10-fifo.conf")
    kubelet = subprocess.Popen(
        ["sh", "-c", "sleep 60", "kubelet", f"--config={main}", "--config-dir", str(dropins)]
    )
    try:
        script = (
            'rec() { printf \'%s\\t%s\\t%s\\n\' "$1" "$2" "$3"; }\nset -f\n'
            + collector_functions("kubelet_file", "collect_kubelet_files")
            + f"collect_kubelet_files {kubelet.pid}\n"
        )
        result = subprocess.run(
            ["sh", "-c", script], capture_output=True, text=True, timeout=20, check=True
        )
    finally:
        kubelet.kill()
        kubelet.wait()
    records = [line.split("\t", 2) for line in result.stdout.splitlines()]
    order = [value for section, _, value in records if section == "kubelet-file"]
    assert order == [str(main), f"{dropins}/90-goldtune.conf", f"{dropins}/95-local.conf"]
    ours = [v for s, k, v in records if s == "kubelet-config" and k.endswith("90-goldtune.conf")]
    assert ours == OURS_YAML.splitlines()  # the indentation kept: YAML
    machine = snapshot(
        runtime_unit=[("kubelet.service:ActiveState", "active")],
        runtime_cmdline=[("kubelet.service", f"kubelet --config-dir={DROPIN_DIR}")],
        kubelet_file=[(k, v) for s, k, v in records if s == "kubelet-file"],
        kubelet_config=[(k, v) for s, k, v in records if s == "kubelet-config"],
    )
    assert live.check_kubelet(POLICY, machine).verdict == Verdict.OK
    assert live.check_kubelet(RESERVED, machine).verdict == Verdict.OK


def test_live_docker_default_runtime() -> None:
    nvidia = snapshot(docker_info=[("DefaultRuntime", "nvidia")])
    assert live.check_docker(DOCKER, nvidia).verdict == Verdict.OK
    runc = snapshot(docker_info=[("DefaultRuntime", "runc")])
    assert live.check_docker(DOCKER, runc).verdict == Verdict.DIFFERS
    assert live.check_docker(SHM, nvidia).verdict == Verdict.NOT_APPLICABLE


# --- image -----------------------------------------------------------------------------------


def tree(root: Path, files: dict[str, str]) -> image.Image:
    for name, text in files.items():
        path = root / name.lstrip("/")
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(text)
    return image.Image(root)


DROPINS = "/etc/systemd/system/containerd.service.d"
UNIT = {
    "/usr/lib/systemd/system/containerd.service": (
        "[Service]\nExecStart=/usr/bin/containerd\nLimitNOFILE=infinity\n"
    ),
    f"{DROPINS}/90-goldtune.conf": "[Service]\nLimitNOFILE=1048576\n",
}


def test_image_unit_dropin_wins_over_the_packaged_unit(tmp_path: Path) -> None:
    assert image_runtime.check_unit_dropin(NOFILE, tree(tmp_path, UNIT)).verdict == Verdict.OK


def test_image_a_later_dropin_overrides_ours(tmp_path: Path) -> None:
    later = {**UNIT, f"{DROPINS}/99-local.conf": "[Service]\nLimitNOFILE=infinity\n"}
    check = image_runtime.check_unit_dropin(NOFILE, tree(tmp_path, later))
    assert check.verdict == Verdict.DIFFERS and "99-local.conf" in check.actual


def runtime_toml(name: str) -> str:
    return f'version = 2\n[{CRI}]\ndefault_runtime_name = "{name}"\n'


DROPIN = {"/etc/containerd/conf.d/90-goldtune.toml": runtime_toml("nvidia")}
CONFIG = "/etc/containerd/config.toml"
LATER = "/etc/containerd/conf.d/99-local.toml"
IMPORTS = 'version = 2\nimports = ["/etc/containerd/conf.d/*.toml"]\n'


@pytest.mark.parametrize(
    ("files", "verdict"),
    [
        ({CONFIG: IMPORTS}, Verdict.OK),
        ({CONFIG: "version = 2\n"}, Verdict.MISSING),
        ({CONFIG: IMPORTS, LATER: runtime_toml("runc")}, Verdict.DIFFERS),
        # containerd with no config.toml loads no file, so no import (issue 26 item 4)
        ({}, Verdict.MISSING),
    ],
    ids=["imported", "not-imported", "later-dropin", "no-config"],
)
def test_image_containerd_dropin_imported_and_effective(
    tmp_path: Path, files: dict[str, str], verdict: Verdict
) -> None:
    assert (
        image_runtime.check_containerd(RUNTIME, tree(tmp_path, {**DROPIN, **files})).verdict
        == verdict
    )


def test_image_daemon_json(tmp_path: Path) -> None:
    good = tree(tmp_path / "a", {"/etc/docker/daemon.json": '{"default-runtime": "nvidia"}'})
    assert image_runtime.check_docker(DOCKER, good).verdict == Verdict.OK
    other = tree(tmp_path / "b", {"/etc/docker/daemon.json": '{"default-runtime": "runc"}'})
    assert image_runtime.check_docker(DOCKER, other).verdict == Verdict.DIFFERS


KUBELET = (
    "apiVersion: kubelet.config.k8s.io/v1beta1\nkind: KubeletConfiguration\n"
    'cpuManagerPolicy: "static"\n'
    'reservedMemory:\n  - numaNode: 1\n    limits:\n      memory: "25677Mi"\n'
)
OURS = "/etc/kubernetes/kubelet.conf.d/90-goldtune.conf"
FLAGS = {
    "/etc/default/kubelet": "KUBELET_EXTRA_ARGS=--config-dir=/etc/kubernetes/kubelet.conf.d\n",
    "/usr/lib/systemd/system/kubelet.service": "[Service]\nExecStart=/usr/bin/kubelet\n",
    "/usr/lib/systemd/system/kubelet.service.d/10-kubeadm.conf": (
        "[Service]\nEnvironmentFile=-/etc/default/kubelet\nExecStart=\n"
        "ExecStart=/usr/bin/kubelet $KUBELET_EXTRA_ARGS\n"
    ),
}
NO_FLAG = {
    "/usr/lib/systemd/system/kubelet.service": FLAGS["/usr/lib/systemd/system/kubelet.service"]
}


def test_image_kubelet_flag_counts_only_where_execstart_expands_it(tmp_path: Path) -> None:
    """A variable that carries --config-dir reaches kubelet only if the ExecStart that starts it
    expands it (issue 26 item 4: on main, --config-dir anywhere in the files counted)."""
    unused = {**FLAGS, "/usr/lib/systemd/system/kubelet.service.d/10-kubeadm.conf": "[Service]\n"}
    check = image_runtime.check_kubelet(POLICY, tree(tmp_path, {OURS: KUBELET, **unused}))
    assert check.verdict == Verdict.MISSING and "not in effect" in check.reason


def test_image_kubelet_dropin_and_its_flag(tmp_path: Path) -> None:
    good = tree(tmp_path / "a", {OURS: KUBELET, **FLAGS})
    assert image_runtime.check_kubelet(POLICY, good).verdict == Verdict.OK
    assert image_runtime.check_kubelet(RESERVED, good).verdict == Verdict.OK
    no_flag = tree(tmp_path / "b", {OURS: KUBELET, **NO_FLAG})
    check = image_runtime.check_kubelet(POLICY, no_flag)
    assert check.verdict == Verdict.MISSING and "not in effect" in check.reason
    no_kubelet = tree(tmp_path / "d", {OURS: KUBELET})
    assert image_runtime.check_kubelet(POLICY, no_kubelet).verdict == Verdict.NOT_APPLICABLE
    local = OURS.replace("90-goldtune", "95-local")
    later = tree(tmp_path / "c", {OURS: KUBELET, **FLAGS, local: "cpuManagerPolicy: none\n"})
    assert image_runtime.check_kubelet(POLICY, later).verdict == Verdict.DIFFERS


# --- daemon.json live: dockerd reads no drop-ins, install.sh merges the bundle's keys in -------

DAEMON_JSON = "/etc/docker/daemon.json"
MERGED = '{\n  "data-root": "/data/docker",\n  "default-shm-size": "8G"\n}'


def daemon_json_rows(text: str, state: str = "present") -> Rows:
    lines = [(DAEMON_JSON, line) for line in text.splitlines()] if state == "present" else []
    return {"conf": [(DAEMON_JSON, state)], "conf_line": lines}


def test_live_docker_keys_dockerd_does_not_report_are_read_from_daemon_json() -> None:
    assert live.check_docker(SHM, snapshot(**daemon_json_rows(MERGED))).verdict == Verdict.OK
    other = MERGED.replace('"8G"', '"64M"')
    found = live.check_docker(SHM, snapshot(**daemon_json_rows(other)))
    assert (found.verdict, found.actual) == (Verdict.DIFFERS, '"64M"')
    broken = live.check_docker(SHM, snapshot(**daemon_json_rows("{ not json")))
    assert (broken.verdict, broken.actual) == (Verdict.DIFFERS, "not JSON")
    absent = live.check_docker(SHM, snapshot(**daemon_json_rows("", state="!absent")))
    assert absent.verdict == Verdict.MISSING
    older = live.check_docker(SHM, snapshot())  # a collector before the conf records
    assert older.verdict == Verdict.NOT_APPLICABLE


def test_a_daemon_json_nested_past_the_parser_is_not_json_not_a_traceback(tmp_path: Path) -> None:
    from generator.verify.health import merged_in_place

    nested = "[" * 65536  # what the collector's 64 KiB of conf-line can carry
    found = live.check_docker(SHM, snapshot(**daemon_json_rows(nested)))
    assert (found.verdict, found.actual) == (Verdict.DIFFERS, "not JSON")
    assert not merged_in_place(DAEMON_JSON, snapshot(**daemon_json_rows(nested)).snapshot)
    image_tree = tree(tmp_path, {DAEMON_JSON: nested})
    assert image_runtime.check_docker(SHM, image_tree).actual == "not JSON"


def test_live_file_check_accepts_a_daemon_json_merged_in_place() -> None:
    from generator.bundle.read import ManifestFile
    from generator.verify.health import check_files

    ours = ManifestFile("rootfs/etc/docker/daemon.json", "a" * 64, 0o644)
    bundle = Bundle(Path("/nonexistent"), BUNDLE.plan, (ours,))

    def verdict(rows: Rows, mode: str = "644") -> Verdict:
        files = {"file": [(DAEMON_JSON, f"{'b' * 64} {mode}")]}
        (check,) = check_files(bundle, Snapshot(records=sections({**rows, **files})))
        return check.verdict

    assert verdict(daemon_json_rows(MERGED)) == Verdict.OK
    assert verdict(daemon_json_rows("[1, 2]")) == Verdict.DIFFERS  # JSON, not an object
    assert verdict(daemon_json_rows(MERGED), mode="600") == Verdict.DIFFERS
    assert verdict({}) == Verdict.DIFFERS  # no conf record: the bytes alone decide


def sections(rows: Rows) -> dict[str, list[tuple[str, str]]]:
    return {name.replace("_", "-"): list(values) for name, values in rows.items()}


def test_the_collector_reads_daemon_json_for_a_plan_with_docker_settings() -> None:
    from generator.render.collector import collect_lines

    docker = Plan("box", "docker", (SHM,))
    assert ("confs", DAEMON_JSON) in [line.fields for line in collect_lines(docker)]
    assert ("confs", DAEMON_JSON) not in [line.fields for line in collect_lines(BUNDLE.plan)]
