"""Rules files a technician damaged: one RulesError naming the file and what is wrong.

Never a bare UnicodeDecodeError, never contradictory cut settings accepted.
"""
from __future__ import annotations

from pathlib import Path

import pytest

from devices.game.rules import RulesError, load_rules


def test_a_rules_file_that_is_not_utf8_is_one_rules_error_naming_the_file(tmp_path: Path) -> None:
    path = tmp_path / "latin1.toml"
    path.write_bytes('name = "Casino Zürich"\n'.encode("latin-1"))
    with pytest.raises(RulesError) as err:
        load_rules(path)
    assert str(path) in str(err.value) and "UTF-8" in str(err.value) and "0xfc" in str(err.value)


def test_penetration_and_min_cut_decks_that_leave_no_place_for_the_cut_card_are_refused(tmp_path: Path) -> None:
    path = tmp_path / "cut.toml"
    path.write_text("[shoe]\ndecks = 6\npenetration = 0.85\nmin_cut_decks = 2\n", encoding="utf-8")
    with pytest.raises(RulesError) as err:
        load_rules(path)
    text = str(err.value)
    assert str(path) in text and "shoe.penetration" in text and "0.85" in text and "min_cut_decks = 2" in text


def test_the_same_cut_settings_with_a_window_left_load(tmp_path: Path) -> None:
    path = tmp_path / "cut.toml"
    path.write_text("[shoe]\ndecks = 6\npenetration = 0.75\nmin_cut_decks = 1\n", encoding="utf-8")
    assert load_rules(path).shoe.penetration == 0.75
