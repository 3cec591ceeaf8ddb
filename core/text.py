"""Text a device sent or a view shows, made safe to show: one escaping, applied where device text
enters the host and where any other text reaches a view (cardd.cli.shown).

A device is not trusted: its Ident strings, Fault details and every other text field could
carry ESC sequences that repaint an operator's terminal, CR/LF that forge lines in a log or an
exported journal, or bidi overrides that make a line read backwards. :func:`printable` turns
every such character into a visible escape; the protocol's text codec applies it to every
text field it decodes, so no consumer ever sees the raw form.
"""
from __future__ import annotations

import unicodedata

#: Unicode categories escaped: controls (C0, DEL, C1: ESC, CR, LF, ...), format characters
#: (bidi overrides and isolates, zero-width joiners, BOM), the line/paragraph separators, and what
#: has no glyph a terminal agrees on: surrogates (no UTF-8 writes one: the output would fail),
#: private-use characters and code points Unicode has not assigned (noncharacters too)
UNSAFE_CATEGORIES = frozenset({"Cc", "Cf", "Zl", "Zp", "Cs", "Co", "Cn"})


def escape_char(char: str) -> str:
    code = ord(char)
    if code < 0x100:
        return f"\\x{code:02x}"
    if code < 0x10000:
        return f"\\u{code:04x}"
    return f"\\U{code:08x}"


def printable(text: str) -> str:
    """``text`` with every control, format and line-separator character, surrogate, private-use
    and unassigned code point shown as ``\\xNN``, ``\\uNNNN`` or ``\\UNNNNNNNN``; everything
    else (letters of any script, spaces, symbols) unchanged. A display escape: it is not
    reversible (a backslash is left as it is)."""
    if text.isprintable():  # the common case: nothing to do (isprintable is stricter than us)
        return text
    return "".join(escape_char(c) if unicodedata.category(c) in UNSAFE_CATEGORIES else c for c in text)
