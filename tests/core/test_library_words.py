"""A library's next release may word its errors otherwise: what cardd says then loses detail,
never becomes the library's text. The readers of msgspec's, tomllib's and SQLite's errors, given
words no release of theirs has written yet."""
from __future__ import annotations

import sqlite3
import tomllib

import msgspec
import pytest

from cardd.journal.sqlite_errors import sqlite_problem
from core.parse_errors import toml_problem
from core.schema_errors import ProblemKind, schema_problem


@pytest.mark.parametrize(("message", "said"), [
    ("Value is quite wrong - at `$.step[2].cards`", "step[2].cards: not a value allowed here"),
    ("Value is quite wrong - at `key` in `$.shoe.out`", "a key of shoe.out: not a value allowed here"),
    ("Value is quite wrong - somewhere else", "not a value allowed here"),
    ("Expected `quaternion`, got `str` - at `$.spin`", "spin: not a value allowed here"),
    ("Expected `int` >= lots - at `$.limit`", "limit: not a value allowed here"),
])
def test_a_schema_refusal_in_words_msgspec_never_wrote_is_our_generic_sentence(message: str, said: str) -> None:
    problem = schema_problem(msgspec.ValidationError(message))
    assert (problem.kind, problem.sentence()) == (ProblemKind.OTHER, said)


def test_a_schema_refusal_msgspec_writes_today_is_said_in_our_words() -> None:
    class Query(msgspec.Struct, forbid_unknown_fields=True):
        limit: int = 1

    with pytest.raises(msgspec.ValidationError) as refused:
        msgspec.convert({"limit": "ten"}, Query)
    assert schema_problem(refused.value).sentence("query") == "query.limit: expected a whole number, got a string"


@pytest.mark.parametrize(("message", "said"), [
    ("Something new went wrong (at line 3, column 5)", "line 3, column 5: not valid TOML"),
    ("Something new went wrong (at end of document)", "end of file: not valid TOML"),
    ("Something new went wrong, somewhere", "not valid TOML"),
    ("Cannot declare something odd twice (at line 2, column 1)", "line 2, column 1: not valid TOML"),
])
def test_a_toml_refusal_in_words_tomllib_never_wrote_is_our_generic_sentence(message: str, said: str) -> None:
    assert toml_problem(tomllib.TOMLDecodeError(message), "a = 1\n").sentence("TOML") == said


def test_an_sqlite_error_without_a_result_code_is_named_by_its_kind_only() -> None:
    assert sqlite_problem(sqlite3.ProgrammingError("Cannot operate on a closed database.")) == \
        "SQLite failed (ProgrammingError)"
    with sqlite3.connect(":memory:") as conn, pytest.raises(sqlite3.Error) as failed:
        conn.execute("SELECT * FROM no_such_table")
    assert sqlite_problem(failed.value) == "SQLite refused a statement (SQLITE_ERROR)"
