"""`gen schema`: the JSON Schema of the hardware or profile format."""

from __future__ import annotations

from typing import Any

from generator.inputs.hardware import json_schema
from generator.inputs.profile import ProfileFile


def input_schema(which: str) -> dict[str, Any]:
    schema = json_schema() if which == "hardware" else ProfileFile.model_json_schema()
    schema["$schema"] = "https://json-schema.org/draft/2020-12/schema"
    schema["title"] = f"goldtune {which} description"
    return schema
