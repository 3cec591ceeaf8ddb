"""House rules files: each seed casino's file says what its sheet says; bad files get one clear error."""
from __future__ import annotations

from fractions import Fraction
from pathlib import Path

import pytest

from devices.game.rules import HouseRules, RulesError, load_rules, parse_rules

from tests.game.game_helpers import CASINOS, RULES_FILES, SHEET, rules_for


def test_there_is_one_rules_file_per_seed_casino() -> None:
    shared = Path(__file__).resolve().parents[3] / "shared" / "seeds"  # beside the checkout, as in CI
    seeds = sorted(p.name[:3] for p in shared.glob("*.txt")) or ["000", "001", "002", "003", "004"]
    assert [p.stem for p in RULES_FILES] == [f"casino-{s}" for s in seeds]


@pytest.mark.parametrize("casino", CASINOS)
def test_rules_file_matches_its_sheet(casino: str) -> None:
    r, s = rules_for(casino), SHEET[casino]
    assert r.name == casino
    assert r.decks == 6 and not r.dealer.hits_soft_17
    assert r.table.players_per_box == 3  # stated by 000-003; 004 is silent and its file applies the default
    assert r.play.surrender is s["surrender"]
    assert (r.play.surrender_window == "before_own_third_card") is s["own_card_window"]
    assert r.play.hands_per_box == s["hands"]
    assert r.play.ace_splits == s["ace_splits"]
    assert r.play.ace_split_limit == (None if s["ace_splits"] == "unlimited" else s["ace_splits"])
    assert r.play.double_after_split is s["das"]
    assert r.play.double_for_less is s["double_for_less"]
    # a burn on a dealer change only where the sheet prescribes it (003), not at every table
    assert r.shoe.burn_after_shuffle == s["burn"] and r.shoe.burn_on_dealer_change == s["burn_on_change"]
    assert r.shoe.min_cut_decks == 1
    assert r.side_bets.seven_seven_seven.enabled is s["side_777"]
    assert r.side_bets.five_card_21.enabled is s["side_777"] and r.side_bets.seven_card_hand.enabled is s["side_777"]
    assert r.side_bets.blackjack_pairs.enabled is s["pairs"]
    assert (r.play.split_pairs == "rank") is s["split_rank_only"]
    assert (r.insurance.max == "half_all_bets") is s["insurance_all_bets"]
    assert r.play.surrender_against_ace is s["surrender_against_ace"]
    assert r.play.double_on_split_21 is s["double_on_split_21"]
    assert (r.play.declined_split_stays_on == "player_chooses") is s["declined_split_chooses"]
    assert r.insurance.min == s["insurance_min"]
    assert (r.insurance.blackjack_insured_as == "even_money") is s["insured_blackjack_even_money"]
    assert r.table.owner_priority_at_maximum is s["owner_priority"]
    assert r.table.lone_player_min_boxes == s["lone_min_boxes"]
    assert r.table.give_up_boxes is s["give_up"]


@pytest.mark.parametrize("casino", CASINOS)
def test_every_rule_the_sheets_differ_on_is_set_in_each_file_with_its_source(casino: str) -> None:
    """No key that differs between sheets is left to a silent default: each file sets it, and the
    comment above it quotes the sheet or says "silent" and which default applies."""
    text = (RULES_FILES[CASINOS.index(casino)]).read_text(encoding="utf-8")
    differing = ["burn_after_shuffle", "burn_on_dealer_change", "surrender", "hands_per_box", "ace_splits",
                 "split_pairs", "double_for_less", "double_on_split_21", "declined_split_stays_on", "min", "max",
                 "blackjack_insured_as", "players_per_box", "owner_priority_at_maximum", "lone_player_min_boxes",
                 "give_up_boxes"]
    lines = text.splitlines()
    for key in differing:
        at = [i for i, line in enumerate(lines) if line.startswith(f"{key} =")]
        assert at, f"{casino}: {key} is not set"
        above = lines[at[0] - 1]
        assert above.startswith("#") or lines[at[0] - 1].split(" =")[0] in differing, f"{casino}: {key} has no source"

def test_insurance_minimums_follow_the_sheets() -> None:
    assert rules_for("casino-000").insurance_min == rules_for("casino-000").table.min_per_player  # "table's minimum"
    r4 = rules_for("casino-004")
    assert 2 * r4.insurance_min == r4.table.min_per_player  # "half of the minimum of the table"
    # tied to the table minimum, not a copy of it: a file that changes its minimum cannot drift
    assert parse_rules('[insurance]\nmin = "half_table_minimum"\n[table]\nmin_per_player = 3001').insurance_min == 1501


def test_unlimited_is_expressible_and_an_integer_limit_still_fits_the_hands() -> None:
    r = parse_rules('[play]\nace_splits = "unlimited"\nhands_per_box = "unlimited"')
    assert r.play.ace_split_limit is None and r.play.hand_limit is None
    assert parse_rules('[play]\nace_splits = "unlimited"\nhands_per_box = 2').play.ace_split_limit is None


def test_777_pay_table_of_seed_001() -> None:
    t = rules_for("casino-001").side_bets.seven_seven_seven
    assert (t.suited_77, t.mixed_777, t.suited_777) == (Fraction(1, 2), Fraction(1), Fraction(5))


def test_defaults() -> None:
    r = HouseRules.default()
    assert r.decks == 6 and r.shoe.burn_after_shuffle == 1 and r.shoe.burn_on_dealer_change == 0  # only 003 burns
    assert not r.play.surrender_against_ace and not r.play.double_on_split_21
    assert r.play.declined_split_stays_on == "first_hand" and r.insurance.blackjack_insured_as == "insurance"
    assert not r.table.owner_priority_at_maximum and r.table.lone_player_min_boxes == 1 and not r.table.give_up_boxes
    assert not r.dealer.hits_soft_17 and r.play.hands_per_box == 4 and r.table.players_per_box == 3
    assert parse_rules('[shoe]\nshuffle = "hand"').decks == 8  # 8 decks by hand


BAD = [
    ("[play]\nsurender = true\n", "play.surender", "surrender"),  # typo: the allowed keys are listed
    ("[play]\nsurrender = 1\n", "play.surrender", "true or false"),  # wrong type
    ("[shoe]\ndecks = 7\n", "shoe.decks", "6 or 8"),  # wrong value
    ("[shoe]\ndecks = 6.0\n", "shoe.decks", "6 or 8"),  # a float equals 6 but is not a deck count
    ("[shoe]\nburn_on_dealer_change = true\n", "shoe.burn_on_dealer_change", "0 or 1"),  # True == 1
    ("[play]\nace_splits = 1.0\n", "play.ace_splits", "'unlimited'"),
    ("[shoe]\nburn_after_shuffle = 2\n", "shoe.burn_after_shuffle", "0 or 1 or 3"),
    ("[shoe]\npenetration = 0.95\n", "shoe.penetration", "0.5..0.9"),
    ("[play]\nace_splits = \"twice\"\n", "play.ace_splits", "'unlimited'"),
    ("[play]\nhands_per_box = 5\n", "play.hands_per_box", "1..4 or 'unlimited'"),
    ("[play]\nace_splits = 4\n", "play.ace_splits", "0..3 or 'unlimited'"),
    ("[insurance]\nmin = \"table\"\n", "insurance.min", "'table_minimum' or 'half_table_minimum'"),
    ("[insurance]\nblackjack_insured_as = \"push\"\n", "insurance.blackjack_insured_as", "'even_money'"),
    ("[play]\ndeclined_split_stays_on = 2\n", "play.declined_split_stays_on", "'player_chooses'"),
    ("[table]\nlone_player_min_boxes = 0\n", "table.lone_player_min_boxes", "1..7"),
    ("[table]\nboxes = 3\nlone_player_min_boxes = 4\n", "table.lone_player_min_boxes", "at most 3"),
    ("[casino]\nname = 'x'\n", "casino", "dealer, insurance, name, play, shoe, side_bets, table"),  # unknown section
    ("play = 3\n", "play", "a [play] section"),
    ("[side_bets.seven_seven_seven]\nsuited_77 = \"half\"\n", "side_bets.seven_seven_seven.suited_77", "'3:2'"),
    ("[side_bets.roulette]\nenabled = true\n", "side_bets.roulette", "blackjack_pairs"),
    ("[table]\nmin_per_player = 5000\nmax_per_box = 1000\n", "table.min_per_player", "at most 1000"),
    ("[play]\nhands_per_box = 2\nace_splits = 2\n", "play.ace_splits", "0..1 or 'unlimited'"),
    ("[play\n", "(syntax)", "TOML"),
    ("[insurance]\nmin = -5\n", "insurance.min", ">= 0"),
    ("[insurance]\nmax = \"half\"\n", "insurance.max", "'half_box_stake' or 'half_all_bets'"),
]


@pytest.mark.parametrize("text,key,allowed", BAD, ids=[b[1] for b in BAD])
def test_bad_rules_get_one_clear_error(tmp_path: Path, text: str, key: str, allowed: str) -> None:
    f = tmp_path / "table-9.toml"
    f.write_text(text)
    with pytest.raises(RulesError) as e:
        load_rules(f)
    msg = str(e.value)
    assert str(f) in msg and f"{key}:" in msg and "allowed:" in msg and allowed in msg, msg
    assert e.value.key == key


def test_missing_file(tmp_path: Path) -> None:
    with pytest.raises(RulesError) as e:
        load_rules(tmp_path / "nope.toml")
    assert "nope.toml" in str(e.value) and "cannot be read" in str(e.value)
