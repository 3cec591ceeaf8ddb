"""Fault-injection switches of the simulated devices, each named so the CLI and the bench can set it:
device faults and wire faults (:mod:`simulators.wire`), a spec string parsed by
:meth:`Faults.parse` (one :class:`FaultSpecError` in words), and the switches one device refuses
(:data:`ONLY_FOR`). docs/simulators.md, "Fault switches", lists them all."""
from __future__ import annotations

import dataclasses
import math
import re
from dataclasses import dataclass, fields
from typing import Any

from core.cards import Card, CardCodeError
from simulators.event_store import DEFAULT_CAPACITY


class FaultSpecError(ValueError):
    """A fault switch that does not exist, a value it cannot take, or a device it does not apply to."""


#: switch -> (the one device that honours it, why the other does not). Every other switch
#: applies to both; face_up_at means a different thing on each (see the field's comment).
ONLY_FOR: dict[str, tuple[str, str]] = {
    "jam": ("shuffler", "a shoe does not shuffle"),
    "jam_needs_clear": ("shuffler", "a shoe does not shuffle"),
    "door_open": ("shuffler", "a shoe has no door"),
    "riffle_once": ("shuffler", "a shoe does not shuffle"),
    "unreadable_at": ("shoe", "a shuffler does not read cards one by one (foreign=K gives it "
                              "cards it cannot recognise)"),
    "repeat_read_at": ("shoe", "a shuffler does not read cards one by one"),
    "conflicting_read_at": ("shoe", "a shuffler does not read cards one by one"),
    "skip_read_at": ("shoe", "a shuffler does not read cards one by one"),
    "late_report_at": ("shuffler", "a shoe sends no shuffle reports"),
}


#: the wire faults that impair the bytes of a live link (the disconnects are the device's own moves)
WIRE_SWITCHES = ("bit_flip_rate", "drop_rate", "byte_at_a_time", "ftdi_batching_ms", "slow_ack_ms")


@dataclass
class Faults:
    # -- device faults -------------------------------------------------------------------
    #: shuffler jams halfway through each shuffle and clears by itself after this many seconds
    jam: float | None = None
    #: shuffler jams halfway through each shuffle and waits for a ClearFault(JAM)
    jam_needs_clear: bool = False
    #: shuffler door open: StartShuffle is refused and Fault(DOOR_OPEN) reported until closed
    door_open: bool = False
    #: stack position (1-based) of a face-up card: the shuffler stops with Fault(FACE_UP_CARD)
    #: until ClearFault; the shoe reads that card with Orientation.FACE_UP
    face_up_at: int | None = None
    #: shuffler riffles the loaded stack once (one Gilbert-Shannon-Reeds riffle) instead of
    #: Fisher-Yates: a deliberately biased shuffle the randomness qualification must fail
    riffle_once: bool = False
    #: cards removed from what is loaded (one copy each)
    missing: tuple[Card, ...] = ()
    #: cards added to what is loaded, at random positions
    extra: tuple[Card, ...] = ()
    #: foreign cards (other backs) added: the shuffler counts them as unrecognised, the shoe
    #: reports them as UnreadableCard
    foreign: int = 0
    #: a second copy of each card, placed right after its first copy in the stack
    duplicate: tuple[Card, ...] = ()
    #: the shoe cannot read the card at this index (UnreadableCard instead of CardRead)
    unreadable_at: int | None = None
    #: the device reboots right after the card/step with this index has been acknowledged
    reboot_at: int | None = None
    #: the device's link sends the same RESET nonce at every boot (firmware whose RNG is not
    #: seeded at power-on), so the host cannot tell a reboot from a repeated RESET by the nonce
    same_nonce: bool = False
    #: the device speaks protocol 1.0: no numbered events (nothing is kept or sent again after
    #: a link reset), no request ids; it refuses the 1.1 messages as unknown
    legacy_1_0: bool = False
    #: the shoe sends the read of card N twice (the same index again, like firmware resending a read)
    repeat_read_at: int | None = None
    #: the shoe sends the read of card N again with another card (the next rank of its suit): a
    #: damaged or forged resend, one index carrying two cards
    conflicting_read_at: int | None = None
    #: card N leaves the shoe unseen: no read at all, and the next read carries index N + 1
    skip_read_at: int | None = None
    #: the shuffler's progress report at N cards counted is sent late: after its ShuffleComplete,
    #: before the DeckCheckResult (a report out of order), at every shuffle
    late_report_at: int | None = None
    #: the device sends no Heartbeat (its other messages still go): a host hears nothing between
    #: them and must take it for stale
    no_heartbeat: bool = False
    #: the device identifies with the other role (a shoe's Ident says shuffler): what a host sees when
    #: the wrong device is on a port. Takes effect at the next Hello (after a reboot or an unplug)
    wrong_role: bool = False
    #: the device answers every Hello with a new boot id and then says Ident again, unasked, with
    #: another: a device that flaps its identity at every handshake (firmware in a boot loop)
    flapping_ident: bool = False
    #: once a host has shaken hands, the device sends its Status unasked, again and again, as fast
    #: as the link takes them: firmware stuck in a reporting loop, or a device flooding its host
    status_flood: bool = False
    # -- protocol 2.0 attacks (an endpoint made with protocol2: docs/protocol.md §9) -----------
    #: the device proves a key no one enrolled, under another serial (its own with -NEW)
    unknown_key: bool = False
    #: the device says its own serial but proves another key: a clone of an enrolled device
    cloned_serial: bool = False
    #: every tagged frame the device sends carries a damaged tag: forged frames
    forged_tag: bool = False
    #: after each handshake the device sends again the tagged frames of the session before
    replayed_capture: bool = False
    #: the device answers HELLO2 with an IDENT2 naming protocol 1.1 (signed): a downgrade offer
    downgrade_offer: bool = False
    #: the device was enrolled with another host: the host it talks to is proven but not its
    #: enrolled one, and gets no firmware and no ClearFault
    rogue_host: bool = False
    #: the device accepts a PROOF2 whose signature does not verify (firmware that skips the check):
    #: a rogue host gets a session, though not the enrolled host's commands
    accept_any_proof: bool = False
    #: events its full buffer pushed out are not reported: ResumeEvents resends what is left
    #: without EventsDropped(OVERFLOW), and the host sees a gap it cannot explain
    silent_overflow: bool = False
    #: how many unconfirmed events the device keeps (docs/protocol.md §3.2); fewer makes the
    #: overflow (EventsDropped OVERFLOW) easy to reach in tests
    event_buffer: int = DEFAULT_CAPACITY
    # -- wire faults (both directions unless said otherwise) ------------------------------
    #: probability that a byte gets one random bit flipped
    bit_flip_rate: float = 0.0
    #: probability that a byte is lost
    drop_rate: float = 0.0
    #: device->host bytes are written one byte per write
    byte_at_a_time: bool = False
    #: device->host bytes are held and flushed every N ms, like an FTDI latency timer
    ftdi_batching_ms: float = 0.0
    #: the device disconnects (pty closed / USB unplugged) for this many seconds ...
    disconnect_for: float | None = None
    #: ... once the card with this index (shoe) / this many cards counted (shuffler) are
    #: acknowledged; None: at the first card or counting step
    disconnect_at: int | None = None
    #: every link ACK (and so every frame) from the device is delayed by this many ms
    slow_ack_ms: float = 0.0
    #: seed of the wire-fault RNG, so a faulty run can be reproduced
    seed: int = 0

    @classmethod
    def names(cls) -> list[str]:
        return [f.name for f in fields(cls)]

    @classmethod
    def parse(cls, spec: str | list[str] | None) -> "Faults":
        """Faults from ``"name[=value] ..."`` (spaces or ``;`` between entries)."""
        return cls(**cls.changes(spec))

    @classmethod
    def changes(cls, spec: str | list[str] | None) -> dict[str, Any]:
        """Every switch ``spec`` names, with its value, defaults included: what ``set_faults`` takes
        to switch faults at run time (``"drop_rate=0"`` turns a switch off; :meth:`active` would drop it)."""
        entries = spec if isinstance(spec, list) else re.split(r"[\s;]+", spec or "")
        values: dict[str, Any] = {}
        for entry in (e.strip() for e in entries):
            if entry:
                name, _, raw = entry.partition("=")
                values[name] = _convert(cls, name.strip(), raw.strip() if "=" in entry else None)
        return values

    @classmethod
    def defaults(cls, names: list[str]) -> dict[str, Any]:
        """The switches ``names`` at their defaults (off): what ``set_faults`` takes to turn them off,
        those whose text form has no value that is off (``face_up_at``, ``jam``) included."""
        default = cls()
        for name in names:
            if name not in cls.names():
                raise unknown_switch(name)
        return {name: getattr(default, name) for name in names}

    @classmethod
    def honoured_by(cls, device: str) -> list[str]:
        """The switches ``device`` ("shoe"/"shuffler") honours: all but the other one's (:data:`ONLY_FOR`)."""
        return [name for name in cls.names() if ONLY_FOR.get(name, (device, ""))[0] == device]

    def check_for(self, device: str) -> None:
        """FaultSpecError if a switch that is on does nothing on ``device`` ("shoe"/"shuffler")."""
        for name in self.active():
            owner, why = ONLY_FOR.get(name, (device, ""))
            if owner != device:
                raise FaultSpecError(f"fault switch {name} is for the {owner} only: {why}")

    def replace(self, **changes: Any) -> "Faults":
        for name in changes:
            if name not in self.names():
                raise unknown_switch(name)
        return dataclasses.replace(self, **changes)

    def active(self) -> dict[str, Any]:
        """The switches that differ from the defaults (for state() and logs)."""
        default = Faults()
        return {f.name: getattr(self, f.name) for f in fields(self) if getattr(self, f.name) != getattr(default, f.name)}


def unknown_switch(name: str) -> FaultSpecError:
    """The error for a switch that does not exist, naming every one that does."""
    return FaultSpecError(f"no fault switch {name!r}; switches: {', '.join(Faults.names())}")


def _expects(name: str, kind: str) -> str:
    """What a switch takes, in words for the person typing it."""
    if kind == "bool":
        return "no value, or one of 1/0, true/false, yes/no, on/off"
    if "Card" in kind:
        return "card codes separated by commas, like AS,7H"
    if name.endswith("_rate"):
        return "a probability from 0 to 1"
    if name.endswith("_ms"):
        return "a number of milliseconds, 0 or more"
    if "float" in kind:
        return "a number of seconds, 0 or more"
    if name.endswith("_at"):
        return "a card position, 1 or more"
    if name == "event_buffer":
        return "a whole number of events, 1 or more"
    return "a whole number, 0 or more"


def _convert(cls: type[Faults], name: str, raw: str | None) -> Any:
    by_name = {f.name: f for f in fields(cls)}
    if name not in by_name:
        raise unknown_switch(name)
    kind = str(by_name[name].type)
    expects = _expects(name, kind)
    entry = name if raw is None else f"{name}={raw}"
    if kind == "bool":
        if raw in (None, "1", "true", "yes", "on"):
            return True
        if raw in ("0", "false", "no", "off"):
            return False
    elif raw is not None and "Card" in kind:
        try:
            return tuple(Card.parse(c) for c in raw.split(",") if c)
        except CardCodeError as exc:
            raise FaultSpecError(f"fault switch {entry}: {exc}") from None
    elif raw is not None:
        try:
            value: float = float(raw) if "float" in kind else int(raw)
        except ValueError:
            value = math.nan
        low = 1 if name.endswith("_at") or name == "event_buffer" else 0
        high = 1 if name.endswith("_rate") else math.inf
        if math.isfinite(value) and low <= value <= high:
            return value
    raise FaultSpecError(f"fault switch {entry}: expected {expects}")
