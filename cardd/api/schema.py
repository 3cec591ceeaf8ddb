"""The JSON Schema of the local API, generated from the message Structs (cardd/api/protocol.py).

    python -m cardd.api.schema --write docs/api-schema.json   # regenerate (make api-schema)
    python -m cardd.api.schema --check docs/api-schema.json   # exit 1 when stale (make check-api-schema)
"""
from __future__ import annotations

import json
import sys
from typing import Any

import msgspec

from cardd.api.protocol import COMMAND_TYPES, PROTOCOL_VERSION, ClientMessage, ServerMessage
from core.generated import clean_descriptions, write_or_check

_REF = "#/$defs/{name}"


def schema() -> dict[str, Any]:
    """Both directions of the protocol in one JSON Schema (2020-12)."""
    command_types = [kind for pair in COMMAND_TYPES.values() for kind in pair]
    (client, server, *_), components = msgspec.json.schema_components((ClientMessage, ServerMessage, *command_types),
                                                                      ref_template=_REF)
    defs = dict(components)  # the commands' args and results too: a COMMAND's `args` names them
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
    return json.dumps(clean_descriptions(schema()), indent=2, sort_keys=True, ensure_ascii=False) + "\n"


def main(argv: list[str] | None = None) -> int:
    return write_or_check(argv, prog="python -m cardd.api.schema", description=(__doc__ or "").splitlines()[0],
                          render=render, source="cardd/api/protocol.py", make_target="api-schema")


if __name__ == "__main__":
    sys.exit(main())
