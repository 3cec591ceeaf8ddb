"""The JSON Schema of the floor export's payloads, generated from the Structs (cardd/export/payloads.py).

    python -m cardd.export.schema --write docs/floor-schema.json   # regenerate (make floor-schema)
    python -m cardd.export.schema --check docs/floor-schema.json   # exit 1 when stale (make check-floor-schema)
"""
from __future__ import annotations

import json
import sys
from typing import Any

import msgspec

from cardd.api.schema import clean_descriptions
from cardd.export.payloads import PAYLOADS, SCHEMA
from core.generated import write_or_check

_REF = "#/$defs/{name}"


def schema() -> dict[str, Any]:
    """Every payload in one JSON Schema (2020-12): one of them, each under its Struct's name."""
    types = [kind for kinds in PAYLOADS.values() for kind in kinds]
    refs, components = msgspec.json.schema_components(types, ref_template=_REF)
    return {
        "$schema": "https://json-schema.org/draft/2020-12/schema",
        "title": f"cardd floor export, {SCHEMA}",
        "description": "The payloads a table publishes under cardd/v1/<site>/<table>/ (docs/floor.md): "
                       + "; ".join(f"{leaf}: {', '.join(k.__name__ for k in kinds)}"
                                   for leaf, kinds in PAYLOADS.items())
                       + ". Generated from cardd/export/payloads.py by `make floor-schema`: do not edit.",
        "anyOf": list(refs),
        "$defs": dict(components),
    }


def render() -> str:
    return json.dumps(clean_descriptions(schema()), indent=2, sort_keys=True, ensure_ascii=False) + "\n"


def main(argv: list[str] | None = None) -> int:
    return write_or_check(argv, prog="python -m cardd.export.schema", description=(__doc__ or "").splitlines()[0],
                          render=render, source="cardd/export/payloads.py", make_target="floor-schema")


if __name__ == "__main__":
    sys.exit(main())
