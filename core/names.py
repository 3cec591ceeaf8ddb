"""What a person's name may be, and its one spelling: the policy every name a client gives passes
(NFKC, spaces as one, at most :data:`MAX_NAME` characters, every character a view could not show
as itself refused). docs/api.md, "Names", says every rule."""
from __future__ import annotations

import unicodedata

from core.errors import CarddError
from core.text import UNSAFE_CATEGORIES

#: the longest name, in characters after normalisation: a name fits a view's column and a line
MAX_NAME = 64

#: what each category a view escapes (core.text.UNSAFE_CATEGORIES, refused in a name) is, in the
#: refusal's words
_CATEGORY_WORDS = {
    "Cc": "a control character",
    "Cf": "a format character (a bidi control, a zero-width character, a soft hyphen)",
    "Zl": "a line separator",
    "Zp": "a paragraph separator",
    "Cs": "a surrogate, not a character",
    "Co": "a private-use character",
    "Cn": "not a character Unicode assigns",
}

#: the default-ignorable characters (Unicode's Default_Ignorable_Code_Point) that are not format
#: characters: drawn as nothing, so two names that look alike would differ by one
_INVISIBLE = frozenset(
    [0x034F, 0x115F, 0x1160, 0x17B4, 0x17B5, 0x180B, 0x180C, 0x180D, 0x180F, 0x3164, 0xFFA0,
     *range(0xFE00, 0xFE10), *range(0xE0100, 0xE01F0)])


class NameRefused(CarddError):
    """A text that is not a name; the message says why, naming the character by its code point."""


def normal_name(text: str) -> str:
    """``text`` as the one spelling of the name it is (NFKC, runs of spaces one space, none at
    either end); :class:`NameRefused` saying why it is no name."""
    _check_characters(text)  # as typed: the refusal names the character the client sent
    name = " ".join(part for part in _spaces_as_one(unicodedata.normalize("NFKC", text)).split(" ") if part)
    if not name:
        raise NameRefused("it is empty")
    if len(name) > MAX_NAME:
        raise NameRefused(f"it is {len(name)} characters long, at most {MAX_NAME}")
    _check_characters(name)  # a compatibility form may stand for one refused (U+3164 is U+1160)
    for before, char in zip(" " + name, name):
        if before == " " and unicodedata.category(char).startswith("M"):
            raise NameRefused(f"{code_point(char)} is a combining mark with no letter before it (it would join what "
                              "is shown before it)")
    return name


def _check_characters(text: str) -> None:
    for char in text:
        why = _refused(char)
        if why is not None:
            raise NameRefused(f"{code_point(char)} is {why}")


def _spaces_as_one(text: str) -> str:
    """Every space separator (Zs: no-break, ideographic, thin, ...) as an ASCII space."""
    if text.isascii():
        return text
    return "".join(" " if unicodedata.category(c) == "Zs" else c for c in text)


def _refused(char: str) -> str | None:
    if char.isprintable() and ord(char) not in _INVISIBLE:  # the common case, letters of any script
        return None
    category = unicodedata.category(char)
    if category in UNSAFE_CATEGORIES:
        return _CATEGORY_WORDS[category]
    if ord(char) in _INVISIBLE:
        return "an invisible character (a variation selector, a filler, a grapheme joiner)"
    return None  # a space separator: made a space already


def code_point(char: str) -> str:
    """``U+202E``: how a refusal names a character it cannot show."""
    return f"U+{ord(char):04X}"
