"""The floor's topic tree (docs/floor.md, "Topics"): every table publishes under
``cardd/v1/<site>/<table>/`` and nowhere else, and subscribes to nothing."""
from __future__ import annotations

#: the tree's version: a consumer subscribes to ``cardd/v1/#``; a change of the payloads' meaning
#: takes a new one, both published side by side while the floor moves over
ROOT = "cardd/v1"
STATUS, EVENTS, STATE, ANCHOR = "status", "events", "state", "anchor"
LEAVES = (STATUS, EVENTS, STATE, ANCHOR)


def topic(site: str, table: str, leaf: str) -> str:
    """``cardd/v1/<site>/<table>/<leaf>``; the ids are checked by the configuration (no ``/ + #``)."""
    if leaf not in LEAVES:
        raise ValueError(f"no topic {leaf!r}: one of {', '.join(LEAVES)}")
    return f"{ROOT}/{site}/{table}/{leaf}"


def table_filter(site: str, table: str) -> str:
    """The filter that matches one table's topics: what a broker's ACL lets that table publish to."""
    return f"{ROOT}/{site}/{table}/#"
