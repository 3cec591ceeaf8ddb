"""Where a TOML or JSON text stops being valid and what is wrong there, in cardd's own words.

A parser's message is its authors' text and changes between releases; what a person reads
from cardd must not. So the position comes from what the parser reports as data (json's
``pos``; tomllib's line and column, which Python 3.11 only writes into its message, so they are
read from there with a strict pattern), and the words from a table of the parser's known
messages: one it does not know (a new release's) loses the detail, never shows its own text.
"""
from __future__ import annotations

import ast
import json
import math
import re
import tomllib
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any


@dataclass(frozen=True)
class SyntaxProblem:
    """What is wrong (``what``, our words; None when the parser's message was not one we know)
    and where: ``line`` and ``column`` (1-based, None when not known), ``byte`` (the offset in the
    encoded input, for a one-line input) and ``at_end`` (the text ended before it was whole)."""
    what: str | None
    line: int | None = None
    column: int | None = None
    byte: int | None = None
    at_end: bool = False

    def where(self) -> str | None:
        """``line 3, column 5`` or ``end of file``; None when not known."""
        if self.at_end:
            return "end of file"
        if self.line is None:
            return None
        return f"line {self.line}" if self.column is None else f"line {self.line}, column {self.column}"

    def sentence(self, language: str) -> str:
        """``line 3, column 5: not valid TOML: expected ...``, as much of it as is known."""
        said = f"not valid {language}: {self.what}" if self.what else f"not valid {language}"
        where = self.where()
        return f"{where}: {said}" if where else said

    def in_a_line(self) -> str:
        """``not JSON: what (column 5)``, for one line of a file named by its number elsewhere."""
        said = f"not JSON: {self.what}" if self.what else "not JSON"
        return f"{said} (column {self.column})"


# ---- TOML -----------------------------------------------------------------------------------

#: tomllib's position suffix (Python 3.11 to 3.13 write it into the message only)
_TOML_AT = re.compile(r"(?s)(?P<what>.*) \(at (?:line (?P<line>\d+), column (?P<column>\d+)"
                      r"|(?P<end>end of document))\)")


def _literal(text: str) -> object:
    """A Python literal the parser wrote with repr() (a key, a character); None when it is not one."""
    try:
        return ast.literal_eval(text)
    except (ValueError, TypeError, SyntaxError, MemoryError, RecursionError):
        return None


def _toml_key(text: str) -> str | None:
    """tomllib's repr of a key (a tuple of strings) as TOML writes the dotted key; None if it is not one."""
    parts = _literal(text)
    if not isinstance(parts, tuple) or not parts or not all(isinstance(part, str) for part in parts):
        return None
    return ".".join(part if re.fullmatch(r"[A-Za-z0-9_-]+", part) else json.dumps(part) for part in parts)


def _illegal(found: re.Match[str]) -> str | None:
    char = _literal(found["char"])
    if not isinstance(char, str) or len(char) != 1:
        return None
    if char == "\n":  # inside a one-line string: it was not closed on its line
        return "a string is not closed before the end of its line"
    return f"illegal character {char!r}"


def _twice(found: re.Match[str]) -> str:
    key = _toml_key(found["key"])
    return f"the table [{key}] is declared twice" if key else "a table is declared twice"


def _closed(found: re.Match[str]) -> str:
    key = _toml_key(found["key"])
    return (f"the table {key} is an inline table or an array of values: it takes no more keys" if key
            else "an inline table or an array of values takes no more keys")


def _redefined(found: re.Match[str]) -> str:
    key = _toml_key(found["key"])
    return f"the table {key} is defined already" if key else "a table is defined already"


def _inline_twice(found: re.Match[str]) -> str:
    key = _literal(found["key"])
    return f"the key {json.dumps(key)} twice in one inline table" if isinstance(key, str) else \
        "a key twice in one inline table"


def _expected_chars(found: re.Match[str]) -> str | None:
    chars = _literal(found["chars"])
    closing = {"'''": "a multi-line literal string is not closed with '''",
               '"""': 'a multi-line string is not closed with """',
               "'": "a literal string is not closed with '"}
    return closing.get(chars) if isinstance(chars, str) else None


_VALUE_FORMS = "a string, a number, true or false, a date, an array or an inline table"

#: tomllib's messages (without their position) and ours for each: a string, or a function of the
#: match that may give None for a part it cannot read (then only "not valid TOML" is said)
_TomlWords = str | Callable[[re.Match[str]], str | None]
_TOML_MESSAGES: list[tuple[str, _TomlWords]] = [
    (r"Invalid statement", "expected a key = value pair, a [table] header or a comment"),
    (r"Expected newline or end of document after a statement", "expected the end of the line after a value "
                                                               "(one key = value pair a line)"),
    (r"Expected '=' after a key in a key/value pair", "expected '=' after a key in a key/value pair"),
    (r"Expected '\]' at the end of a table declaration", "expected ']' at the end of a table declaration"),
    (r"Expected '\]\]' at the end of an array declaration", "expected ']]' at the end of an array of tables "
                                                          "declaration"),
    (r"Invalid initial character for a key part", "a key cannot start with this character (a bare key is "
                                                  "letters, digits, - and _: quote any other)"),
    (r"Cannot declare (?P<key>\(.*\)) twice", _twice),
    (r"Cannot overwrite a value", "this key has a value already"),
    (r"Cannot mutate immutable namespace (?P<key>\(.*\))", _closed),
    (r"Cannot redefine namespace (?P<key>\(.*\))", _redefined),
    (r"Duplicate inline table key (?P<key>'.*'|\".*\")", _inline_twice),
    (r"Unclosed array", "an array is not closed with ']'"),
    (r"Unclosed inline table", "an inline table is not closed with '}' on its line"),
    (r"Unterminated string", "a string is not closed"),
    (r"Expected (?P<chars>'[^']*'|\"[^\"]*\")", _expected_chars),
    (r"Unescaped '\\' in a string", "a backslash in a string that escapes nothing (write \\\\ for one)"),
    (r"Invalid hex value", "a \\u or \\U escape whose digits are not hexadecimal"),
    (r"Escaped character is not a Unicode scalar value", "a \\u or \\U escape that is not a Unicode character"),
    (r"(?:Illegal|Found invalid) character (?P<char>'.*'|\".*\")", _illegal),
    (r"Invalid date or datetime", "not a valid date or time"),
    (r"Invalid value", f"expected a value ({_VALUE_FORMS})"),
]
_TOML_WORDS = [(re.compile(pattern), words) for pattern, words in _TOML_MESSAGES]


def toml_problem(exc: tomllib.TOMLDecodeError, text: str) -> SyntaxProblem:
    """What tomllib refused in ``text`` and where, in our words."""
    message = str(exc)
    found = _TOML_AT.fullmatch(message)
    what = getattr(exc, "msg", None) or (found["what"] if found else message)  # ``msg``: Python 3.14's
    line, column = getattr(exc, "lineno", None), getattr(exc, "colno", None)
    at_end = False
    if not isinstance(line, int) and found is not None:
        at_end = found["end"] is not None
        line, column = (None, None) if at_end else (int(found["line"]), int(found["column"]))
    elif isinstance(line, int):
        at_end = getattr(exc, "pos", -1) >= len(text)
    return SyntaxProblem(_toml_words(what), line if isinstance(line, int) else None,
                         column if isinstance(column, int) else None, at_end=at_end)


def _toml_words(what: str) -> str | None:
    for pattern, words in _TOML_WORDS:
        if (found := pattern.fullmatch(what)) is not None:
            return words if isinstance(words, str) else words(found)
    return None


def last_line(text: str) -> int:
    """The number of the line a text ends on (an error at its end is there)."""
    return text.count("\n") + (0 if text.endswith("\n") and text else 1)


# ---- JSON -----------------------------------------------------------------------------------

#: the json module's messages (``msg``, without the position it adds) and ours
_JSON_WORDS = {
    "Expecting value": "expected a JSON value",
    "Expecting property name enclosed in double quotes": "object keys must be strings",
    "Expecting ':' delimiter": "expected ':' after an object key",
    "Expecting ',' delimiter": "expected ',' or the end of the object or array",
    "Extra data": "trailing characters after the JSON value",
    "Unterminated string starting at": "a string is not closed",
    "Invalid control character at": "a control character in a string (escape it)",
    "Invalid \\escape": "an invalid escape in a string",
    "Invalid \\uXXXX escape": "an invalid \\u escape in a string",
    "Illegal trailing comma before end of object": "a comma before the end of an object",
    "Illegal trailing comma before end of array": "a comma before the end of an array",
    "Unexpected UTF-8 BOM (decode using utf-8-sig)": "a byte order mark (BOM) before the JSON value",
}


def json_text_problem(exc: json.JSONDecodeError) -> SyntaxProblem:
    """What the json module refused in a text and where (its ``pos``, ``lineno``, ``colno``), in our words."""
    text = exc.doc
    if exc.pos >= len(text.rstrip()):
        return SyntaxProblem("the text ends before its JSON value does", exc.lineno, exc.colno, at_end=True)
    what = _JSON_WORDS.get(exc.msg)
    before = text[:exc.pos].rstrip()
    if exc.msg in ("Expecting property name enclosed in double quotes", "Expecting value") and \
            before.endswith(",") and text[exc.pos] in "}]":
        what = f"a comma before the end of an {'object' if text[exc.pos] == '}' else 'array'}"
    return SyntaxProblem(what, exc.lineno, exc.colno, byte=len(text[:exc.pos].encode("utf-8", "surrogatepass")))


def json_line_problem(data: bytes) -> SyntaxProblem:
    """Why ``data``, one line a JSON decoder refused, is not a JSON value, worked out from the
    bytes themselves (the decoder's message is never used): not UTF-8, where the JSON syntax
    breaks, or what JSON has no room for (NaN, a lone surrogate, a number out of range)."""
    try:
        text = data.decode("utf-8")
    except UnicodeDecodeError as exc:
        return SyntaxProblem(_not_utf8(data, exc.start), byte=exc.start)
    try:
        value = json.loads(text, parse_constant=_no_constant)
    except _Constant as exc:
        return SyntaxProblem(f"{exc.name} is not a JSON number")
    except json.JSONDecodeError as exc:
        problem = json_text_problem(exc)
        if problem.at_end:
            return SyntaxProblem("the line ends before its JSON value does", byte=len(data.rstrip()), at_end=True)
        return SyntaxProblem(problem.what, byte=problem.byte)
    except RecursionError:
        return SyntaxProblem("arrays or objects nested too deeply")
    return SyntaxProblem(_beyond_json(value))


def _not_utf8(data: bytes, start: int) -> str:
    """A byte that is not UTF-8 inside a string (a console sending Latin-1), or elsewhere."""
    try:  # with the bad bytes replaced the line is JSON only if they were all inside strings
        json.loads(data.decode("utf-8", "replace"))
    except (ValueError, RecursionError):
        return "not UTF-8 text"
    return "a string is not UTF-8"


class _Constant(Exception):
    def __init__(self, name: str) -> None:
        super().__init__(name)
        self.name = name


def _no_constant(name: str) -> Any:
    raise _Constant(name)


def _beyond_json(value: Any) -> str | None:
    """What in a value the json module read is not JSON as RFC 8259 and msgspec have it; None if nothing."""
    pending = [value]
    while pending:  # not recursive: the value may be nested as deeply as the json module goes
        item = pending.pop()
        if isinstance(item, dict):
            pending.extend(item.keys())
            pending.extend(item.values())
        elif isinstance(item, list):
            pending.extend(item)
        elif isinstance(item, str):
            try:
                item.encode("utf-8")
            except UnicodeEncodeError:
                return "a string holds a \\u escape of a lone surrogate, which is no character"
        elif isinstance(item, float) and math.isinf(item):
            return "a number out of range"
    return None
