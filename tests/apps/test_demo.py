"""`make demo` end to end: real ptys, serial driver, link, session, simulators and the deal tracker."""
from __future__ import annotations

import asyncio
import io
import re

import pytest

from cardd import demo
from cardd.config import RULES_DIR
from devices.game.rules import load_rules

RULES = RULES_DIR / "casino-000.toml"


def run_demo(**kwargs) -> tuple[int, str]:
    out = io.StringIO()
    # run() rather than main(): main() configures structlog for the console, a process-wide setting
    code = asyncio.run(demo.run(load_rules(RULES), shuffle_seconds=0, pace=0, out=out, **kwargs))
    return code, out.getvalue()


@pytest.mark.timeout(90)
def test_demo_shuffles_verifies_deals_and_reconciles_then_catches_the_faults():
    code, out = run_demo()
    assert code == 0
    life, faults = out.split("== 2.")
    assert "shuffle complete: 312 cards; count per card: 52 kinds x6" in life
    assert "deck check: ok for 6 decks (missing 0, extra 0, unrecognised 0)" in life
    indexes = [int(m) for m in re.findall(r"^  #\s*(\d+) [2-9TJQKA][CDHS]  ", life, re.M)]
    assert indexes == list(range(1, 313)), "every card of the shoe printed once, in order"
    assert len(re.findall(r"^  #\s*\d+ \w\w  burn$", life, re.M)) == 1  # casino 000 burns one
    assert "cut card after card #208" in life
    assert re.search(r"shoe: reconciled; \d+ cards read in play \(1 burnt\), \d+ returned: 312 of 312", life)
    assert "[SHOE_REFUSED] shoe: verifying -> refused: missing: AS x1; extra: 7H x1; dealing blocked" in faults
    assert re.search(r"#  6 \w\w  to no hand \(FACE_UP_CARD, REDEAL, ROUND_VOID\)", faults)
    assert "the face-up card voided 1 round" in faults


@pytest.mark.timeout(60)
def test_demo_without_faults_plays_only_the_shoe():
    code, out = run_demo(faults=False)
    assert code == 0 and "== 2." not in out and "shoe: reconciled" in out


def test_demo_strategy_always_offers_stand_and_hit():
    for total in range(4, 22):
        for soft in (False, True):
            actions = demo._strategy([], total, soft, up=10)
            assert demo.Action.STAND in actions and demo.Action.HIT in actions


def test_demo_refuses_a_bad_rules_file_in_one_line(tmp_path, capsys):
    bad = tmp_path / "bad.toml"
    bad.write_text("[shoe]\ndecks = 6.0\n")
    assert demo.main(["--rules", str(bad)]) == 2
    err = capsys.readouterr().err.strip()
    assert err.count("\n") == 0 and "bad.toml" in err and "shoe.decks" in err


def test_demo_refuses_a_hand_shuffled_table(capsys):
    assert demo.main(["--rules", str(RULES_DIR / "casino-003.toml")]) == 2
    assert "automatic shuffler" in capsys.readouterr().err
