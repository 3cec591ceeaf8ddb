"""Text a view did not write itself (a player's name, a device's Ident or fault detail, a
journaled message, a path) as every view shows it: as text, the one way such text reaches rich.

rich reads a ``str`` as markup (``[red]`` styles what follows; ``[/]`` with nothing to close is
a MarkupError that ends the view) and replaces emoji codes (``:joy:``); a console's highlighter
colours what looks like a number, a path or a URL. A player named ``[red]MALLORY[/red]`` would
show red, the supervisor seeing other than what is journaled, and a bet by ``[/]`` would end
every ``cardctl watch``. So each such text becomes a rich ``Text`` here (never parsed, never
highlighted), its control, format and line-separator characters written as ``\\xNN``,
``\\uNNNN`` (core.text.printable, the one escape: docs/cardctl.md, "Text in the views"): no text
styles a view, ends it, or breaks its line or its column.
"""
from __future__ import annotations

from rich.style import StyleType
from rich.text import Text

from core.text import printable


def visible(value: object) -> str:
    """``value``'s text with what could act on a terminal or break a line made visible: for
    output that is not rich's (a line of plain text, tab-separated fields)."""
    return printable(str(value))


def shown(value: object, style: StyleType = "") -> Text:
    """``value`` as a view's text, in ``style`` (the view's, never the text's own)."""
    return Text(visible(value), style=style)


def cells(*values: object) -> list[Text]:
    """A table row's cells: each value :func:`shown`, a ``Text`` the view styled kept as it is."""
    return [value if isinstance(value, Text) else shown(value) for value in values]
