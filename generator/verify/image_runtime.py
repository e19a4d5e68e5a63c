"""`gen verify --root`: the container runtimes, kubelet, NCCL and unit drop-ins of an image.

Each file is read as its consumer reads it: containerd's imports (``config.toml`` and the globs it
names), docker's daemon.json, nccl.conf's first value, kubelet's drop-in directory only when
kubelet.service starts kubelet with ``--config-dir`` (its ExecStart and the variables it
expands)."""

from __future__ import annotations

import fnmatch
import re
import tomllib
from pathlib import PurePosixPath

import yaml

from generator.model.containerd import key_in_version, version_mismatch
from generator.model.kinds import dropin_section
from generator.model.layout import (
    CONTAINERD_CONFIG,
    CONTAINERD_DROPIN,
    DOCKER_DAEMON_JSON,
    KUBELET_AGENT_DIRS,
    KUBELET_DROPIN_DIR,
    NCCL_STYLE_CONFS,
)
from generator.model.setting import Setting
from generator.verify.checks_runtime import check_daemon_json, check_nccl_text
from generator.verify.consumers import kubelet_yaml, toml_lookup, toml_value
from generator.verify.image_config import ini_value, verdict_of
from generator.verify.imagefs import Image
from generator.verify.units import unit_exists, unit_files, unit_lines
from generator.verify.verdicts import Check, Verdict, check_of

OK, DIFFERS, MISSING, NA = Verdict.OK, Verdict.DIFFERS, Verdict.MISSING, Verdict.NOT_APPLICABLE
NOT_JUDGED = Verdict.NOT_JUDGED


# The C-accelerated safe loader where PyYAML has it (kubelet drop-ins of the image)
YAML_LOADER: type = getattr(yaml, "CSafeLoader", yaml.SafeLoader)


CONTAINERD_DROPIN_DIR = str(PurePosixPath(CONTAINERD_DROPIN).parent)


# Where a kubelet's flags live: the unit, kubeadm's drop-in and the environment files it reads.
KUBELET_FLAG_FILES = ("/etc/default/kubelet", "/etc/sysconfig/kubelet")


def check_unit_dropin(setting: Setting, image: Image) -> Check:
    """The last assignment of the option in the unit and its drop-ins: a later drop-in wins."""
    unit, option = setting.key.split(" ", 1)
    files = unit_files(image, unit)
    if not files or not files[0][0].endswith(f"/{unit}"):
        return check_of(setting, "not installed", NA, f"the image has no {unit}")
    return verdict_of(setting, ini_value(files, dropin_section(option), option))


def glob_matches(pattern: str, path: str) -> bool:
    return fnmatch.fnmatchcase(path, pattern)


def containerd_imports(image: Image) -> list[str] | None:
    """The import globs of the image's config.toml; None when it has none (or cannot be read)."""
    text = image.read(CONTAINERD_CONFIG)
    if text is None:
        return None
    try:
        imports = tomllib.loads(text).get("imports", [])
    except tomllib.TOMLDecodeError:
        return None
    return [str(item) for item in imports] if isinstance(imports, list) else None


def toml_version(text: str | None) -> object:
    """The ``version`` of a containerd file; None when absent or not TOML."""
    try:
        return tomllib.loads(text or "").get("version")
    except tomllib.TOMLDecodeError:
        return None


def containerd_value(text: str, key: str) -> object | None:
    """The value a containerd file sets for ``key``, spelled in the file's own version (install.sh
    writes the drop-in in the version of config.toml: generator/model/containerd.py)."""
    try:
        document = tomllib.loads(text)
    except tomllib.TOMLDecodeError:
        return None
    return toml_lookup(document, key_in_version(key, document.get("version")))


def check_containerd(setting: Setting, image: Image) -> Check:
    """The drop-in counts only if config.toml imports it, and no later import sets the same key."""
    ours = CONTAINERD_DROPIN
    imports = containerd_imports(image)
    if imports is None:
        return check_of(
            setting,
            f"no {CONTAINERD_CONFIG}",
            MISSING,
            f"not in effect: containerd reads a drop-in only through the imports of the config "
            f"it loads, and with no {CONTAINERD_CONFIG} it loads none (containerd LoadConfig; "
            "2.2 only prints the import in `containerd config default`)",
        )
    if not any(glob_matches(pattern, ours) for pattern in imports):
        return check_of(
            setting,
            "not imported",
            MISSING,
            f"not in effect: {CONTAINERD_CONFIG} does not import {ours}",
        )
    mismatch = version_mismatch(
        toml_version(image.read(CONTAINERD_CONFIG)), toml_version(image.read(ours))
    )
    if mismatch:
        return check_of(setting, "not in config.toml's version", DIFFERS, mismatch)
    own = containerd_value(image.read(ours) or "", setting.key)
    if own != toml_value(setting.value):
        return check_of(setting, str(own), DIFFERS, f"{ours} does not set it so")
    ours_name = PurePosixPath(ours).name
    directory = image.resolve(CONTAINERD_DROPIN_DIR)
    present = directory is not None and directory.is_dir()
    later = sorted(entry.name for entry in directory.iterdir()) if directory and present else []
    for name in (n for n in later if n > ours_name and n.endswith(".toml")):
        value = containerd_value(image.read(f"{CONTAINERD_DROPIN_DIR}/{name}") or "", setting.key)
        if value is not None and value != toml_value(setting.value):
            return check_of(
                setting,
                f"{value} ({CONTAINERD_DROPIN_DIR}/{name})",
                DIFFERS,
                "a later drop-in sets another value and is merged last",
            )
    return check_of(setting, f"{setting.value} (imported)", OK)


def check_docker(setting: Setting, image: Image) -> Check:
    text = image.read(DOCKER_DAEMON_JSON)
    if text is None:
        return check_of(
            setting, "no daemon.json", MISSING, "the image has no /etc/docker/daemon.json"
        )
    return check_daemon_json(setting, text, DOCKER_DAEMON_JSON)


def check_nccl(setting: Setting, image: Image) -> Check:
    """nccl.conf, or rccl.conf for an rccl setting (layout.NCCL_STYLE_CONFS)."""
    path = NCCL_STYLE_CONFS[setting.kind]
    text = image.read(path)
    if text is None:
        name = path.rsplit("/", 1)[-1]
        return check_of(setting, f"no {name}", MISSING, f"the image has no {path}")
    # an image has not booted: a value resolved at boot is judged by the marks it is written in
    return check_nccl_text(setting, text, booted=False)


def config_dir_flag(dropin_dir: str) -> re.Pattern[str]:
    """kubelet's --config-dir on this directory, as an ExecStart line spells it."""
    return re.compile(rf"--config-dir[= ]{re.escape(dropin_dir)}/?(\s|\"|'|$)")


UNIT_VARIABLE = re.compile(r"\$\{?([A-Za-z_][A-Za-z0-9_]*)\}?")


NAME = r"[A-Za-z_][A-Za-z0-9_]*"


ASSIGNMENT = re.compile(rf"""(?:"({NAME})=([^"]*)"|({NAME})=(\S*))""")


def kubelet_environment(image: Image, files: list[tuple[str, str]]) -> dict[str, str]:
    """kubelet.service's Environment= (a later assignment wins), then the environment files
    kubeadm's 10-kubeadm.conf reads, which win over Environment= (systemd.exec(5))."""
    variables: dict[str, str] = {}
    for value in unit_lines(files, "Environment"):
        for quoted, quoted_value, bare, bare_value in ASSIGNMENT.findall(value):
            variables[quoted or bare] = quoted_value if quoted else bare_value
    for path in KUBELET_FLAG_FILES:
        for line in (image.read(path) or "").splitlines():
            name, equals, value = line.strip().partition("=")
            if equals and re.fullmatch(NAME, name):
                variables[name] = value.strip().strip("\"'")
    return variables


def kubelet_reads_dropins(image: Image, dropin_dir: str = KUBELET_DROPIN_DIR) -> bool:
    """The ExecStart that starts kubelet (the last one of the unit and its drop-ins) passes
    --config-dir on the drop-in directory, itself or through a variable it expands (kubeadm's
    $KUBELET_CONFIG_ARGS, which the bundle's kubelet.service.d drop-in extends)."""
    files = unit_files(image, "kubelet.service")
    starts = [line for line in unit_lines(files, "ExecStart") if line.strip()]
    if not starts:
        return False
    variables = kubelet_environment(image, files)
    expanded = UNIT_VARIABLE.sub(lambda m: variables.get(m.group(1), ""), starts[-1])
    return bool(config_dir_flag(dropin_dir).search(expanded))


def check_kubelet(setting: Setting, image: Image, dropin_dir: str = KUBELET_DROPIN_DIR) -> Check:
    """The last drop-in (name order) that sets the field wins; kubelet must be told the dir.
    ``dropin_dir`` is the plan's kubelet_dir: kubeadm's kubelet.conf.d, or the --config-dir a
    node agent passes at boot (EKS's nodeadm), which no file of an unbooted image says."""
    field, _, entry = setting.key.partition("/")
    found = None
    for path, text in image.dropins(dropin_dir.removeprefix("/etc/"), ".conf", ("/etc",)):
        data = kubelet_yaml(text)  # a mapping, or why not: nested, aliased, bad YAML
        if isinstance(data, str):  # what it sets is unknown: no verdict holds without it
            return check_of(setting, "not judged", NOT_JUDGED, f"{path}: {data}")
        value = data.get(field)
        if entry and field == "reservedMemory" and isinstance(value, list):
            value = next(
                (
                    str(item.get("limits", {}).get("memory"))
                    for item in value
                    if isinstance(item, dict) and str(item.get("numaNode")) == entry
                ),
                None,
            )
        elif entry:
            value = value.get(entry) if isinstance(value, dict) else None
        if value is not None:
            found = (str(value).lower() if isinstance(value, bool) else str(value), path)
    check = verdict_of(setting, found)
    if check.verdict == OK and not unit_exists(image, "kubelet.service"):
        return check_of(
            setting,
            check.actual,
            NA,
            "the image has no kubelet.service (yet): the "
            "unit that starts it must pass --config-dir",
        )
    if check.verdict == OK and not kubelet_reads_dropins(image, dropin_dir):
        if dropin_dir in KUBELET_AGENT_DIRS:
            return check_of(
                setting,
                check.actual,
                NA,
                f"the node agent passes --config-dir={dropin_dir} when it starts kubelet at "
                "boot (the plan's warnings say when): no file of the image says it yet",
            )
        return check_of(
            setting,
            check.actual,
            MISSING,
            f"not in effect: nothing in the image starts kubelet with --config-dir="
            f"{dropin_dir} (kubelet.service's ExecStart and the variables it expands)",
        )
    return check
