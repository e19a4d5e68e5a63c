"""The collector's data: what ``templates/scripts/collect`` reads for one plan.

The collector is a fixed script, copied verbatim into every bundle; this module writes its data
file (``layout.COLLECT_DATA``), one ``SECTION<TAB>WORD`` line per item, each preceded by the
``# <rule id>: <reason>`` of the setting it checks (``gen verify`` judges the snapshot it prints).
"""

from __future__ import annotations

import re
from collections.abc import Sequence

from generator import TOOL
from generator.errors import InputError, Problem
from generator.model import layout
from generator.model.collect_data import data_line_problem, gpu_sections, plan_reads
from generator.model.probes import (
    EFFECT_PATHS,
    GOVERNOR,
    LIST_SECTIONS,
    SAFE_WORD,
    acs_word,
    limit_user,
    module_param,
)
from generator.model.setting import Plan, Setting
from generator.render.datafile import DataLine, gpu_vendor_lines, setting_line

# Why the collector reads what no single setting asks for.
EFFECT_REASON = "collect: the effect of kernel arguments and tuned options is read here"


def bundle_word(plan: Plan) -> str:
    """The bundle's label as one safe word: ``dgx-h100/inference`` -> ``dgx-h100_inference``."""
    return re.sub(r"[^A-Za-z0-9_.-]+", "_", f"{plan.hardware_name}/{plan.profile_name}")


def _items(plan: Plan) -> dict[str, Sequence[tuple[str, Setting | None]]]:
    """For each list section, its words and the setting each checks (None: no single one)."""
    sysfs: list[tuple[str, Setting | None]] = [(s.key, s) for s in plan.of_kind("sysfs")]
    sysfs += [(path, None) for path in EFFECT_PATHS]
    sysfs += [(GOVERNOR, s) for s in plan.of_kind("tuned") if s.key == "cpu.governor"]
    modprobe_options = [s for s in plan.of_kind("modprobe") if s.key.startswith("options ")]
    tuned_sysctl = [s for s in plan.of_kind("tuned") if s.key.startswith("sysctl.")]
    kernel_params = [(module_param(s.key), s) for s in plan.of_kind("kernel-arg")]
    users = [(limit_user(s.key.split()[0]), s) for s in plan.of_kind("limit")]
    return {
        "sysctl": [(s.key, s) for s in plan.of_kind("sysctl")]
        + [(s.key.removeprefix("sysctl."), s) for s in tuned_sysctl],
        "sysfs": sysfs,
        "modparams": [(param, s) for param, s in kernel_params if param]
        + [(f"{s.key.split()[1]}/{s.key.split()[2]}", s) for s in modprobe_options],
        "modules": [(s.key.split()[1], s) for s in plan.of_kind("modprobe")]
        + [(s.key, s) for s in plan.of_kind("module-load")],
        "limits": [(user, s) for user, s in users if user],
        "manager": [(s.key, s) for s in plan.of_kind("systemd-manager")],
        "irq": [(s.key, s) for s in plan.of_kind("irq")],
        "units": [(s.key, s) for s in plan.of_kind("service")],
        "runtimes": runtime_units(plan),
        # collect_files finds the files with the tool's name; NCCL, RCCL and dockerd read fixed
        # paths
        "confs": [
            (path, s)
            for kind, path in layout.NCCL_STYLE_CONFS.items()
            for s in plan.of_kind(kind)[:1]
        ]
        + [(layout.DOCKER_DAEMON_JSON, s) for s in plan.of_kind("docker")[:1]],
        "acs": [(acs_word(s.key), s) for s in plan.of_kind("pcie-acs")],
        "preflight": [
            (layout.PREFLIGHT_RESULT, s)
            for s in plan.of_kind("service")
            if s.key == layout.PREFLIGHT_UNIT
        ],
    }


def runtime_units(plan: Plan) -> list[tuple[str, Setting]]:
    """The container runtime and kubelet units whose effective state the plan's settings need,
    each with the first setting that needs it (a unit-dropin key starts with its unit)."""
    units = [(s.key.split(" ", 1)[0], s) for s in plan.of_kind("unit-dropin")]
    units += [(layout.CONTAINERD_UNIT, s) for s in plan.of_kind("containerd")]
    units += [(layout.DOCKER_UNIT, s) for s in plan.of_kind("docker")]
    units += [(layout.KUBELET_UNIT, s) for s in plan.of_kind("kubelet")]
    return units


def _checked_word(section: str, word: str, source: str) -> str:
    """The word, held to what verify accepts of its section (probes.data_line_problem)."""
    if not SAFE_WORD.fullmatch(word) or data_line_problem(f"{section}\t{word}"):
        raise InputError(Problem(source, "", f"{word!r} cannot be passed to the collector"))
    return word


def collect_lines(plan: Plan, source: str = "plan") -> list[DataLine]:
    """Every line of the collector's data file, in the order the collector reads them."""
    lines = [
        DataLine("collect: the tool whose units and files are read", ("tool", TOOL)),
        DataLine(
            "collect: the bundle this snapshot is compared with", ("bundle", bundle_word(plan))
        ),
    ]
    items = _items(plan)
    if missing := [section for section in LIST_SECTIONS if section not in items]:
        raise ValueError(
            f"collector sections {missing} have no words: add them to _items in "
            "generator/render/collector.py"
        )
    whole = plan_reads(plan)  # asked for by the plan's kinds and GPU vendors (collect_data.py)
    reads_gpus = any(read.section in gpu_sections() for read in whole)
    if reads_gpus or any(word == "gpus" for word, _ in items["acs"]):
        lines += gpu_vendor_lines(plan.gpu_vendors)
    for section in LIST_SECTIONS:
        seen: set[str] = set()
        for word, setting in items[section]:
            if word in seen:
                continue
            seen.add(word)
            fields = (section, _checked_word(section, word, source))
            line = setting_line(setting, fields) if setting else DataLine(EFFECT_REASON, fields)
            lines.append(line)
    lines += [DataLine(read.reason, (read.section,)) for read in whole]
    return lines
