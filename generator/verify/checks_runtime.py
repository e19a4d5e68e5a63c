"""Live checks of the units and runtimes the bundle configures: services and their providers,
unit drop-ins and daemon command lines, containerd, docker, kubelet and NCCL."""

from __future__ import annotations

import fnmatch
import json
import re
from functools import cache

from generator.bundle.read import Bundle
from generator.errors import InputError
from generator.foreign import read_beneath
from generator.model.containerd import key_in_version
from generator.model.layout import (
    CONTAINERD_DROPIN,
    DOCKER_DAEMON_JSON,
    KUBELET_UNIT,
    MPS_UNIT,
    NCCL_BOOT_BEGIN,
    NCCL_BOOT_END,
    NCCL_LOG_TAG,
    NCCL_STYLE_CONFS,
    NCCL_UNIT,
)
from generator.model.nccl_boot import at_boot
from generator.model.probes import Section
from generator.model.setting import Setting
from generator.model.vendors import NVIDIA
from generator.paths import hardware_db_dir
from generator.verify.checks_gpu import gpu_evidence
from generator.verify.consumers import (
    KUBELET_FLAG_OF_FIELD,
    daemon_json_object,
    daemon_json_value,
    kubelet_field,
    kubelet_flag,
    kubelet_yaml,
    limit_number,
    merge_kubelet,
    nccl_assignments,
    safe_yaml,
    toml_lookup,
    toml_value,
)
from generator.verify.live_state import DIFFERS, MISSING, NA, NOT_COLLECTED, OK, Live, unit_prop
from generator.verify.records import runtime_limit_rows
from generator.verify.snapshot import Why, why_not
from generator.verify.verdicts import Check, check_of

# The bundle's own units that start a daemon: enabled is not enough, it must be running.
DAEMON_UNITS = frozenset({MPS_UNIT})


def check_nccl(setting: Setting, live: Live) -> Check:
    """/etc/nccl.conf (an rccl setting: /etc/rccl.conf) as NCCL (RCCL) reads it when a job
    starts (the collector's conf-line records); NCCL_CONF_FILE or the user's ~/.nccl.conf
    (~/.rccl.conf), read first, and a job's environment still win over it."""
    path = NCCL_STYLE_CONFS[setting.kind]
    state = live.snapshot.value(Section.CONF, path)
    if state is None:
        return check_of(setting, "-", NA, f"the snapshot has no {path} record")
    if state != "present":
        why = why_not(state) or state
        return check_of(setting, why, MISSING, f"{path}: {why}")
    return check_nccl_text(setting, "\n".join(live.snapshot.values(Section.CONF_LINE, path)))


def check_nccl_text(setting: Setting, text: str, booted: bool = True) -> Check:
    """One NCCL (RCCL) setting judged by its file's text: the first assignment of a name wins."""
    path = NCCL_STYLE_CONFS[setting.kind]
    if at_boot(setting.value):
        return check_nccl_at_boot(setting, text, booted)
    actual = nccl_assignments(text).get(setting.key)
    if actual is None:
        return check_of(setting, "not set", MISSING, f"{path} does not set {setting.key}")
    good = actual == setting.value
    return check_of(
        setting, actual, OK if good else DIFFERS, "" if good else f"{path} has another value"
    )


# What NCCL_UNIT writes: whole names (the leading '='), RDMA devices or interfaces as the kernel
# names them (hardware_spec.RdmaDeviceName, InterfaceName), at most 16 (network.nccl)
BOOT_LIST = re.compile(
    r"=[A-Za-z0-9_][A-Za-z0-9_.-]{0,62}(?:,[A-Za-z0-9_][A-Za-z0-9_.-]{0,62}){0,15}"
)


def boot_block(text: str) -> str | None:
    """The lines between NCCL_UNIT's marks (None: the file has no marks, it is not the
    bundle's)."""
    lines = text.split("\n")
    if NCCL_BOOT_BEGIN not in lines:
        return None
    start = lines.index(NCCL_BOOT_BEGIN) + 1
    if NCCL_BOOT_END not in lines[start:]:
        return None
    return "\n".join(lines[start : lines.index(NCCL_BOOT_END, start)])


def check_nccl_at_boot(setting: Setting, text: str, booted: bool) -> Check:
    """A value NCCL_UNIT resolves at boot (issue 38): the file carries its marks; on a booted
    node, what NCCL reads first is the whole-name list the unit wrote between them. No list
    there: the unit found no port it could tell for sure (its journal says why), and NCCL
    uses every port; an earlier line of another value: the unit's is not the one NCCL reads."""
    path = NCCL_STYLE_CONFS[setting.kind]
    block = boot_block(text)
    if block is None:
        return check_of(
            setting, "no marks", MISSING, f"{path} lacks the marks {NCCL_UNIT} writes between"
        )
    if not booted:
        return check_of(setting, "resolved at boot", OK, f"{NCCL_UNIT} writes it between the marks")
    written = nccl_assignments(block).get(setting.key)
    read = nccl_assignments(text).get(setting.key)
    if written is None:
        why = (
            f"{NCCL_UNIT} wrote no {setting.key}: it found no port it could tell for sure "
            f"(journalctl -t {NCCL_LOG_TAG} says why; nics[].pci_address makes it certain)"
        )
        return check_of(setting, read or "not set", MISSING, why)
    if read != written:
        return check_of(setting, read or "not set", DIFFERS, f"{path} sets it before the marks")
    if not BOOT_LIST.fullmatch(written):
        return check_of(setting, written, DIFFERS, "not a list of whole names")
    return check_of(setting, written, OK, f"resolved at boot by {NCCL_UNIT}")


# The NVIDIA units a distro table names with their package (hardware_db/distros/*.yaml nvidia).
PACKAGED_NVIDIA_UNITS = NVIDIA.packaged_units


DISTRO_KEY = re.compile(r"[a-z0-9][a-z0-9.-]{0,39}")


@cache
def distro_packages(distro_key: str) -> dict[str, str]:
    """Packaged NVIDIA unit -> the package that provides it, from the shipped distro table
    (hardware_db/distros/<key>.yaml ``nvidia``); empty for a portable bundle or a key the table
    lacks. Read as data with the safe loader: verify loads no inputs layer
    (tests/test_architecture.py), and the key comes from a foreign plan.json."""
    if not DISTRO_KEY.fullmatch(distro_key):
        return {}
    yaml, loader = safe_yaml()
    try:
        raw = read_beneath(hardware_db_dir(), f"distros/{distro_key}.yaml", 1 << 20)
        table = yaml.load(raw, Loader=loader)
    except (InputError, yaml.YAMLError):
        return {}
    nvidia = table.get("nvidia") if isinstance(table, dict) else None
    found: dict[str, str] = {}
    for name in PACKAGED_NVIDIA_UNITS:
        item = nvidia.get(name) if isinstance(nvidia, dict) else None
        if isinstance(item, dict) and isinstance(item.get("unit"), str) and item.get("package"):
            found[item["unit"]] = str(item["package"])
    return found


def check_required_absent(setting: Setting, live: Live) -> Check:
    """An absent unit the plan enables and install.list requires: missing on the machine the
    plan is for (its GPUs are here: without nvidia-fabricmanager NVLink does not come up),
    not applicable on a machine without them (a VM, a build host)."""
    seen = gpu_evidence(live)
    if seen is None:
        return check_of(
            setting,
            "not installed",
            NA,
            f"{setting.key} is not installed here: no NVIDIA GPU here (nvidia-smi lists none and "
            "the snapshot shows none on the PCI bus), so not the machine the plan is for",
        )
    return check_of(
        setting,
        "not installed",
        MISSING,
        f"{setting.key} is not installed, but {seen}: {provider_of(setting.key, live.bundle)}",
    )


def provider_of(unit: str, bundle: Bundle) -> str:
    """Where an absent unit the plan enables comes from: the bundle itself, or the package the
    distro table names (install.list requires it: install.sh --strict refuses a target without)."""
    if unit in bundle.units:
        return "the bundle's own unit: install the bundle (install.sh)"
    distro = bundle.plan.distro
    package = distro_packages(distro).get(unit)
    if package:
        where = f"{distro} packages it in {package}"
    elif DISTRO_KEY.fullmatch(distro):
        where = f"hardware_db/distros/{distro}.yaml names no package that provides it"
    elif distro:
        where = "no distro table names a package that provides it"
    else:
        where = "install the package that provides it (a portable bundle names none)"
    return f"the plan requires it (install.list require line); {where}"


def check_service(setting: Setting, live: Live) -> Check:
    state = live.snapshot.value(Section.UNIT_ENABLED, setting.key)
    if state is None:
        return check_of(setting, "?", MISSING, NOT_COLLECTED)
    why = why_not(state)
    if why == Why.UNAVAILABLE:
        return check_of(setting, "-", NA, "systemd is not the service manager here")
    if why == Why.ABSENT:
        if setting.value == "mask":
            return check_of(setting, "not masked", MISSING, "no unit and no mask")
        if setting.optional:
            return check_of(
                setting,
                "not installed",
                NA,
                f"{setting.key} is not installed here (optional: enabled where the image has it)",
            )
        if setting.value == "enable":
            return check_required_absent(setting, live)
        return check_of(setting, "not installed", NA, f"{setting.key} is not installed here")
    active = live.snapshot.value(Section.UNIT_ACTIVE, setting.key) or "?"
    good = {
        "enable": {"enabled", "enabled-runtime", "alias", "static", "indirect", "generated"},
        "disable": {"disabled", "masked", "masked-runtime"},
        "mask": {"masked", "masked-runtime"},
    }[setting.value]
    if state in good and setting.value == "enable" and setting.key in DAEMON_UNITS:
        running = active == "active"
        return check_of(
            setting,
            f"{state}, {active}",
            OK if running else DIFFERS,
            "" if running else "the daemon this unit starts is not running",
        )
    return check_of(setting, f"{state}, {active}", OK if state in good else DIFFERS)


# --- container runtimes and kubelet (issue 14) -------------------------------------------------

# A unit's LimitX= option -> its row of /proc/<pid>/limits (records.LIMIT_NAMES), in the same
# units as systemctl show prints it (bytes, files).
RUNTIME_LIMIT_ROWS = {
    "LimitMEMLOCK": "Max locked memory",
    "LimitNOFILE": "Max open files",
}


def process_limit(live: Live, unit: str, option: str) -> tuple[str, str] | None:
    """(soft, hard) of the unit's running process for a LimitX option, from /proc/<pid>/limits."""
    name = RUNTIME_LIMIT_ROWS.get(option)
    if name is None:
        return None
    rows = runtime_limit_rows(live.snapshot, unit)
    row = next((row for row in rows if row.name == name), None)
    return (row.soft, row.hard) if row else None


def check_daemon_command(setting: Setting, live: Live) -> Check:
    """The drop-in's ExecStart against the arguments of the unit's running process
    (/proc/<MainPID>/cmdline): a daemon started with the packaged --no-persistence-mode, or
    before the drop-in, keeps persistence off whatever the unit file now says."""
    unit = setting.key.split(" ", 1)[0]
    state = unit_prop(live, unit, "ActiveState")
    if state is None:
        return check_of(setting, "?", MISSING, NOT_COLLECTED)
    if why_not(state) is not None:
        return check_of(setting, "-", NA, "systemd is not the service manager here")
    if unit_prop(live, unit, "LoadState") == "not-found":
        return check_of(setting, "no such unit", NA, f"{unit} is not installed here")
    running = live.snapshot.values(Section.RUNTIME_CMDLINE, unit)
    if not running:
        return check_of(
            setting, f"not running ({state})", DIFFERS, "no daemon keeps persistence mode on"
        )
    words = running[0].split()
    planned = setting.value.split()
    if "--no-persistence-mode" in words:
        return check_of(
            setting,
            running[0].strip(),
            DIFFERS,
            f"the daemon runs with --no-persistence-mode: it was started before the drop-in "
            f"or a later drop-in wins (systemctl cat {unit}; then restart it)",
        )
    same_program = bool(words) and words[0].rsplit("/", 1)[-1] == planned[0].rsplit("/", 1)[-1]
    if not same_program or words[1:] != planned[1:]:
        return check_of(
            setting,
            running[0].strip(),
            DIFFERS,
            f"the running daemon has other options: started before the drop-in, or a later "
            f"drop-in wins (systemctl cat {unit}; then restart it)",
        )
    return check_of(setting, f"{setting.value} (running process)", OK)


def check_wanted_by(setting: Setting, live: Live) -> Check:
    """[Install] WantedBy= of the drop-in took effect when systemctl enable made the unit
    enabled; a unit without [Install] anywhere stays static and starts only when wanted."""
    unit = setting.key.split(" ", 1)[0]
    state = live.snapshot.value(Section.UNIT_ENABLED, unit)
    if state is None:
        return check_of(setting, "?", MISSING, NOT_COLLECTED)
    why = why_not(state)
    if why == Why.UNAVAILABLE:
        return check_of(setting, "-", NA, "systemd is not the service manager here")
    if why == Why.ABSENT:
        return check_of(setting, "not installed", NA, f"{unit} is not installed here")
    good = state in ("enabled", "enabled-runtime")
    return check_of(
        setting,
        state,
        OK if good else DIFFERS,
        "" if good else f"{unit} is not enabled: the boot does not start it (systemctl enable)",
    )


def check_unit_dropin(setting: Setting, live: Live) -> Check:
    """The unit's configured limit (systemctl show), then the limit its running process has;
    a daemon's command line and [Install] by their own checks."""
    unit, option = setting.key.split(" ", 1)
    if option == "ExecStart":
        return check_daemon_command(setting, live)
    if option == "WantedBy":
        return check_wanted_by(setting, live)
    state = unit_prop(live, unit, "ActiveState")
    if state is None:
        return check_of(setting, "?", MISSING, NOT_COLLECTED)
    if why_not(state) is not None:
        return check_of(setting, "-", NA, "systemd is not the service manager here")
    configured = unit_prop(live, unit, option)
    if configured is None or unit_prop(live, unit, "LoadState") == "not-found":
        return check_of(setting, "no such unit", NA, f"{unit} is not installed here")
    soft_text, _, hard_text = setting.value.partition(":")
    soft = unit_prop(live, unit, option + "Soft") if option.startswith("Limit") else None
    wanted = limit_number(hard_text or soft_text)
    if configured != wanted or (soft is not None and soft != limit_number(soft_text)):
        return check_of(
            setting,
            f"{soft}:{configured}" if soft else configured,
            DIFFERS,
            "a later drop-in or the unit sets another value (systemctl show)",
        )
    running = process_limit(live, unit, option)
    if running is not None:
        expected = tuple(
            "unlimited" if v in ("infinity", limit_number("infinity")) else v
            for v in (limit_number(soft_text), wanted)
        )
        if running != expected:
            return check_of(
                setting,
                f"running process: {running[0]}:{running[1]}",
                DIFFERS,
                f"configured, but {unit} was started before the drop-in: restart it",
            )
        return check_of(setting, f"{setting.value} (running process too)", OK)
    note = "" if state == "active" else f" (configured; {unit} is {state})"
    return check_of(setting, setting.value + note, OK)


def containerd_unread(document: dict[str, object]) -> str:
    """Why a key of the drop-in is not in containerd's merged configuration: the dump's imports
    list the files 1.x loaded (LoadConfig: "the list of config files loaded"), the globs 2.x
    followed."""
    loaded = document.get("imports")
    if isinstance(loaded, list) and not any(
        fnmatch.fnmatchcase(CONTAINERD_DROPIN, str(entry)) for entry in loaded
    ):
        return (
            f"not in effect: containerd did not read {CONTAINERD_DROPIN} (it loaded "
            f"{', '.join(map(str, loaded)) or 'no file'}): its config.toml must import it"
        )
    return "containerd did not take the drop-in's key (another file of its configuration?)"


def check_containerd(setting: Setting, live: Live) -> Check:
    """The value in `containerd config dump`: the configuration containerd merged (imports too)."""
    lines = live.snapshot.values(Section.CONTAINERD_DUMP, "-")
    if not lines:
        return check_of(setting, "-", NA, "containerd is not installed here (no config dump)")
    import tomllib  # here: a snapshot without containerd settings reads no TOML

    try:
        document = tomllib.loads("\n".join(lines))
    except tomllib.TOMLDecodeError as error:
        return check_of(setting, "?", MISSING, f"containerd config dump did not parse: {error}")
    # 2.x dumps version 3 (the CRI runtime table migrated), 1.x version 2: the key as it spells it
    actual = toml_lookup(document, key_in_version(setting.key, document.get("version")))
    if actual is None:
        return check_of(setting, "not configured", MISSING, containerd_unread(document))
    good = actual == toml_value(setting.value)
    return check_of(
        setting,
        str(actual),
        OK if good else DIFFERS,
        "" if good else "another file of the merged configuration wins",
    )


def check_daemon_json(setting: Setting, text: str, where: str) -> Check:
    config = daemon_json_object(text)
    if config is None:
        return check_of(setting, "not JSON", DIFFERS, "dockerd refuses to start with it")
    node = daemon_json_value(config, setting.key)
    good = node == json.loads(setting.value)
    return check_of(
        setting,
        json.dumps(node),
        OK if good else DIFFERS,
        "" if good else f"{where} has another value",
    )


def check_docker(setting: Setting, live: Live) -> Check:
    """What the running dockerd reports (its default runtime); the other daemon.json keys as the
    file on the machine says, which dockerd read when it started (it reads no drop-ins)."""
    if setting.key != "default-runtime":
        state = live.snapshot.value(Section.CONF, DOCKER_DAEMON_JSON)
        if state is None:
            return check_of(setting, "-", NA, f"the snapshot has no {DOCKER_DAEMON_JSON} record")
        if state != "present":
            why = why_not(state) or state
            return check_of(setting, why, MISSING, f"{DOCKER_DAEMON_JSON}: {why}")
        text = "\n".join(live.snapshot.values(Section.CONF_LINE, DOCKER_DAEMON_JSON))
        return check_daemon_json(setting, text, DOCKER_DAEMON_JSON)
    actual = live.snapshot.value(Section.DOCKER_INFO, "DefaultRuntime")
    if actual is None:
        return check_of(setting, "-", NA, "docker is not installed here")
    if why_not(actual) is not None or not actual:
        return check_of(setting, "-", NA, "dockerd is not running")
    return check_of(setting, actual, OK if f'"{actual}"' == setting.value else DIFFERS)


def kubelet_files(live: Live) -> list[tuple[str, dict[str, object]]] | str:
    """(path, mapping) of each file kubelet read, in merge order; or why they cannot be had."""
    files = []
    for path in live.snapshot.values(Section.KUBELET_FILE, "-"):
        if (why := why_not(path)) is not None:
            return why
        parsed = kubelet_yaml("\n".join(live.snapshot.values(Section.KUBELET_CONFIG, path)))
        if isinstance(parsed, str):
            return f"{path}: {parsed}"
        files.append((path, parsed))
    return files


def check_kubelet(setting: Setting, live: Live) -> Check:
    """kubelet must run with --config-dir on the drop-in directory, and the configuration it
    merged from its files and flags must hold the planned value."""
    state = unit_prop(live, KUBELET_UNIT, "ActiveState")
    if state is None:
        return check_of(setting, "?", MISSING, NOT_COLLECTED)
    if state != "active":
        return check_of(setting, "-", NA, "kubelet is not running here")
    arguments = " ".join(live.snapshot.values(Section.RUNTIME_CMDLINE, KUBELET_UNIT))
    dropin_dir = live.bundle.plan.kubelet_dir  # kubeadm's kubelet.conf.d, or a node agent's
    if not re.search(rf"--config-dir[= ]{re.escape(dropin_dir)}/?(\s|$)", arguments):
        return check_of(
            setting,
            "drop-in not read",
            DIFFERS,
            f"not in effect: kubelet runs without --config-dir={dropin_dir}",
        )
    flag = KUBELET_FLAG_OF_FIELD.get(setting.key.partition("/")[0])
    flagged = kubelet_flag(arguments.split(), flag) if flag else None
    if flagged is not None:
        return check_of(
            setting,
            f"{flag}={flagged}",
            OK if flagged == setting.value and "/" not in setting.key else DIFFERS,
            f"kubelet's {flag} on its command line wins over every configuration file",
        )
    files = kubelet_files(live)
    if isinstance(files, str):
        return check_of(setting, "?", MISSING, f"kubelet's configuration files: {files}")
    if not files:
        return check_of(setting, "?", MISSING, NOT_COLLECTED)
    merged: dict[str, object] = {}
    last = ""
    for path, document in files:
        merged = merge_kubelet(merged, document)
        if kubelet_field(document, setting.key) is not None:
            last = path
    actual = kubelet_field(merged, setting.key)
    if actual is None:
        return check_of(setting, "not set", MISSING, "no file kubelet read sets it")
    good = str(actual) == setting.value
    return check_of(
        setting,
        f"{actual} (from {last})",
        OK if good else DIFFERS,
        "" if good else f"{last} is merged after the drop-in and wins",
    )
