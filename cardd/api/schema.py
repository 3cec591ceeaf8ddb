"""The JSON Schema of the local API, generated from the message Structs (cardd/api/protocol.py).

    python -m cardd.api.schema --write docs/api-schema.json   # regenerate (make api-schema)
    python -m cardd.api.schema --check docs/api-schema.json   # exit 1 when stale (make check-api-schema)
"""
from __future__ import annotations

import argparse
import difflib
import json
import sys
from pathlib import Path
from typing import Any

import msgspec

from cardd.api.protocol import PROTOCOL_VERSION, ClientMessage, ServerMessage

_REF = "#/$defs/{name}"


def schema() -> dict[str, Any]:
    """Both directions of the protocol in one JSON Schema (2020-12)."""
    (client, server), components = msgspec.json.schema_components((ClientMessage, ServerMessage), ref_template=_REF)
    defs = dict(components)
    defs["ClientMessage"] = {"description": "A request line sent to the daemon", **client}
    defs["ServerMessage"] = {"description": "A line the daemon sends", **server}
    return {
        "$schema": "https://json-schema.org/draft/2020-12/schema",
        "title": f"cardd local API, protocol {PROTOCOL_VERSION}",
        "description": "One JSON object per line on the cardd Unix socket, tagged by its `class` (docs/api.md). "
                       "Generated from cardd/api/protocol.py by `make api-schema`: do not edit.",
        "anyOf": [{"$ref": _REF.format(name="ClientMessage")}, {"$ref": _REF.format(name="ServerMessage")}],
        "$defs": defs,
    }


def render() -> str:
    return json.dumps(schema(), indent=2, sort_keys=True, ensure_ascii=False) + "\n"


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(prog="python -m cardd.api.schema", description=(__doc__ or "").splitlines()[0])
    mode = ap.add_mutually_exclusive_group(required=True)
    mode.add_argument("--write", metavar="PATH", type=Path, help="write the schema to PATH")
    mode.add_argument("--check", metavar="PATH", type=Path, help="exit 1 when PATH differs from the messages")
    args = ap.parse_args(argv)
    text = render()
    if args.write:
        args.write.write_text(text, encoding="utf-8")
        return 0
    current = args.check.read_text(encoding="utf-8") if args.check.exists() else ""
    if current == text:
        return 0
    diff = "".join(difflib.unified_diff(current.splitlines(True), text.splitlines(True),
                                        str(args.check), "cardd/api/protocol.py", n=1))
    sys.stderr.write(f"{args.check} is stale (the API messages changed): run `make api-schema` and commit it.\n"
                     f"{diff[:4000]}")
    return 1


if __name__ == "__main__":
    sys.exit(main())
