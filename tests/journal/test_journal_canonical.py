"""The canonical JSON text's fast way (msgspec) gives the json module's bytes, or steps aside."""
from __future__ import annotations

import datetime
import decimal
import enum
import json
import uuid
from collections import OrderedDict
from typing import Any

import pytest

from cardd.journal import Entry, JournalEntryError
from cardd.journal.records import canonical_json, check_entries, plain_canonical_json, reference_canonical_json


def reference(value: Any) -> str:
    """The definition: what the journal stored before the fast way (docs/journal.md)."""
    return json.dumps(value, sort_keys=True, separators=(",", ":"), ensure_ascii=False, allow_nan=False)


class Colour(enum.Enum):
    RED = 1


class Level(enum.IntEnum):
    HIGH = 3


class Side(str, enum.Enum):
    LEFT = "left"


#: plain data: the fast way's text, byte for byte the reference's
PLAIN: list[dict[str, Any]] = [
    {},
    {"b": 1, "a": "é", "c": None, "d": True, "e": False, "f": [], "g": {}},
    {"card": "9S", "index": 48, "message": "card #48 (9S) drawn in error", "input": {
        "v": 2, "type": "DeviceMessage", "device": "shoe-reader", "message": "300030390000000030",
        "event_index": 362, "unit": ["shoe", "sim", "shoe-reader-1"]}},
    {"text": "\x00\x01\x1f\x7f\b\f\n\r\t\"\\/ \u2028\u2029 \U0001f0a1 \uffff é"},
    {"Z": 1, "a": 2, "é": 3, "\uffff": 4, "\U0001f0a1": 5, "": 6, "aa": 7, "a\x00": 8},
    {"big": 2**70, "neg": -2**63 - 1, "max": 2**64, "zero": 0, "deep": [[[{"x": [1, [2, {"y": "z"}]]}]]]},
    {"level": Level.HIGH, "side": Side.LEFT},  # int and str enums: their values, as the json module writes them
    OrderedDict([("b", 1), ("a", OrderedDict([("d", 1), ("c", 2)]))]),
]

#: what the fast way must leave to the json module: floats (formatted otherwise), and what msgspec
#: writes but the json module refuses or writes otherwise
NOT_PLAIN: list[dict[Any, Any]] = [
    {"x": 1.5}, {"x": 1e16}, {"x": 1e-05}, {"x": -0.0}, {"x": [1, {"y": 2.0}]},
    {"x": float("nan")}, {"x": float("inf")},
    {"x": b"bytes"}, {"x": bytearray(b"b")}, {"x": {1, 2}}, {"x": frozenset()}, {"x": (1, 2)},
    {"x": decimal.Decimal("1")}, {"x": datetime.date(2026, 11, 27)}, {"x": datetime.datetime(2026, 11, 27)},
    {"x": uuid.UUID(int=1)}, {"x": Colour.RED}, {1: "int key"}, {"x": {2: "nested int key"}},
    {"x": "\ud800"},  # a lone surrogate: the json module writes it, UTF-8 cannot hold it
    {"x": object()},
]


@pytest.mark.parametrize("value", PLAIN)
def test_plain_data_takes_the_fast_way_and_gets_the_reference_text(value):
    assert plain_canonical_json(value) == reference(value)
    assert canonical_json(value, "data") == reference(value) == reference_canonical_json(value, "data")


@pytest.mark.parametrize("value", NOT_PLAIN)
def test_data_that_is_not_plain_is_left_to_the_json_module(value):
    assert plain_canonical_json(value) is None
    try:
        expected = reference(value)
    except (TypeError, ValueError) as exc:
        with pytest.raises(JournalEntryError, match="data is not JSON-serialisable"):
            canonical_json(value, "data")
        assert str(exc)
    else:
        assert canonical_json(value, "data") == expected


def test_a_circular_value_is_refused_by_both_ways():
    loop: dict[str, Any] = {}
    loop["self"] = loop
    assert plain_canonical_json(loop) is None
    with pytest.raises(JournalEntryError, match="data is not JSON-serialisable"):
        canonical_json(loop, "data")


def test_check_entries_refuses_what_entry_check_refuses():
    Entry("event", source="table", data={"a": 1}).check()  # the header passed once: the fast check knows it
    check_entries([Entry("event", source="table", data={"a": 1}, ts_ns=5)])
    for entry, complaint in [(Entry("event", source="table", ts_ns=-1), "ts_ns -1"),
                             (Entry("event", source="table", ts_ns=True), "ts_ns True"),
                             (Entry("event", source="table", data=[1]), "must be a JSON object"),  # type: ignore[arg-type]
                             (Entry("export", source="journal"), "written only by the journal"),
                             (Entry("event", source="table\x1f"), "control characters")]:
        with pytest.raises(JournalEntryError, match=complaint):
            check_entries([Entry("event", source="table"), entry])
