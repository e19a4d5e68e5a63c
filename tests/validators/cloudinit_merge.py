"""Merge user-data as cloud-init does at first boot, with its own code (run by /usr/bin/python3).

    /usr/bin/python3 cloudinit_merge.py USER_DATA

USER_DATA is anything cloud-init accepts: a cloud-config, gzip-compressed or not, or a MIME
multi-part message (``cloud-init devel make-mime``). It goes through ``UserDataProcessor``
(gzip, MIME, includes), then every part through ``handlers.walk`` with ``walker_callback`` and
the ``CloudConfigPartHandler``, the path ``Init._do_handlers`` takes; the merged cloud-config
(what cloud-init writes to /var/lib/cloud/instance/cloud-config.txt) is printed as JSON.
"""

from __future__ import annotations

import json
import sys
import tempfile

from cloudinit import handlers, helpers
from cloudinit.handlers.cloud_config import CloudConfigPartHandler
from cloudinit.settings import PER_INSTANCE
from cloudinit.user_data import UserDataProcessor


def merged_config(raw: bytes, scratch: str) -> dict:
    paths = helpers.Paths({"cloud_dir": scratch, "run_dir": scratch})
    message = UserDataProcessor(paths).process(raw)
    handler = CloudConfigPartHandler(paths)
    handler.cloud_fn = None  # keep the result in memory instead of writing it
    by_type = dict.fromkeys(handler.list_types(), handler)
    data = {
        "handlers": by_type,
        "handlerdir": scratch,
        "data": None,
        "frequency": PER_INSTANCE,
        "handlercount": 0,
        "excluded": [],
    }
    handler.handle_part(None, handlers.CONTENT_START, None, None, None, None)
    handlers.walk(message, handlers.walker_callback, data=data)
    return handler.cloud_buf or {}


def main() -> None:
    with open(sys.argv[1], "rb") as source, tempfile.TemporaryDirectory() as scratch:
        print(json.dumps(merged_config(source.read(), scratch), default=str))


if __name__ == "__main__":
    main()
