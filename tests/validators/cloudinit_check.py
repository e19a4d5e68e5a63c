"""Judge cloud-config user-data with cloud-init's own code (run by /usr/bin/python3).

    /usr/bin/python3 cloudinit_check.py OUT_DIR USER_DATA...

For each USER_DATA (the i-th writes under OUT_DIR/<i>/):
* Schema: ``validate_cloudconfig_file(path, get_schema())``, the function that
  `cloud-init schema --config-file` runs (handle_schema_args); one process checks many files.
  It catches a missing "#cloud-config" header, invalid YAML and every schema error.
* Top-level keys: the schema allows unknown top-level keys (a typo like ``write_file:`` passes),
  so every key must be one that a config module of the installed cloud-init declares.
* runcmd and bootcmd: written as cloud-init writes them on first boot (``util.shellify``), to
  <i>/<key>.sh, for shellcheck.
* write_files: decoded with cc_write_files' own ``extract_contents``/``decode_perms`` into
  <i>/files/<path>, with the mode it would get.
Prints a JSON list, one {"problems", "scripts", "files": {path: mode}} per USER_DATA ("files" is
null when the schema check failed and nothing was decoded).
"""

from __future__ import annotations

import json
import os
import sys
from contextlib import redirect_stdout
from pathlib import Path

from cloudinit import util
from cloudinit.config.cc_write_files import decode_perms, extract_contents
from cloudinit.config.schema import SchemaValidationError, get_schema, validate_cloudconfig_file

SCRIPT_KEYS = ("bootcmd", "runcmd")
# Read (and removed) by the cloud-config part handler itself, not by a config module:
# cloudinit/mergers/__init__.py dict_extract_mergers, called from handlers/cloud_config.py.
PART_HANDLER_KEYS = {"merge_how", "merge_type"}
DEFAULT_PERMS = 0o644


def known_top_level_keys(schema: dict) -> set[str]:
    keys: set[str] = set()
    for entry in schema.get("allOf", []):
        ref = entry.get("$ref", "")
        definition = (
            schema["$defs"].get(ref.rsplit("/", 1)[-1], {}) if ref.startswith("#/$defs/") else entry
        )
        keys |= set(definition.get("properties", {}))
    return keys


def save_scripts(config: dict, out: Path) -> list[str]:
    saved = []
    for key in SCRIPT_KEYS:
        if key in config:
            path = out / f"{key}.sh"
            path.write_text(util.shellify(config[key]))
            saved.append(str(path))
    return saved


def save_files(config: dict, out: Path) -> dict[str, str]:
    files: dict[str, str] = {}
    for entry in config.get("write_files") or []:
        path = entry["path"]
        target = out / "files" / path.lstrip("/")
        target.parent.mkdir(parents=True, exist_ok=True)
        contents = extract_contents(entry.get("content", ""), entry.get("encoding", ""))
        target.write_bytes(util.encode_text(contents) if isinstance(contents, str) else contents)
        files[path] = oct(decode_perms(entry.get("permissions"), DEFAULT_PERMS))
    return files


def check_user_data(user_data: Path, out: Path, schema: dict) -> dict:
    try:
        with redirect_stdout(sys.stderr):  # it prints deprecations; stdout carries the JSON report
            validate_cloudconfig_file(str(user_data), schema, False)
    except (SchemaValidationError, RuntimeError) as error:
        return {"problems": [f"cloud-init schema: {error}"], "scripts": [], "files": None}
    config = util.load_yaml(user_data.read_text()) or {}
    known = known_top_level_keys(schema) | PART_HANDLER_KEYS
    problems = [
        f"unknown top-level key '{key}' (no cloud-init module reads it)"
        for key in config
        if key not in known
    ]
    out.mkdir(parents=True, exist_ok=True)
    return {
        "problems": problems,
        "scripts": save_scripts(config, out),
        "files": save_files(config, out),
    }


def main(argv: list[str]) -> int:
    out, user_data = Path(argv[1]), [Path(arg) for arg in argv[2:]]
    os.umask(0o022)
    schema = get_schema()
    reports = [
        check_user_data(path, out / str(index), schema) for index, path in enumerate(user_data)
    ]
    print(json.dumps(reports))
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv))
