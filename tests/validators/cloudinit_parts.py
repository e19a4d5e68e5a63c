"""What cloud-init makes of a composed user-data's parts, with its own code (run by
/usr/bin/python3).

    /usr/bin/python3 cloudinit_parts.py USER_DATA

The path of cloudinit_merge.py (``UserDataProcessor``, then ``handlers.walk`` with
``walker_callback``), with the shell-script part handler beside the cloud-config one: prints as
JSON the scripts it wrote to the instance's scripts/ directory, in the order cc_scripts_user
runs them (``subp.runparts``: sorted names), each with its text, and the merged cloud-config's
write_files paths. A part of any other type (nodeadm's application/node.eks.aws) is logged and
skipped by walker_callback.
"""

from __future__ import annotations

import json
import os
import sys
import tempfile

from cloudinit import handlers, helpers
from cloudinit.handlers.cloud_config import CloudConfigPartHandler
from cloudinit.handlers.shell_script import ShellScriptPartHandler
from cloudinit.settings import PER_INSTANCE
from cloudinit.user_data import UserDataProcessor


def walked(raw: bytes, scratch: str) -> dict:
    paths = helpers.Paths({"cloud_dir": scratch, "run_dir": scratch})
    message = UserDataProcessor(paths).process(raw)
    config = CloudConfigPartHandler(paths)
    config.cloud_fn = None  # keep the result in memory instead of writing it
    scripts = ShellScriptPartHandler(paths)
    by_type = dict.fromkeys(config.list_types(), config)
    by_type |= dict.fromkeys(scripts.list_types(), scripts)
    data = {
        "handlers": by_type,
        "handlerdir": scratch,
        "data": None,
        "frequency": PER_INSTANCE,
        "handlercount": 0,
        "excluded": [],
    }
    config.handle_part(None, handlers.CONTENT_START, None, None, None, None)
    handlers.walk(message, handlers.walker_callback, data=data)
    script_dir = scripts.script_dir
    names = sorted(os.listdir(script_dir)) if os.path.isdir(script_dir) else []
    ran = []
    for name in names:
        with open(os.path.join(script_dir, name), encoding="utf-8") as script:
            ran.append([name, script.read()])
    written = [entry["path"] for entry in (config.cloud_buf or {}).get("write_files", [])]
    return {"scripts": ran, "write_files": written}


def main() -> None:
    with open(sys.argv[1], "rb") as source, tempfile.TemporaryDirectory() as scratch:
        print(json.dumps(walked(source.read(), scratch)))


if __name__ == "__main__":
    main()
