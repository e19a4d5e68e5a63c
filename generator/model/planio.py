"""The plan as JSON: written into every bundle (plan.json) and read back by diff and verify."""

from __future__ import annotations

import hashlib
from typing import Any

from generator import TOOL, __version__
from generator.foreign import MAX_NUMBER_DIGITS, overlong_number
from generator.model.claims import Claim, claim_from_data
from generator.model.jsontext import dumps_indented
from generator.model.layout import (
    KUBELET_DROPIN_DIR,
    KUBELET_DROPIN_DIRS,
    TUNED_DIR,
    TUNED_PROFILES_DIRS,
)
from generator.model.setting import SETTING_KINDS, NicRole, Note, Plan, PlanWarning, Setting

FORMAT = 1


def plan_to_data(plan: Plan) -> dict[str, Any]:
    return _plan_data(
        plan,
        [setting.as_json() for setting in plan.settings],
        [note_data(note) for note in plan.notes],
        [warning_data(warning) for warning in plan.warnings],
    )


def _plan_data(
    plan: Plan, settings: list[Any], notes: list[Any], warnings: list[Any]
) -> dict[str, Any]:
    # A portable plan has no "distro" field, so its plan.json is what it was before there was one.
    target: dict[str, Any] = {"distro": plan.distro} if plan.distro else {}
    if not plan.grub_dropins:  # said only where false: other plan.json files stay as they were
        target["grub_dropins"] = False
    if plan.reboot_for_kernel_args:
        target["reboot_for_kernel_args"] = True
    if plan.tuned_dir != TUNED_DIR:  # said only where not the default, as grub_dropins
        target["tuned_dir"] = plan.tuned_dir
    if plan.kubelet_dir != KUBELET_DROPIN_DIR:  # likewise: a node agent's --config-dir
        target["kubelet_dir"] = plan.kubelet_dir
    if plan.driver != "host":  # as tuned_dir: a host-driver plan.json stays as it was
        target["driver"] = plan.driver
    # Likewise a plan for a machine without NVIDIA GPUs has no "nvidia_gpus" field, and a plan
    # without NICs no "nics" field.
    gpus = {"nvidia_gpus": plan.nvidia_gpus} if plan.nvidia_gpus else {}
    if plan.amd_gpus:  # as nvidia_gpus: said only where there are some
        gpus["amd_gpus"] = plan.amd_gpus
    claims = {"claims": [claim.as_json() for claim in plan.claims]} if plan.claims else {}
    nics = {"nics": [nic._asdict() for nic in plan.nics]} if plan.nics else {}
    return {
        **target,
        **gpus,
        **nics,
        **claims,
        "format": FORMAT,
        "tool": TOOL,
        "version": __version__,
        "hardware": plan.hardware_name,
        "profile": plan.profile_name,
        "settings": settings,
        "notes": notes,
        "warnings": warnings,
    }


def note_data(note: Note) -> dict[str, str]:
    return {"rule": note.rule, "text": note.text}


def warning_data(warning: PlanWarning) -> dict[str, str]:
    return {"check": warning.check, "text": warning.text}


def plan_to_json(plan: Plan) -> str:
    """plan.json's text: keys sorted, two spaces an indent, a final newline."""
    return dumps_indented(plan_to_data(plan)) + "\n"


def content_digest(plan_json: bytes) -> str:
    """A bundle's content digest: the sha256 of its plan.json, in hex. The plan holds every
    setting, note and warning and no timestamp: two bundles of one digest apply the same."""
    return hashlib.sha256(plan_json).hexdigest()


def _setting_from(item: dict[str, Any]) -> Setting:
    if item.get("kind") not in SETTING_KINDS:
        raise ValueError(f"unknown setting kind {item.get('kind')!r}")
    for field in ("key", "value", "rule", "reason"):
        if not isinstance(item.get(field), str):
            raise ValueError(f"setting field {field!r} missing or not a string")
    for field in ("key", "value"):  # what verify and diff read numbers from
        digits = overlong_number(item[field])
        if digits:
            raise ValueError(
                f"a setting's {field} has a number of {digits} digits (at most {MAX_NUMBER_DIGITS})"
            )
    return Setting(
        item["kind"],
        item["key"],
        item["value"],
        item["reason"],
        rule=item["rule"],
        override=bool(item.get("override", False)),
        original_value=item.get("original_value"),
        original_rule=item.get("original_rule"),
        optional=item.get("optional") is True,
    )


def plan_from_data(data: Any) -> Plan:
    """Rebuild a Plan from plan.json; raises ValueError on anything malformed."""
    if not isinstance(data, dict) or data.get("format") != FORMAT or data.get("tool") != TOOL:
        raise ValueError(f"not a {TOOL} plan (format {FORMAT})")
    settings = data.get("settings")
    if not isinstance(settings, list):
        raise ValueError("'settings' is not a list")
    return Plan(
        hardware_name=str(data.get("hardware", "")),
        profile_name=str(data.get("profile", "")),
        settings=tuple(_setting_from(item) for item in settings),
        notes=tuple(
            Note(str(n.get("text", "")), str(n.get("rule", ""))) for n in data.get("notes", [])
        ),
        warnings=tuple(
            PlanWarning(str(w.get("text", "")), str(w.get("check", "")))
            for w in data.get("warnings", [])
        ),
        distro=str(data.get("distro", "")),
        nvidia_gpus=_gpu_count(data.get("nvidia_gpus", 0)),
        amd_gpus=_gpu_count(data.get("amd_gpus", 0)),
        nics=tuple(
            NicRole(str(n.get("name", "")), str(n.get("role", ""))) for n in data.get("nics", [])
        ),
        grub_dropins=data.get("grub_dropins") is not False,
        tuned_dir=_tuned_dir(data.get("tuned_dir", TUNED_DIR)),
        kubelet_dir=_kubelet_dir(data.get("kubelet_dir", KUBELET_DROPIN_DIR)),
        reboot_for_kernel_args=data.get("reboot_for_kernel_args") is True,
        claims=_claims_from(data.get("claims", [])),
        driver=_driver(data.get("driver", "host")),
    )


def _tuned_dir(value: Any) -> str:
    # a path the bundle's files are written under: only the directories tuned reads
    if value not in TUNED_PROFILES_DIRS:
        raise ValueError("'tuned_dir' is not a directory tuned reads profiles from")
    return str(value)


def _kubelet_dir(value: Any) -> str:
    # a path the bundle's files are written under: only the directories a kubelet is known to
    # be started with as --config-dir (kubeadm's through the bundle's drop-in, a node agent's)
    if value not in KUBELET_DROPIN_DIRS:
        raise ValueError(
            "'kubelet_dir' is not a directory kubelet is started to read drop-ins from"
        )
    return str(value)


def _gpu_count(value: Any) -> int:
    # bool is an int to Python, and true is no count of GPUs
    if isinstance(value, bool) or not isinstance(value, int) or not 0 <= value <= 4096:
        raise ValueError("'nvidia_gpus' is not a count of GPUs")
    return value


def _claims_from(items: Any) -> tuple[Claim, ...]:
    if not isinstance(items, list):
        raise ValueError("'claims' is not a list")
    return tuple(claim_from_data(item) for item in items)


DRIVER_MODELS = ("host", "nvidia-gpu-operator", "amd-gpu-operator", "distribution-precompiled")


def _driver(value: object) -> str:
    """plan.json's "driver": one of the models hardware os.driver accepts."""
    if value not in DRIVER_MODELS:
        raise ValueError(f"'driver' is not one of {', '.join(DRIVER_MODELS)}")
    return str(value)
