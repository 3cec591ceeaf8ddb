"""Every input the deal tracker takes, as a typed record, and their one JSON form.

Each input is a frozen dataclass :meth:`devices.tracker.table.Table.apply` takes (the round's own
records, :mod:`devices.game.inputs`, re-exported here); :func:`to_json` / :func:`from_json` are
the one versioned JSON form (types from the fixed registry :data:`RECORDS`, one
:class:`InputDecodeError`). The form and its versions: docs/deal-tracking.md, "Inputs"."""
from __future__ import annotations

import enum
import types
import typing
from dataclasses import MISSING, dataclass, fields, is_dataclass
from typing import Any, Union

from core.cards import Card
from core.errors import CarddError
from devices.events import Role
from devices.game.inputs import (
    ROUND_INPUTS, Act, CardDealt, CloseInsurance, CoPlayerChoice, EvenMoney, Flag, Hold, Insure, NoMoreBets,
    PlaceBet, PlacePairsBet, ReconstructAndRedeal, ReconstructInitialDeal, ReduceBet, Resume, Void,
)
from devices.game.round_types import Target
from firmware_bridge.messages import Message, decode, encode

__all__ = [
    "COMMAND_NAMES", "Act", "AskForBox", "CardDealt", "CardsToBoxWithoutWager", "ClearAlarm", "CloseInsurance",
    "CoPlayerChoice", "DealerChange", "DeviceMessage", "LeaveSeat", "ReduceBet", "TakeSeat", "DrawnInErrorDecision",
    "EnterCard", "EvenMoney", "FORMAT_VERSION", "Flag", "HandShuffled", "Hold", "InputDecodeError", "Insure",
    "LinkDown", "LinkUp", "NoMoreBets", "OpenRound", "PlaceBet", "PlacePairsBet", "PlacementError",
    "READABLE_VERSIONS", "RECORDS", "ReconstructAndRedeal", "ReconstructInitialDeal", "Redeal", "Resume",
    "ShoeRemainder", "ShuffleStarted", "TABLE_INPUTS", "TableInput", "Tick", "Void", "VoidShoe", "command_name",
    "from_json", "hex_bytes", "to_json",
]

FORMAT_VERSION = 2
#: versions from_json reads: 1 is version 2 without DeviceMessage.unit
READABLE_VERSIONS = (1, 2)


class InputDecodeError(CarddError, ValueError):
    """A JSON record that is not a valid input: the text names the record type and the field."""


# ---- devices ----------------------------------------------------------------------------------

@dataclass(frozen=True, slots=True, init=False)
class DeviceMessage:
    """A message a device sent; ``device`` is the model's name: "shuffler" or "shoe-reader".
    ``event_index``: the number a protocol 1.1 device gave the event (docs/protocol.md §3.2),
    journaled with it so a restarted host knows what it has; None for the rest. ``unit``: (role,
    model, serial) of the unit that numbered it, as the connection knew it when the event came in."""

    device: str
    message: Message
    event_index: int | None = None
    unit: tuple[str, str, str] | None = None

    def __init__(self, device: str, message: Message, event_index: int | None = None,
                 unit: tuple[str, str, str] | None = None) -> None:
        # Written out, as devices.events.Event's: one is made for every card read, and a frozen
        # dataclass's own __init__ looks object.__setattr__ up for every field
        _SET_DEVICE(self, device)
        _SET_MESSAGE(self, message)
        _SET_EVENT_INDEX(self, event_index)
        _SET_UNIT(self, unit)


_SET_DEVICE, _SET_MESSAGE = vars(DeviceMessage)["device"].__set__, vars(DeviceMessage)["message"].__set__
_SET_EVENT_INDEX, _SET_UNIT = vars(DeviceMessage)["event_index"].__set__, vars(DeviceMessage)["unit"].__set__


@dataclass(frozen=True, slots=True)
class LinkUp:
    device: str


@dataclass(frozen=True, slots=True)
class LinkDown:
    device: str


@dataclass(frozen=True, slots=True)
class Tick:
    """About once a second: the device models check their heartbeats."""


# ---- the dealer -------------------------------------------------------------------------------

@dataclass(frozen=True, slots=True)
class OpenRound:
    """Start betting for the next round."""


@dataclass(frozen=True, slots=True)
class EnterCard:
    """The dealer names the card the shoe could not read."""

    card: Card
    who: str


@dataclass(frozen=True, slots=True)
class DrawnInErrorDecision:
    """A card drawn after the dealer's finished hand was ``exposed`` (discard) or not (burn)."""

    exposed: bool
    who: str


@dataclass(frozen=True, slots=True)
class DealerChange:
    """A new dealer takes the table: ``shoe.burn_on_dealer_change`` cards burn (after the live round)."""

    who: str


@dataclass(frozen=True, slots=True)
class ShuffleStarted:
    """Who loaded the shuffler and started it: named on the shoe's verification record."""

    who: str


@dataclass(frozen=True, slots=True)
class HandShuffled:
    """A hand-shuffled table's dealer declares the shoe shuffled."""

    who: str


@dataclass(frozen=True, slots=True)
class ShoeRemainder:
    """The undealt remainder, counted per card as it went back to the shuffler."""

    returned: dict[Card, int]
    who: str


# ---- seats (kept across rounds: who is at the table, beyond who bets) ----------------------------

@dataclass(frozen=True, slots=True)
class TakeSeat:
    """A player sits down at the table."""

    player: str
    who: str


@dataclass(frozen=True, slots=True)
class LeaveSeat:
    """A player leaves the table (his request for a box, if any, ends)."""

    player: str
    who: str


@dataclass(frozen=True, slots=True)
class AskForBox:
    """A seated player who owns no box asks for one (seeds 000, 002, 003: others may be asked to give one up)."""

    player: str
    who: str


# ---- the supervisor ---------------------------------------------------------------------------

@dataclass(frozen=True, slots=True)
class PlacementError:
    """A card placed on the wrong box in the initial deal: the layout is reconstructed."""

    who: str
    role: Role
    assignments: tuple[tuple[Card, Target], ...] | None = None


@dataclass(frozen=True, slots=True)
class CardsToBoxWithoutWager:
    """Every card in play goes back on the shoe and is dealt again in the same order."""

    who: str
    role: Role


@dataclass(frozen=True, slots=True)
class Redeal:
    who: str
    role: Role


@dataclass(frozen=True, slots=True)
class VoidShoe:
    who: str
    role: Role
    #: the supervisor means the next shoe, the one that took the place of the shoe he voided last
    #: (Shoe.after_void): a plain void of it is refused, as it may be the last void again
    next_shoe: bool = False


@dataclass(frozen=True, slots=True)
class ClearAlarm:
    alarm_id: int
    who: str
    role: Role


TableInput = (DeviceMessage | LinkUp | LinkDown | Tick | OpenRound | PlaceBet | ReduceBet | PlacePairsBet | NoMoreBets
              | Insure | EvenMoney | CloseInsurance | Act | EnterCard | DrawnInErrorDecision | DealerChange
              | TakeSeat | LeaveSeat | AskForBox | PlacementError | CardsToBoxWithoutWager | ShuffleStarted
              | HandShuffled | ShoeRemainder | Resume | Redeal | VoidShoe | ClearAlarm)
TABLE_INPUTS: tuple[type, ...] = (
    DeviceMessage, LinkUp, LinkDown, Tick, OpenRound, PlaceBet, ReduceBet, PlacePairsBet, NoMoreBets, Insure,
    EvenMoney, CloseInsurance, Act, EnterCard, DrawnInErrorDecision, DealerChange, TakeSeat, LeaveSeat, AskForBox,
    PlacementError, CardsToBoxWithoutWager, ShuffleStarted, HandShuffled, ShoeRemainder, Resume, Redeal, VoidShoe,
    ClearAlarm,
)
#: The command that gives each input a person gives (API, cardctl, the journal's COMMAND records):
#: the one name people see for it, so a refusal names the command typed and, for the way
#: forward, the one to type next. The devices' and the clock's inputs have none.
COMMAND_NAMES: dict[type, str] = {
    # the dealer's console
    OpenRound: "open_round", PlaceBet: "place_bet", ReduceBet: "reduce_bet", PlacePairsBet: "pairs_bet",
    NoMoreBets: "no_more_bets", Insure: "insure", EvenMoney: "even_money", CloseInsurance: "close_insurance",
    Act: "act", EnterCard: "enter_card", DealerChange: "dealer_change", TakeSeat: "take_seat",
    LeaveSeat: "leave_seat", AskForBox: "ask_for_box", DrawnInErrorDecision: "drawn_in_error",
    ShuffleStarted: "shuffle_started", HandShuffled: "hand_shuffled", ShoeRemainder: "shoe_remainder",
    # the supervisor's overrides
    Resume: "resume", Redeal: "redeal", PlacementError: "placement_error",
    CardsToBoxWithoutWager: "cards_to_box_without_wager", VoidShoe: "void_shoe", ClearAlarm: "clear_alarm",
}


def command_name(record: type) -> str:
    """The command people send ``record`` with (``open_round`` for OpenRound)."""
    return COMMAND_NAMES[record]


#: Values inside records (not records themselves): encoded as a JSON object of their fields.
_VALUES: tuple[type, ...] = (CoPlayerChoice,)
#: Every record the JSON form knows, by its "type" tag: the table's inputs and the round's.
RECORDS: dict[str, type] = {cls.__name__: cls for cls in (*TABLE_INPUTS, *ROUND_INPUTS)}
_HINTS: dict[type, dict[str, Any]] = {}


# ---- JSON -------------------------------------------------------------------------------------

def to_json(record: Any) -> dict[str, Any]:
    """The record as a plain JSON object: ``{"v", "type", field...}``."""
    if type(record) is DeviceMessage:  # every card read: the same object as below, built directly
        return {"v": FORMAT_VERSION, "type": "DeviceMessage", "device": record.device,
                "message": encode(record.message).hex(), "event_index": record.event_index,
                "unit": None if record.unit is None else list(record.unit)}
    name = type(record).__name__
    if RECORDS.get(name) is not type(record) or not is_dataclass(record):
        raise TypeError(f"{type(record).__qualname__} is not an input record (records: {', '.join(RECORDS)})")
    out: dict[str, Any] = {"v": FORMAT_VERSION, "type": name}
    for field_name in _field_names(type(record)):
        out[field_name] = _encode(getattr(record, field_name))
    return out


_FIELD_NAMES: dict[type, tuple[str, ...]] = {}


def _field_names(cls: type) -> tuple[str, ...]:
    """A record type's field names (dataclasses.fields() builds them anew on every call)."""
    names = _FIELD_NAMES.get(cls)
    if names is None:
        names = _FIELD_NAMES[cls] = tuple(f.name for f in fields(cls))
    return names


def _encode(value: Any) -> Any:
    if isinstance(value, Card):
        return str(value)
    if isinstance(value, Target):
        return [value.kind, value.box, value.hand]
    if isinstance(value, enum.Enum):
        return value.value
    if isinstance(value, Message):
        return encode(value).hex()
    if type(value) in _VALUES:
        return {f.name: _encode(getattr(value, f.name)) for f in fields(value)}
    if isinstance(value, (tuple, list)):
        return [_encode(v) for v in value]
    if isinstance(value, dict):
        return {str(_encode(k)): _encode(v) for k, v in value.items()}
    return value


def from_json(data: Any, named: str | None = None) -> Any:
    """The record ``data`` describes; :class:`InputDecodeError` names what is wrong with it, and
    where: the record's type, or ``named`` (a command's args name the command, not a class)."""
    if not isinstance(data, dict):
        raise InputDecodeError(f"an input record is a JSON object, not {type(data).__name__}: {data!r:.80}")
    if data.get("v") not in READABLE_VERSIONS:
        raise InputDecodeError(f"input record version {data.get('v')!r} is not one of "
                               f"{', '.join(map(str, READABLE_VERSIONS))}: {data!r:.80}")
    name = data.get("type")
    cls = RECORDS.get(name) if isinstance(name, str) else None
    if cls is None:
        raise InputDecodeError(f"unknown input record type {name!r} (known: {', '.join(RECORDS)})")
    return _build(cls, data, str(name) if named is None else named, {"v", "type"})


def decode_field(cls: type, name: str, value: Any, where: str) -> Any:
    """Field ``name`` of record ``cls`` from its JSON ``value``, checked as :func:`from_json` checks
    it (InputDecodeError naming ``where``): a client checks what a person typed before it sends
    the command (cardctl shoe remainder --file), with the daemon's own rules."""
    return _decode(_hints(cls)[name], value, where)


def _hints(cls: type) -> dict[str, Any]:
    hints = _HINTS.get(cls)
    if hints is None:
        hints = _HINTS[cls] = typing.get_type_hints(cls)
    return hints


def _build(cls: type, data: dict[str, Any], where: str, tags: set[str]) -> Any:
    """A record (or a value inside one) from its JSON object's fields."""
    hints = _hints(cls)
    names = {f.name for f in fields(cls)}
    extra = set(data) - names - tags
    if extra:
        raise InputDecodeError(f"{where}: unknown field(s) {', '.join(sorted(extra))}")
    kwargs = {}
    for f in fields(cls):
        if f.name not in data:
            if f.default is not MISSING or f.default_factory is not MISSING:  # has a default: may be left out
                continue
            raise InputDecodeError(f"{where}: field {f.name!r} is missing")
        kwargs[f.name] = _decode(hints[f.name], data[f.name], f"{where}.{f.name}")
    return cls(**kwargs)


def _decode(tp: Any, value: Any, where: str) -> Any:
    origin, args = typing.get_origin(tp), typing.get_args(tp)
    if origin in (Union, types.UnionType):
        if value is None and type(None) in args:
            return None
        (inner,) = [a for a in args if a is not type(None)]
        return _decode(inner, value, where)
    if origin is tuple:
        if not isinstance(value, list):
            raise InputDecodeError(f"{where}: expected a list, got {value!r:.60}")
        if len(args) == 2 and args[1] is Ellipsis:
            return tuple(_decode(args[0], v, f"{where}[{i}]") for i, v in enumerate(value))
        if len(value) != len(args):
            raise InputDecodeError(f"{where}: expected {len(args)} items, got {len(value)}")
        return tuple(_decode(a, v, f"{where}[{i}]") for i, (a, v) in enumerate(zip(args, value)))
    if origin is dict:
        if not isinstance(value, dict):
            raise InputDecodeError(f"{where}: expected an object, got {value!r:.60}")
        decoded: dict[Any, Any] = {}
        spelled: dict[Any, str] = {}
        for k, v in value.items():
            key = _decode(args[0], k, f"{where} key {k!r}")
            if key in decoded:  # "TH" and "10H", "AS" and "as": one would silently replace the other's count
                raise InputDecodeError(f"{where}: keys {spelled[key]!r} and {k!r} are the same ({key}): give it once")
            decoded[key], spelled[key] = _decode(args[1], v, f"{where}[{k!r}]"), k
        return decoded
    if tp is bool or tp is str:
        if not isinstance(value, tp):
            raise InputDecodeError(f"{where}: expected {tp.__name__}, got {value!r:.60}")
        return value
    if tp is int:
        if isinstance(value, bool) or not isinstance(value, int):
            raise InputDecodeError(f"{where}: expected a whole number, got {value!r:.60}")
        return value
    if tp is Card:
        if not isinstance(value, str):
            raise InputDecodeError(f"{where}: expected a card (a string such as 'AS'), got {value!r:.60}")
        try:
            return Card.parse(value)
        except CarddError as exc:
            raise InputDecodeError(f"{where}: not a card: {value!r:.60} ({exc})") from None
    if tp is Target:
        if not (isinstance(value, list) and len(value) == 3 and value[0] in ("box", "dealer")):
            raise InputDecodeError(f"{where}: a target is [\"box\" or \"dealer\", box, hand], got {value!r:.60}")
        return Target(*value)
    if isinstance(tp, type) and issubclass(tp, enum.Enum):
        try:
            return tp(value)
        except ValueError:
            raise InputDecodeError(f"{where}: {value!r:.60} is not one of "
                                   f"{', '.join(str(m.value) for m in tp)}") from None
    if tp in _VALUES:
        if not isinstance(value, dict):
            raise InputDecodeError(f"{where}: expected an object, got {value!r:.60}")
        return _build(tp, value, where, set())
    if tp is Message:
        payload = hex_bytes(value)
        if payload is None:
            raise InputDecodeError(f"{where}: not an encoded firmware message: expected its bytes in hex, got "
                                   f"{value!r:.60}")
        try:
            return decode(payload)
        except CarddError as exc:
            raise InputDecodeError(f"{where}: not an encoded firmware message: {exc}") from None
    raise InputDecodeError(f"{where}: no JSON form for {tp!r}")  # a record field of a type added without one


def hex_bytes(value: Any) -> bytes | None:
    """The bytes a string of hex digits (spaces allowed) stands for; None when ``value`` is not one."""
    if not isinstance(value, str):
        return None
    try:
        return bytes.fromhex(value)
    except ValueError:
        return None
