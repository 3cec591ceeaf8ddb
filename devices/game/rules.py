"""House rules: one TOML file per table, loaded into frozen dataclasses.

Every key has one spec: how to read it and what is allowed. A wrong key, value or type is
refused with ONE :class:`RulesError` naming the file, the dotted key and the allowed values;
unknown keys and sections are errors too, so a typo never passes silently. Money is in
integer cents; pay tables are ratios written "3:2". See docs/rules.md for every key.
"""
from __future__ import annotations

import tomllib
from dataclasses import dataclass, field, fields, is_dataclass
from fractions import Fraction
from pathlib import Path
from typing import Any, Callable, get_type_hints

from core.errors import CarddError
from core.parse_errors import toml_problem


class RulesError(CarddError, ValueError):
    """A rules file that cannot be used: says the file, the key and what is allowed."""

    def __init__(self, file: str, key: str, problem: str, allowed: str) -> None:
        self.file, self.key, self.allowed = file, key, allowed
        super().__init__(f"{file}: {key}: {problem}; allowed: {allowed}")


@dataclass(frozen=True)
class _Spec:
    parse: Callable[[Any], Any]  # returns the value or raises ValueError
    allowed: str


def _spec(default: Any, spec: _Spec) -> Any:
    return field(default=default, metadata={"spec": spec})


def _bool() -> _Spec:
    def parse(v: Any) -> bool:
        if not isinstance(v, bool):
            raise ValueError
        return v
    return _Spec(parse, "true or false")


def _int_range(lo: int, hi: int | None = None) -> _Spec:
    def parse(v: Any) -> int:
        if isinstance(v, bool) or not isinstance(v, int) or v < lo or (hi is not None and v > hi):
            raise ValueError
        return v
    return _Spec(parse, f"an integer {lo}..{hi}" if hi is not None else f"an integer >= {lo}")


def _choice(*values: Any) -> _Spec:
    def parse(v: Any) -> Any:
        # type as well as value: 6.0 == 6 and True == 1, but neither is a deck count
        if not any(type(v) is type(allowed) and v == allowed for allowed in values):
            raise ValueError
        return v
    return _Spec(parse, " or ".join(repr(v) for v in values))


def _insurance_min(v: Any) -> int | str:
    if isinstance(v, str) and v in ("table_minimum", "half_table_minimum"):
        return v
    return int(_MONEY.parse(v))


def _name() -> _Spec:
    def parse(v: Any) -> str:
        if not isinstance(v, str) or not v:
            raise ValueError
        return v
    return _Spec(parse, "a non-empty string")


def _number(lo: float, hi: float) -> _Spec:
    def parse(v: Any) -> float:
        if isinstance(v, bool) or not isinstance(v, (int, float)) or not lo <= v <= hi:
            raise ValueError
        return float(v)
    return _Spec(parse, f"a number {lo}..{hi}")


def _ratio() -> _Spec:
    """A pay ratio 'win:stake', e.g. '3:2' or '1:2'; kept exact as a Fraction."""
    def parse(v: Any) -> Fraction:
        if not isinstance(v, str) or v.count(":") != 1:
            raise ValueError
        win, stake = (int(p) for p in v.split(":"))  # int() raises ValueError on junk
        if win <= 0 or stake <= 0:
            raise ValueError
        return Fraction(win, stake)
    return _Spec(parse, "a pay ratio string 'win:stake' with positive integers, e.g. '3:2'")


_MONEY = _int_range(0)
UNLIMITED = "unlimited"  # a limit a sheet lifts ("unlimited spleens"): bounded in practice by the shoe's cards


def _int_or(lo: int, hi: int, *words: str) -> _Spec:
    """An integer lo..hi, or one of ``words`` (e.g. "unlimited")."""
    def parse(v: Any) -> int | str:
        if isinstance(v, str) and v in words:
            return v
        if isinstance(v, bool) or not isinstance(v, int) or not lo <= v <= hi:
            raise ValueError
        return v
    return _Spec(parse, f"an integer {lo}..{hi} or " + " or ".join(repr(w) for w in words))


@dataclass(frozen=True)
class ShoeRules:
    shuffle: str = _spec("automatic", _choice("automatic", "hand"))
    decks: int = _spec(0, _choice(6, 8))  # 0 = by shuffle: 6 automatic, 8 by hand
    burn_after_shuffle: int = _spec(1, _choice(0, 1, 3))
    # only seed 003 prescribes a burn on a dealer change: no card burns where a sheet is silent
    burn_on_dealer_change: int = _spec(0, _choice(0, 1))
    penetration: float = _spec(0.67, _number(0.5, 0.9))  # share dealt before the cut card
    min_cut_decks: int = _spec(1, _int_range(1, 2))


@dataclass(frozen=True)
class DealerRules:
    hits_soft_17: bool = _spec(False, _bool())


@dataclass(frozen=True)
class PlayRules:
    surrender: bool = _spec(True, _bool())
    surrender_window: str = _spec("before_first_draw", _choice("before_first_draw", "before_own_third_card"))
    surrender_against_ace: bool = _spec(False, _bool())  # seed 004 names no exception for the dealer's ace
    # hands made by splitting pairs other than aces; ace splits have their own limit
    hands_per_box: int | str = _spec(4, _int_or(1, 4, UNLIMITED))
    ace_splits: int | str = _spec(1, _int_or(0, 3, UNLIMITED))
    split_pairs: str = _spec("value", _choice("value", "rank"))
    double_after_split: bool = _spec(True, _bool())
    double_for_less: bool = _spec(False, _bool())
    # seed 004: a split hand's two-card 21 is no blackjack, so it may be doubled (elsewhere any 21 closes)
    double_on_split_21: bool = _spec(False, _bool())
    # seed 000 10.1: a co-player who declines a split chooses the card his bet stays on
    declined_split_stays_on: str = _spec("first_hand", _choice("first_hand", "player_chooses"))

    @property
    def hand_limit(self) -> int | None:
        """The most hands a box may hold from splitting a pair other than aces; None: unlimited."""
        return None if self.hands_per_box == UNLIMITED else int(self.hands_per_box)

    @property
    def ace_split_limit(self) -> int | None:
        """How many times aces may be split at one box; None: unlimited (the shoe's aces are the bound)."""
        return None if self.ace_splits == UNLIMITED else int(self.ace_splits)


@dataclass(frozen=True)
class InsuranceRules:
    offered: bool = _spec(True, _bool())
    # cents, or tied to the table minimum (seed 000 "no smaller than the table's minimum bet",
    # seed 004 "from the half of the minimum of the table"): see HouseRules.insurance_min
    min: int | str = _spec(100, _Spec(_insurance_min, "an integer >= 0 or 'table_minimum' or 'half_table_minimum'"))
    # the most a player may insure: half his stake on the box, or half of all his bets (seed 001)
    max: str = _spec("half_box_stake", _choice("half_box_stake", "half_all_bets"))
    # seed 003: "Any player(s) wishing to insure a Blackjack against a dealers Ace, will be paid even money."
    blackjack_insured_as: str = _spec("insurance", _choice("insurance", "even_money"))


@dataclass(frozen=True)
class TableRules:
    boxes: int = _spec(7, _int_range(1, 7))
    players_per_box: int = _spec(3, _int_range(1, 3))
    min_per_player: int = _spec(1000, _int_range(1))
    max_per_box: int = _spec(100000, _int_range(1))
    # seed 003: over the box maximum "the box owner has priority and the other players must reduce"
    owner_priority_at_maximum: bool = _spec(False, _bool())
    # seed 001: a lone player "has to play at least on two boxes"
    lone_player_min_boxes: int = _spec(1, _int_range(1, 7))
    # seeds 000, 002, 003: a player on several boxes may be asked to give all but one up to a seated player
    give_up_boxes: bool = _spec(False, _bool())


@dataclass(frozen=True)
class SevenSevenSeven:
    """Seed 001's '777 prize game': a bonus on the hand's own stake, no separate wager."""
    enabled: bool = _spec(False, _bool())
    suited_77: Fraction = _spec(Fraction(1, 2), _ratio())  # first two cards 7s of one suit, paid at once
    mixed_777: Fraction = _spec(Fraction(1), _ratio())
    suited_777: Fraction = _spec(Fraction(5), _ratio())


@dataclass(frozen=True)
class CardCountBonus:
    """Seed 001's five-card 21 / seven-card hand: paid at once on the stake, which stays in play."""
    enabled: bool = _spec(False, _bool())
    pays: Fraction = _spec(Fraction(1), _ratio())


@dataclass(frozen=True)
class BlackjackPairs:
    """Seed 002's optional side wager on the first two cards being a pair (table-posted pays)."""
    enabled: bool = _spec(False, _bool())
    mixed_pair: Fraction = _spec(Fraction(6), _ratio())
    colored_pair: Fraction = _spec(Fraction(12), _ratio())
    perfect_pair: Fraction = _spec(Fraction(25), _ratio())
    min: int = _spec(500, _int_range(1))
    max: int = _spec(10000, _int_range(1))


@dataclass(frozen=True)
class SideBets:
    seven_seven_seven: SevenSevenSeven = field(default_factory=SevenSevenSeven)
    five_card_21: CardCountBonus = field(default_factory=CardCountBonus)
    seven_card_hand: CardCountBonus = field(default_factory=CardCountBonus)
    blackjack_pairs: BlackjackPairs = field(default_factory=BlackjackPairs)


@dataclass(frozen=True)
class HouseRules:
    name: str = _spec("default", _name())
    shoe: ShoeRules = field(default_factory=ShoeRules)
    dealer: DealerRules = field(default_factory=DealerRules)
    play: PlayRules = field(default_factory=PlayRules)
    insurance: InsuranceRules = field(default_factory=InsuranceRules)
    table: TableRules = field(default_factory=TableRules)
    side_bets: SideBets = field(default_factory=SideBets)

    @property
    def decks(self) -> int:
        return self.shoe.decks or (6 if self.shoe.shuffle == "automatic" else 8)

    @property
    def insurance_min(self) -> int:
        """The insurance minimum in cents (a key tied to the table minimum follows it)."""
        m = self.insurance.min
        if m == "table_minimum":
            return self.table.min_per_player
        if m == "half_table_minimum":
            return (self.table.min_per_player + 1) // 2  # at least half: rounds an odd cent up
        return int(m)

    @classmethod
    def default(cls) -> "HouseRules":
        return cls()


def _section_types(cls: type) -> dict[str, type]:
    """The fields of ``cls`` that are themselves sections (nested dataclasses)."""
    hints = get_type_hints(cls)
    return {f.name: hints[f.name] for f in fields(cls) if is_dataclass(hints[f.name])}


def _build(cls: type, table: Any, file: str, prefix: str) -> Any:
    if not isinstance(table, dict):
        raise RulesError(file, prefix, f"expected a table, got {table!r}", f"a [{prefix}] section")
    nested = _section_types(cls)
    specs = {f.name: f.metadata["spec"] for f in fields(cls) if "spec" in f.metadata}
    known = sorted(set(nested) | set(specs))
    values: dict[str, Any] = {}
    for key, raw in table.items():
        dotted = f"{prefix}.{key}" if prefix else key
        if key in nested:
            values[key] = _build(nested[key], raw, file, dotted)
        elif key in specs:
            try:
                values[key] = specs[key].parse(raw)
            except (ValueError, TypeError):
                raise RulesError(file, dotted, f"{raw!r} is not allowed", specs[key].allowed) from None
        else:
            where = f"[{prefix}]" if prefix else "the top level"
            raise RulesError(file, dotted, f"unknown key in {where}", ", ".join(known))
    return cls(**values)


def cut_window(rules: HouseRules, total: int) -> tuple[int, int]:
    """How many of ``total`` cards may leave before the cut card: within one deck of
    ``shoe.penetration`` and at least ``shoe.min_cut_decks`` decks from either end."""
    edge = 52 * rules.shoe.min_cut_decks
    aim = round(total * rules.shoe.penetration)
    return max(edge, aim - 52), min(total - edge, aim + 52)


def _check_consistency(rules: HouseRules, file: str) -> None:
    lo, hi = cut_window(rules, 52 * rules.decks)
    if lo > hi:  # every cut card would be misplaced
        raise RulesError(file, "shoe.penetration", f"{rules.shoe.penetration} with shoe.min_cut_decks = "
                         f"{rules.shoe.min_cut_decks} leaves no place for the cut card in {rules.decks} decks "
                         f"(after {lo} cards but before {hi})", "a penetration whose cut window, one deck either "
                         "way, stays min_cut_decks decks from both ends")
    t, p = rules.table, rules.play
    if t.min_per_player > t.max_per_box:
        raise RulesError(file, "table.min_per_player", f"{t.min_per_player} exceeds table.max_per_box "
                         f"{t.max_per_box}", f"at most {t.max_per_box}")
    if p.ace_split_limit is not None and p.hand_limit is not None and p.ace_split_limit > p.hand_limit - 1:
        raise RulesError(file, "play.ace_splits", f"{p.ace_splits} splits need more than "
                         f"play.hands_per_box = {p.hands_per_box} hands",
                         f"0..{p.hand_limit - 1} or 'unlimited'")
    if t.lone_player_min_boxes > t.boxes:
        raise RulesError(file, "table.lone_player_min_boxes", f"{t.lone_player_min_boxes} exceeds table.boxes "
                         f"{t.boxes}", f"at most {t.boxes}")
    bp = rules.side_bets.blackjack_pairs
    if bp.min > bp.max:
        raise RulesError(file, "side_bets.blackjack_pairs.min", f"{bp.min} exceeds max {bp.max}",
                         f"at most {bp.max}")


def parse_rules(text: str, file: str = "<string>") -> HouseRules:
    """Parse rules from TOML text; ``file`` is only used in error messages."""
    try:
        data = tomllib.loads(text)
    except tomllib.TOMLDecodeError as e:
        raise RulesError(file, "(syntax)", toml_problem(e, text).sentence("TOML"), "TOML 1.0 syntax") from None
    rules = _build(HouseRules, data, file, "")
    _check_consistency(rules, file)
    return rules


def load_rules(path: str | Path) -> HouseRules:
    """Load a rules TOML file; raises :class:`RulesError` naming file, key and allowed values."""
    p = Path(path)
    try:
        text = p.read_text(encoding="utf-8")
    except OSError as e:
        raise RulesError(str(p), "(file)", f"cannot be read ({e.strerror})", "a readable TOML file") from None
    except UnicodeDecodeError as e:
        raise RulesError(str(p), "(file)", f"not UTF-8 text (byte {e.object[e.start]:#04x} at offset {e.start})",
                         "a UTF-8 TOML file") from None
    return parse_rules(text, str(p))
