"""The reason codes in words for the pit page: ``cardd/floor/web/reasons.json``, made from the
table of docs/deal-tracking.md ("Reason codes, procedures and overrides"), the one place the
codes are explained, by ``make floor-reasons`` (``python -m cardd.floor.reason_texts``);
tests/floor/test_web_files.py checks the file is current.

Each code gets its row's "raised when", without Markdown, cut to :data:`LIMIT` characters at a
word: a line for a page, the full text staying in the docs."""
from __future__ import annotations

import json
import re
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
SOURCE = ROOT / "docs" / "deal-tracking.md"
TARGET = Path(__file__).resolve().parent / "web" / "reasons.json"
HEADING = "## Reason codes, procedures and overrides"
LIMIT = 220
_CODE = re.compile(r"`([A-Z][A-Z0-9_]+)`")


def _plain(text: str) -> str:
    text = re.sub(r"\*\*(.+?)\*\*", r"\1", text).replace("`", "").strip()
    if len(text) <= LIMIT:
        return text
    cut = text[:LIMIT].rsplit(" ", 1)[0].rstrip(",;:(")
    return cut + " …"


def reason_texts(markdown: str) -> dict[str, str]:
    """Each reason code of the section's table and its "raised when", in the table's order."""
    section = markdown.split(HEADING, 1)[1].split("\n## ", 1)[0]
    texts: dict[str, str] = {}
    for line in section.splitlines():
        cells = [c.strip() for c in line.strip().strip("|").split("|")]
        if not line.startswith("| `") or len(cells) < 3:
            continue
        for code in _CODE.findall(cells[0]):
            texts.setdefault(code, _plain(cells[2]))
    return texts


def rendered() -> str:
    return json.dumps(reason_texts(SOURCE.read_text(encoding="utf-8")), indent=1, ensure_ascii=False) + "\n"


def main() -> int:
    TARGET.write_text(rendered(), encoding="utf-8")
    print(f"wrote {TARGET.relative_to(ROOT)}", file=sys.stderr)
    return 0


if __name__ == "__main__":
    sys.exit(main())
