"""Text counts a box's hands from 1, the JSON from 0 (docs/deal-tracking.md, "Box and hand
numbers"): every event of a split round whose data names a box's hand says it in its message as
``box B hand N`` with N the data's ``hand`` + 1, never the position itself."""
from __future__ import annotations

import re

from tests.game.game_helpers import Recorder, new_round, rules_for, run


def test_every_event_naming_a_hand_counts_it_from_1_where_its_data_counts_from_0() -> None:
    rules = rules_for("casino-000")
    rec = Recorder()
    r = new_round(rules, [(1, "p1", rules.table.min_per_player)], rec)
    run(r, [("no_more_bets",), ("deal", "8S 9H 8C"), ("act", 1, "split"), ("deal", "TD"), ("act", 1, "stand"),
            ("deal", "9C"), ("act", 1, "stand"), ("deal", "8D")])
    assert r.state == "complete", r.state
    named = [e for e in rec.events if isinstance(e.data.get("hand"), int) and isinstance(e.data.get("box"), int)]
    assert {e.data["hand"] for e in named} == {0, 1}, [e.message for e in named]
    for event in named:
        assert f"box {event.data['box']} hand {event.data['hand'] + 1}" in event.message, (event.message, event.data)
        assert not re.search(r"hand 0\b", event.message), event.message
