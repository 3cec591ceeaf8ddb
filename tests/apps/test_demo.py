"""`make demo` end to end: real ptys, serial driver, link, session, simulators and the deal tracker."""
from __future__ import annotations

import asyncio
import io
import re

import pytest

from cardd import demo
from devices.rules import load_rules


@pytest.mark.timeout(60)
def test_demo_shuffles_verifies_deals_and_reconciles_a_six_deck_shoe():
    out_file = io.StringIO()
    rules = load_rules(demo.ROOT / "rules" / "casino-003.toml")
    # run() rather than main(): main() configures structlog for the console, a process-wide setting
    assert asyncio.run(demo.run(rules, shuffle_seconds=0, pace=0, out=out_file)) == 0
    out = out_file.getvalue()
    assert "shuffle complete: 312 cards; count per card: 52 kinds x6" in out
    assert "deck check: ok for 6 decks (missing 0, extra 0, unrecognised 0)" in out
    indexes = [int(m) for m in re.findall(r"^  #\s*(\d+) [2-9TJQKA][CDHS]  ", out, re.M)]
    assert indexes == list(range(1, 313)), "every card of the shoe printed once, in order"
    assert "cut card after card #208" in out
    assert re.search(r"shoe: reconciled; \d+ cards read in play \(3 burnt\), \d+ returned: 312 of 312", out)


def test_demo_strategy_never_asks_for_nothing():
    rules = load_rules(demo.ROOT / "rules" / "casino-003.toml")
    d = demo.Demo(rules, pace=0, out=io.StringIO())
    assert d.table.shoe.state == "idle"
    for total in range(4, 22):
        for soft in (False, True):
            actions = demo._strategy([], total, soft, up=10)
            assert demo.Action.STAND in actions and demo.Action.HIT in actions
