"""Text a view did not write itself (a player's name, a device's Ident or fault detail, a
journaled message, a path) as every view shows it: a rich ``Text`` never read as markup nor
highlighted, escaped by core.text.printable. Why: docs/cardctl.md, "Text in the views"."""
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
