"""The plan as JSON: written into every bundle (plan.json) and read back by diff and verify."""

from __future__ import annotations

import functools
from typing import Any

from generator import TOOL, __version__
from generator.model.jsontext import Encoded, dumps_indented
from generator.model.setting import SETTING_KINDS, Note, Plan, PlanWarning, Setting

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
    target = {"distro": plan.distro} if plan.distro else {}
    return {
        **target,
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
    """plan_to_data as ``json.dumps(indent=2, sort_keys=True)`` writes it."""
    data = _plan_data(
        plan,
        [encoded(setting) for setting in plan.settings],
        [encoded(note) for note in plan.notes],
        [encoded(warning) for warning in plan.warnings],
    )
    return dumps_indented(data) + "\n"


# A matrix writes the same settings and notes in most bundles' plan.json (~244 different settings
# over 135 bundles of ~75): each is encoded once; plan.json is ~0.08 ms of a bundle's CPU against
# ~0.30 ms encoding them all (medians of interleaved runs over the 45 shipped bundles). Typed: a
# note and a warning of the same two texts are equal tuples, and are written with other keys.
@functools.lru_cache(maxsize=4096, typed=True)
def encoded(item: Setting | Note | PlanWarning) -> Encoded:
    """A setting's, note's or warning's object in plan.json, encoded."""
    if isinstance(item, Setting):
        return Encoded(dumps_indented(item.as_json()))
    if isinstance(item, Note):
        return Encoded(dumps_indented(note_data(item)))
    return Encoded(dumps_indented(warning_data(item)))


def _setting_from(item: dict[str, Any]) -> Setting:
    if item.get("kind") not in SETTING_KINDS:
        raise ValueError(f"unknown setting kind {item.get('kind')!r}")
    for field in ("key", "value", "rule", "reason"):
        if not isinstance(item.get(field), str):
            raise ValueError(f"setting field {field!r} missing or not a string")
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
    )
