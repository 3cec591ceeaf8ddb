"""Many shoes on one table (soak): every shoe reconciles, nothing is lost, no alarm is raised.

20 shoes per casino by default; CARDD_FULL=1 plays 200:
    CARDD_FULL=1 .venv/bin/python -m pytest tests/table -m soak
"""
from __future__ import annotations

import os
import random
from pathlib import Path

import pytest

from devices.events import Reason
from devices.tracker.recording import record_random_shoes
from devices.game.rules import load_rules

from tests.table.table_rig import RULE_FILES

SHOES = 200 if os.environ.get("CARDD_FULL") == "1" else 20
ROOT = Path(__file__).resolve().parents[2]


@pytest.mark.soak
@pytest.mark.timeout(600)
@pytest.mark.parametrize("path", RULE_FILES, ids=lambda p: p.stem)
def test_many_shoes_on_one_table_all_reconcile(path: Path) -> None:
    events: list = []
    rules = load_rules(path)
    steps, table = record_random_shoes(rules, random.Random(path.stem), shoes=SHOES, sink=events.append, max_boxes=7)
    reasons = [e.reason for e in events]
    assert reasons.count(Reason.RECONCILED) == SHOES
    assert Reason.RECONCILIATION_FAILED not in reasons and not table.alarms.open
    assert reasons.count(Reason.BURN) == SHOES * rules.shoe.burn_after_shuffle


def test_every_reason_code_is_documented() -> None:
    doc = (ROOT / "docs" / "deal-tracking.md").read_text(encoding="utf-8")
    missing = [r.value for r in Reason if f"`{r.value}`" not in doc]
    assert not missing, f"docs/deal-tracking.md does not explain: {missing}"
