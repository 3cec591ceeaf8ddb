"""The pit page's files (cardd/floor/web/): no inline script or style (the Content-Security-Policy
allows none), no markup built from data, and the reason codes' texts current with the docs."""
from __future__ import annotations

import json
import re
from pathlib import Path

from cardd.floor import reason_texts
from devices.events import Reason

WEB = Path(reason_texts.__file__).with_name("web")


def test_the_reason_texts_are_current_with_docs_deal_tracking():
    assert reason_texts.TARGET.read_text(encoding="utf-8") == reason_texts.rendered(), \
        "cardd/floor/web/reasons.json is stale: make floor-reasons"


def test_the_tracker_s_reason_codes_are_explained():
    texts = json.loads(reason_texts.TARGET.read_text(encoding="utf-8"))
    explained = {r.value for r in Reason if r.value in texts}
    assert {"FACE_UP_CARD", "ROUND_HELD", "DEVICE_FAULT", "SHOE_REFUSED", "EXPORT_BACKLOG"} <= explained
    assert len(explained) >= len(Reason) - 2, sorted(r.value for r in Reason if r.value not in texts)
    assert all(text and "`" not in text and "**" not in text for text in texts.values())


def test_the_pages_have_no_inline_script_style_or_handler():
    pages = sorted(WEB.glob("*.html"))
    assert {p.stem for p in pages} >= {"floor", "login", "table", "alarms", "reports"}
    for page in pages:
        text = page.read_text(encoding="utf-8")
        for script in re.findall(r"<script\b[^>]*>(.*?)</script>", text, flags=re.S):
            assert not script.strip(), f"{page.name}: an inline script"
        assert "<style" not in text and " style=" not in text, f"{page.name}: an inline style"
        assert not re.search(r"\son[a-z]+=", text), f"{page.name}: an inline event handler"


def test_the_scripts_never_build_markup_from_text():
    for script in sorted(WEB.glob("*.js")):
        text = script.read_text(encoding="utf-8")
        for forbidden in ("innerHTML", "outerHTML", "insertAdjacentHTML", "document.write", "eval(", "new Function"):
            assert forbidden not in text, f"{script.name} uses {forbidden}"
