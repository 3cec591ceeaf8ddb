"""The OpenAPI 3.1 document of cardfloor's HTTP API, generated from its route table
(cardd/floor/api.py ENDPOINTS) and its Structs (cardd/floor/views.py).

    python -m cardd.floor.openapi --write docs/floor-openapi.json   # regenerate (make floor-openapi)
    python -m cardd.floor.openapi --check docs/floor-openapi.json   # exit 1 when stale (make check-floor-openapi)
"""
from __future__ import annotations

import json
import re
import sys
from typing import Any

import msgspec

from cardd.floor.api import ENDPOINTS, MAX_BODY, PREFIX, Endpoint
from cardd.floor.views import Error, SnapshotView
from core.generated import clean_descriptions, write_or_check

_REF = "#/components/schemas/{name}"
_ID = {"type": "string", "pattern": "^[A-Za-z0-9_-]{1,64}$"}
_PATH_PARAMETERS = {
    "site": ("The site's id", _ID), "table": ("The table's id", _ID),
    "alarm_id": ("The floor alarm's id", {"type": "integer", "minimum": 1}),
}


def _error(description: str) -> dict[str, Any]:
    return {"description": description,
            "content": {"application/json": {"schema": {"$ref": _REF.format(name="Error")}}}}


def _not_null(schema: dict[str, Any]) -> dict[str, Any]:
    """A query parameter's schema: an optional one is left out, never null."""
    members = [m for m in schema.get("anyOf", ()) if m != {"type": "null"}]
    if len(members) == 1 and schema.get("default", 0) is None:
        return members[0]
    return schema


def _operation(endpoint: Endpoint, components: dict[str, Any], refs: dict[type[Any], Any]) -> dict[str, Any]:
    parameters = [{"name": name, "in": "path", "required": True, "description": _PATH_PARAMETERS[name][0],
                   "schema": _PATH_PARAMETERS[name][1]} for name in re.findall(r"\{(\w+)\}", endpoint.path)]
    if endpoint.query is not None:
        query = components.pop(endpoint.query.__name__)  # its fields are parameters, not a body
        parameters += [{"name": name, "in": "query", "required": name in query.get("required", ()),
                        "schema": _not_null(schema)} for name, schema in query["properties"].items()]
    if endpoint.name == "stream":
        parameters.append({"name": "Last-Event-ID", "in": "header", "required": False,
                           "description": "The id of the last event seen: the stream resumes after it, or "
                                          "starts with a snapshot when it cannot",
                           "schema": {"type": "string"}})
    responses: dict[str, Any] = {}
    if endpoint.response is not None:
        content: dict[str, Any] = {"application/json": {"schema": refs[endpoint.response]}}
        if endpoint.csv:
            content["text/csv"] = {"schema": {"type": "string"},
                                   "description": "With format=csv: the same rows, a header first"}
        responses["200"] = {"description": (endpoint.response.__doc__ or endpoint.summary).splitlines()[0],
                            "content": content}
    elif endpoint.name == "logout":
        responses["204"] = {"description": "The session ended: its cookie is cleared"}
    else:
        responses["200"] = {
            "description": "Server-sent events: `snapshot` (data: SnapshotView) when the stream cannot resume, "
                           "then each change as an event named by its kind (table, alarm, records, rounds; those "
                           "of ?kinds= when given; broker, always: the "
                           "floor's link to the broker flipped, data: BrokerView) with its id",
            "content": {"text/event-stream": {"schema": {"type": "string"}}}}
    if parameters or endpoint.body is not None:
        responses["400"] = _error("A bad parameter or body, in one sentence")
    if endpoint.public:
        responses["401"] = _error("A wrong user or password (the same answer for a user not known)")
        responses["403"] = _error("No X-Requested-With: cardfloor header, or an Origin not this server's")
        responses["429"] = _error("Too many failed log-ins: Retry-After says when to try again")
    else:
        responses["401"] = _error("No token nor session, or one not known or ended")
    if endpoint.roles is not None:
        responses["403"] = _error(f"A role other than {', '.join(sorted(endpoint.roles))}")
    if endpoint.not_found:
        responses["404"] = _error("No such table or alarm")
    if endpoint.body is not None:
        responses["413"] = _error(f"A body larger than {MAX_BODY} bytes")
    responses["503"] = _error("The archive (PostgreSQL) did not answer")
    operation: dict[str, Any] = {"operationId": endpoint.name, "summary": endpoint.summary, "parameters": parameters,
                                 "responses": responses}
    if endpoint.roles is not None:
        operation["description"] = f"Roles: {', '.join(sorted(endpoint.roles))}."
    if endpoint.public:
        operation["security"] = []
    if endpoint.body is not None:
        operation["requestBody"] = {"required": False, "content": {"application/json": {"schema": refs[endpoint.body]}}}
    return operation


def document() -> dict[str, Any]:
    types: list[type[Any]] = [Error, SnapshotView]
    for endpoint in ENDPOINTS:
        types += [kind for kind in (endpoint.response, endpoint.body, endpoint.query)
                  if kind is not None and kind not in types]
    schemas, components = msgspec.json.schema_components(types, ref_template=_REF)
    refs = dict(zip(types, schemas))
    paths: dict[str, Any] = {}
    for endpoint in ENDPOINTS:
        paths.setdefault(PREFIX + endpoint.path, {})[endpoint.method.lower()] = _operation(endpoint, components, refs)
    return {
        "openapi": "3.1.0",
        "info": {"title": "cardfloor HTTP API", "version": "1",
                 "description": "The floor's tables, records, floor alarms, reports and live changes "
                                "(docs/floor-service.md, \"HTTP API\"). Generated from cardd/floor/api.py and "
                                "cardd/floor/views.py by `make floor-openapi`: do not edit."},
        "security": [{"bearer": []}, {"session": []}],
        "paths": paths,
        "components": {"schemas": dict(components),
                       "securitySchemes": {"bearer": {"type": "http", "scheme": "bearer",
                                                      "description": "A token of cardfloor's tokens file"},
                                           "session": {"type": "apiKey", "in": "cookie", "name": "cardfloor_session",
                                                       "description": "The session of a log-in (POST /api/v1/login); "
                                                                      "a state-changing request sends its csrf as "
                                                                      "the X-CSRF-Token header too"}}},
    }


def render() -> str:
    return json.dumps(clean_descriptions(document()), indent=2, sort_keys=True, ensure_ascii=False) + "\n"


def main(argv: list[str] | None = None) -> int:
    return write_or_check(argv, prog="python -m cardd.floor.openapi", description=(__doc__ or "").splitlines()[0],
                          render=render, source="cardd/floor/api.py", make_target="floor-openapi")


if __name__ == "__main__":
    sys.exit(main())
