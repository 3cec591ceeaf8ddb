"""What a typed schema (msgspec) refused, re-said in cardd's own words.

msgspec's ValidationError carries one text (``Expected `int` >= 1 - at `$.limit` ``) and no
data. :func:`schema_problem` reads it with strict patterns, one per shape msgspec is known to
write, into a :class:`SchemaProblem`: where (the path), what kind of problem, the field or
value named, and our sentence for it. A text none of them matches (a new msgspec's wording)
is still our sentence, a generic one with the path when that can be read: a library release
may cost detail, never put its own words in front of a user.
"""
from __future__ import annotations

import ast
import enum
import math
import re
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

import msgspec
import msgspec.inspect as schema_info

#: how the schema's values are spoken of: JSON's names, or TOML's (a table, no null)
_TYPE_WORDS_JSON = {
    "int": "a whole number", "float": "a number", "str": "a string", "bool": "true or false", "null": "null",
    "object": "an object", "array": "an array", "bytes": "bytes (base64)", "datetime": "a date and time",
    "date": "a date", "time": "a time of day", "timedelta": "a duration", "uuid": "a UUID",
    "decimal": "a decimal number",
}
_TYPE_WORDS_TOML = {**_TYPE_WORDS_JSON, "object": "a table", "null": ""}  # no null: an optional key is left out
#: what was found, where it differs from what is expected (a float where a whole number is wanted)
_GOT_WORDS = {"float": "a floating-point number"}

#: what a length counts, by the type msgspec names
_LENGTH_UNITS = {"str": "character", "bytes": "byte", "array": "item", "object": "key"}

_BOUNDS = {">=": "of at least", ">": "greater than", "<=": "of at most", "<": "less than"}
_LENGTH_BOUNDS = {">=": "at least", "<=": "at most"}

#: msgspec's messages for a value of the right type in the wrong form, and ours
_FORMS = {
    "Invalid RFC3339 encoded datetime": "not a date and time (RFC 3339)",
    "Invalid RFC3339 encoded date": "not a date (RFC 3339)",
    "Invalid RFC3339 encoded time": "not a time of day (RFC 3339)",
    "Invalid ISO8601 duration": "not a duration (ISO 8601)",
    "Invalid base64 encoded string": "not base64",
    "Invalid UUID": "not a UUID", "Invalid UUID bytes": "not a UUID",
    "Invalid decimal string": "not a decimal number",
    "Invalid epoch timestamp": "not a Unix time",
    "Number out of range": "a number out of range",
    "Integer value out of range": "a whole number out of range",
    "Duration is out of range": "a duration out of range",
}


class ProblemKind(enum.Enum):
    WRONG_TYPE = "wrong type"          # a string for a number, an array for an object
    OUT_OF_RANGE = "out of range"      # a bound, a length, a pattern, a multiple
    MISSING_FIELD = "missing field"    # ``field`` is the one missing
    UNKNOWN_FIELD = "unknown field"    # ``field`` is the one not allowed
    NOT_ALLOWED = "not allowed"        # a value not among an enum's or a literal's (``value``)
    OTHER = "other"                    # a text none of the known shapes matched


#: one path step: a field or key name, an array index, or ``...`` (a value under some key of a mapping)
PathStep = str | int


@dataclass(frozen=True)
class SchemaProblem:
    """One refusal: ``path`` from the root (None when it could not be read), ``kind``, ``field``
    (a missing or unknown field), ``value`` (the value not allowed, when msgspec showed it),
    ``in_key`` (a mapping's key was refused, not its value) and ``what``, our words for it."""
    path: tuple[PathStep, ...] | None
    kind: ProblemKind
    what: str
    field: str | None = None
    value: str | int | None = None
    in_key: bool = False
    #: for a value not allowed, the values that are, when the schema was given to read them from
    allowed: tuple[str, ...] = ()

    def where(self, root: str = "") -> str:
        """The path as ``step[0].cards``, after ``root`` when one is given (``$.shoe.out``,
        ``sim_deal.cards``, ``sim_deal`` for the root); empty for the root or a path not read."""
        return dotted((root, *(self.path or ())) if root else self.path or ())

    def sentence(self, root: str = "") -> str:
        """``step[0].cards: expected a whole number, got a string``; with no path (and no
        ``root``), just what."""
        where = self.where(root)
        if self.in_key:
            where = f"a key of {where}" if where else "a key"
        what = self.what
        if self.kind is ProblemKind.NOT_ALLOWED and self.allowed:
            what = f"{self.value!r}: expected one of {', '.join(self.allowed)}" if self.value is not None else \
                f"expected one of {', '.join(self.allowed)}"
        return f"{where}: {what}" if where else what


def dotted(path: tuple[PathStep, ...]) -> str:
    """A path as the project writes one: ``devices.shoe``, ``step[2].set``, ``shoe.out[...]``."""
    text = ""
    for step in path:
        if isinstance(step, int):
            text += f"[{step}]"
        elif step == "...":
            text += "[...]"
        else:
            text += f".{step}" if text else step
    return text


# ---- reading msgspec's text -------------------------------------------------------------------

_SUFFIX = re.compile(r"(?s)(?P<what>.*?) - at (?P<where>`.*`)")
_PATH = re.compile(r"`\$(?P<path>[^`]*)`")
_KEY_PATH = re.compile(r"`key(?P<inner>[^`]*)` in `\$(?P<path>[^`]*)`")
_STEP = re.compile(r"\.(?P<name>[^.\[`]+)|\[(?P<index>\d+)\]|\[(?P<any>\.\.\.)\]")


def _parse_path(text: str) -> tuple[PathStep, ...] | None:
    steps: list[PathStep] = []
    position = 0
    while position < len(text):
        step = _STEP.match(text, position)
        if step is None:
            return None
        steps.append(int(step["index"]) if step["index"] is not None else "..." if step["any"] else step["name"])
        position = step.end()
    return tuple(steps)


def _types(names: str, words: dict[str, str]) -> str | None:
    """``int | null`` as ``a whole number or null``; None if any name is not one we know."""
    said = [words.get(name.strip()) for name in names.split("|")]
    if any(s is None for s in said):
        return None
    known = [s for s in said if s]  # an empty word: a type not spoken of (TOML's null)
    if not known:
        return None
    return known[0] if len(known) == 1 else ", ".join(known[:-1]) + " or " + known[-1]


def _number(text: str) -> str | None:
    """A bound as msgspec wrote it (``1``, ``9223372036.0``), shown without a needless ``.0``."""
    try:
        value = float(text)
    except ValueError:
        return None
    if not math.isfinite(value):
        return None
    if re.fullmatch(r"-?\d+", text):
        return text
    return str(int(value)) if value.is_integer() else repr(value)


def _counted(count: str, unit: str) -> str:
    return f"{count} {unit}" if count == "1" else f"{count} {unit}s"


def _literal_value(text: str) -> str | int | None:
    """A value msgspec showed with repr() (a string or a whole number); None if it is not one."""
    try:
        value = ast.literal_eval(text)
    except (ValueError, TypeError, SyntaxError, MemoryError, RecursionError):
        return None
    return value if isinstance(value, (str, int)) and not isinstance(value, bool) else None


_Reader = Callable[[re.Match[str], dict[str, str]], "tuple[ProblemKind, str, str | None, str | int | None] | None"]


def _wrong_type(found: re.Match[str], words: dict[str, str]) -> tuple[ProblemKind, str, None, None] | None:
    want = _types(found["want"], words)
    if want is None:
        return None
    got = _types(found["got"], {**words, **_GOT_WORDS}) if found["got"] else None
    return ProblemKind.WRONG_TYPE, f"expected {want}, got {got}" if got else f"expected {want}", None, None


def _bound(found: re.Match[str], words: dict[str, str]) -> tuple[ProblemKind, str, None, None] | None:
    kind, limit = words.get(found["type"]), _number(found["limit"])
    if kind is None or limit is None:
        return None
    return ProblemKind.OUT_OF_RANGE, f"expected {kind} {_BOUNDS[found['op']]} {limit}", None, None


def _multiple(found: re.Match[str], words: dict[str, str]) -> tuple[ProblemKind, str, None, None] | None:
    kind, factor = words.get(found["type"]), _number(found["factor"])
    if kind is None or factor is None:
        return None
    return ProblemKind.OUT_OF_RANGE, f"expected {kind} that is a multiple of {factor}", None, None


def _length(found: re.Match[str], words: dict[str, str]) -> tuple[ProblemKind, str, None, None] | None:
    kind = words.get(found["type"])
    if kind is None:
        return None
    count = _counted(found["count"], _LENGTH_UNITS[found["type"]])
    return ProblemKind.OUT_OF_RANGE, f"expected {kind} of {_LENGTH_BOUNDS[found['op']]} {count}", None, None


def _array_length(found: re.Match[str], words: dict[str, str]) -> tuple[ProblemKind, str, None, None]:
    low, high, got = found["low"], found["high"], found["got"]
    count = f"{low} to {high} items" if high else f"{found['how'] or ''}{_counted(low, 'item')}"
    said = f"expected {words['array']} of {count}"
    return ProblemKind.OUT_OF_RANGE, f"{said}, got {_counted(got, 'item')}" if got else said, None, None


def _pattern(found: re.Match[str], words: dict[str, str]) -> tuple[ProblemKind, str, None, None] | None:
    pattern = _literal_value(found["pattern"])
    if not isinstance(pattern, str):
        return None
    return ProblemKind.OUT_OF_RANGE, f"expected {words['str']} matching the pattern {pattern}", None, None


def _timezone(found: re.Match[str], words: dict[str, str]) -> tuple[ProblemKind, str, None, None] | None:
    kind = words.get(found["type"])
    if kind is None:
        return None
    return ProblemKind.OUT_OF_RANGE, f"expected {kind} {'without' if found['no'] else 'with'} a time zone", None, None


def _field(kind: ProblemKind) -> _Reader:
    def read(found: re.Match[str], words: dict[str, str]) -> tuple[ProblemKind, str, str | None, None]:
        name = found["field"]
        shown = repr(name)
        said = f"field {shown} is missing" if kind is ProblemKind.MISSING_FIELD else f"unknown field {shown}"
        return kind, said, name, None
    return read


def _not_allowed(found: re.Match[str], words: dict[str, str]) -> tuple[ProblemKind, str, None, str | int | None]:
    value = _literal_value(found["value"])
    said = "not one of the values allowed" if value is None else f"{value!r} is not one of the values allowed"
    return ProblemKind.NOT_ALLOWED, said, None, value


def _form(found: re.Match[str], words: dict[str, str]) -> tuple[ProblemKind, str, None, None]:
    return ProblemKind.OUT_OF_RANGE, _FORMS[found[0]], None, None


_SHAPES: list[tuple[re.Pattern[str], _Reader]] = [(re.compile(pattern), reader) for pattern, reader in [
    (r"Expected `(?P<want>[^`]+)`(?:, got `(?P<got>[^`]+)`)?", _wrong_type),
    (r"Expected `(?P<type>int|float)` (?P<op>>=|>|<=|<) (?P<limit>\S+)", _bound),
    (r"Expected `(?P<type>int|float)` that's a multiple of (?P<factor>\S+)", _multiple),
    (r"Expected `(?P<type>str|bytes|array|object)` of length (?P<op>>=|<=) (?P<count>\d+)", _length),
    (r"Expected `array` of (?P<how>at least |at most )?length (?P<low>\d+)(?: to (?P<high>\d+))?"
     r"(?:, got (?P<got>\d+))?", _array_length),
    (r"Expected `str` matching regex (?P<pattern>'.*'|\".*\")", _pattern),
    (r"Expected `(?P<type>datetime|time)` with (?P<no>no )?(?:a )?timezone component", _timezone),
    (r"(?s)Object missing required field `(?P<field>.*)`", _field(ProblemKind.MISSING_FIELD)),
    (r"(?s)Object contains unknown field `(?P<field>.*)`", _field(ProblemKind.UNKNOWN_FIELD)),
    (r"(?s)Invalid (?:enum )?value (?P<value>.+)", _not_allowed),
    ("|".join(re.escape(text) for text in _FORMS), _form),
]]


def schema_problem(error: Exception, *, toml: bool = False, schema: Any = None, data: Any = None) -> SchemaProblem:
    """A msgspec.ValidationError as a :class:`SchemaProblem`; ``toml``: speak of TOML's tables
    (a JSON object) and leave null unsaid; ``schema`` (the type ``data`` was converted to): where
    a value is not one of a list, name the list."""
    words = _TYPE_WORDS_TOML if toml else _TYPE_WORDS_JSON
    message = str(error)
    what, in_key = message, False
    path_read: tuple[PathStep, ...] | None = ()
    if (suffix := _SUFFIX.fullmatch(message)) is not None:
        what = suffix["what"]
        where = suffix["where"]
        if (plain := _PATH.fullmatch(where)) is not None:
            path_read = _parse_path(plain["path"])
        elif (key := _KEY_PATH.fullmatch(where)) is not None:
            path_read, in_key = _parse_path(key["path"]), True
        else:
            path_read = None
    path = path_read
    for pattern, reader in _SHAPES:
        if (found := pattern.fullmatch(what)) is not None and (read := reader(found, words)) is not None:
            kind, said, field, value = read
            allowed = allowed_values(schema, path, data) if kind is ProblemKind.NOT_ALLOWED and path else ()
            return SchemaProblem(path, kind, said, field, value, in_key, allowed)
    return SchemaProblem(path, ProblemKind.OTHER, "not a value allowed here", in_key=in_key)


def allowed_values(schema: Any, path: tuple[PathStep, ...] | None, data: Any) -> tuple[str, ...]:
    """The values ``schema`` allows at ``path`` of ``data`` when they are a list (a Literal's, an
    enum's, a tagged union's tags); empty otherwise. In a tagged union the member is the one
    whose tag ``data`` carries."""
    if schema is None or not path:
        return ()
    kind: schema_info.Type | None = schema_info.type_info(schema)
    for step in path:
        if isinstance(kind, schema_info.UnionType):
            members = [t for t in kind.types if isinstance(t, schema_info.StructType) and t.tag_field is not None]
            if not members:
                kind = next((t for t in kind.types if not isinstance(t, schema_info.NoneType)), None)
            elif step == members[0].tag_field:
                return tuple(sorted(str(t.tag) for t in members))
            else:
                tag = data.get(members[0].tag_field) if isinstance(data, dict) else None
                kind = next((t for t in members if t.tag == tag), None)
        if isinstance(step, int) and isinstance(kind, (schema_info.ListType, schema_info.TupleType,
                                                       schema_info.VarTupleType, schema_info.SetType)):
            item = kind.item_types[step] if isinstance(kind, schema_info.TupleType) and step < len(kind.item_types) \
                else getattr(kind, "item_type", None)
            kind, data = item, data[step] if isinstance(data, list) and step < len(data) else None
        elif isinstance(step, str) and isinstance(kind, schema_info.StructType):
            kind = next((field.type for field in kind.fields if field.name == step), None)
            data = data.get(step) if isinstance(data, dict) else None
        else:
            return ()
    if isinstance(kind, schema_info.UnionType):  # an optional value: what it is when given
        kind = next((t for t in kind.types if not isinstance(t, schema_info.NoneType)), None)
    if isinstance(kind, schema_info.LiteralType):
        return tuple(str(value) for value in kind.values)
    if isinstance(kind, schema_info.EnumType):
        return tuple(str(member.value) for member in kind.cls)
    return ()


def value_at(raw: Any, key: list[str]) -> Any:
    """The value at a dotted key's steps in decoded TOML (``broker.urls.0``: an item of a list);
    None where there is none."""
    for name in key:
        if isinstance(raw, list) and name.isdigit():
            raw = raw[int(name)] if int(name) < len(raw) else None
        else:
            raw = raw.get(name) if isinstance(raw, dict) else None
    return raw


def toml_shown(value: Any) -> str:
    """A value as TOML would write it, on one line (strings escaped), for a configuration error."""
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, dict):
        return "a table"
    if isinstance(value, list):
        return "an array"
    if isinstance(value, str):
        return msgspec.json.encode(value).decode()
    return "(the default)" if value is None else str(value)
