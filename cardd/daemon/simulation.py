"""``cardd --simulate`` only: a simulated shuffler and shoe behind real ptys, and the dealer's
hands on their cards (moving the shuffled stack into the shoe, drawing cards), offered as the
simulation-only commands ``sim_load_shoe`` and ``sim_deal``. A real table has neither: its
cards move by hand and the host learns each one only when the shoe reads it. Under rules that
shuffle by hand, ``sim_load_shoe`` loads the dealer's own shuffle; the shuffler is not used. The demo, the
tests and ``cardctl sim`` inject faults with two more: ``sim_fault`` (a device fault now, e.g. a shuffler
jam) and ``sim_switches`` (the simulators' fault switches, e.g. ``face_up_at=42`` or ``disconnect_for=1``,
on, or back to their defaults).
"""
from __future__ import annotations

import asyncio
import shutil
from collections import Counter
from pathlib import Path
from typing import Any, TypeVar

import msgspec
import structlog

from cardd.api.errors import CommandFailed
from cardd.api.protocol import ErrorCode
from cardd.config import SIMULATED_RULES, CarddConfig, DevicesConfig, simulated
from cardd.journal import Journal, WriterLock
from core.rundirs import make_run_directory
from core.schema_errors import schema_problem
from devices.game.rules import HouseRules, load_rules
from devices.tracker.shoe import IN_PLAY as SHOE_IN_PLAY
from firmware_bridge.messages import FaultCode
from simulators import nvram
from simulators.endpoint import Endpoint
from simulators.faults import Faults, FaultSpecError
from simulators.pty_endpoint import PtyEndpoint
from simulators.rig import DEFAULT_PENETRATION, SimulatedTable, cut_card_at
from simulators.stack import fisher_yates, full_shoe

log = structlog.get_logger(__name__)

S = TypeVar("S", bound=msgspec.Struct)
#: the most cards one sim_deal may ask for (a whole 8-deck shoe)
MAX_DEAL = 416


class _FaultArgs(msgspec.Struct, forbid_unknown_fields=True, frozen=True):
    device: str
    code: str = "jam"


class _SwitchArgs(msgspec.Struct, forbid_unknown_fields=True, frozen=True):
    device: str
    switches: str = ""  # the simulators' spec, e.g. "face_up_at=42 disconnect_for=1.5"
    off: list[str] = []  # switches back to their defaults: "face_up_at=..." has no value that is off


class _LoadArgs(msgspec.Struct, forbid_unknown_fields=True, frozen=True):
    cut_at: int | None = None  # the cut card after this card (default: the rules' penetration)


class _DealArgs(msgspec.Struct, forbid_unknown_fields=True, frozen=True):
    cards: int = 1


class Simulation:
    def __init__(self, directory: Path | None = None, rules: Path = SIMULATED_RULES,
                 house_rules: HouseRules | None = None) -> None:
        """``rules``: the house-rules file the simulated table plays under (--rules); ``house_rules``:
        what it says, when the caller has loaded it already (main, to check it), else read here."""
        #: a directory made here (none given) is removed by stop(), the journal in it too
        self._made = directory is None
        self.rules = rules
        #: a hand-shuffle table's shoe loads by hand (sim_load_shoe)
        self.house_rules = house_rules if house_rules is not None else load_rules(rules)
        self._kept = False  # the devices' memory restored and kept: stop() writes it once more
        # made here: removed by stop(), or by the next run if this daemon is killed (core.rundirs)
        self.directory = make_run_directory("cardd-sim-") if directory is None else directory
        # the devices' pty paths in the same directory: a daemon killed with SIGKILL leaves nothing
        # outside its --state-dir (ptys' private temp dirs went only on a normal exit)
        self.table = SimulatedTable.over_ptys(directory=self.directory)
        self.writer_lock: WriterLock | None = None  # held from start() until the daemon opens the journal

    def start(self) -> CarddConfig:
        """Start the devices; the built-in configuration, with their ptys as the device URLs.
        :class:`JournalBusy` first if a cardd already runs (or starts) on this directory: its devices'
        pty links would be replaced, then removed, under it. The journal's writer's lock is held from
        that check on, for the daemon to open the journal with (:meth:`take_writer_lock`)."""
        base = simulated(self.directory, self.rules)
        self.claim()
        assert self.writer_lock is not None
        try:
            # what the devices held when the daemon last stopped (or was killed) here: a restart of the
            # table computer leaves the cards in the shoe and the shuffler. Not in a directory made
            # for this run alone (removed at its end), and not beside a journal that is not there:
            # the memory of a table whose journal was removed to start over would deal cards the
            # new table never saw (MISSING_READ at the first card)
            if not self._made:
                journal_kept = base.journal.path.exists()
                for endpoint in (self.table.shuffler, self.table.shoe):
                    path = self._nvram_path(endpoint)
                    if not journal_kept and path.exists():
                        log.warning("sim_memory_dropped", path=str(path),
                                    why=f"no journal at {base.journal.path}: a new table, its devices start empty")
                        path.unlink()
                    nvram.keep(endpoint.device, path)
                self._kept = True
            self.table.start()
        except BaseException:
            self.writer_lock.release()
            raise
        return self.config()

    def claim(self) -> None:
        """The journal's writer's lock, taken (start() takes it if not yet): :class:`JournalBusy` if a
        cardd already runs (or starts) on this directory, before anything is printed or started."""
        if self.writer_lock is None:
            self.writer_lock = Journal.hold_writer_lock(simulated(self.directory, self.rules).journal.path)

    def config(self) -> CarddConfig:
        """The built-in configuration, with the devices' ptys as their URLs: known before start()
        (the pty links' paths are fixed in the directory), so cardd names them before it logs anything."""
        shoe, shuffler = self.table.shoe, self.table.shuffler
        assert isinstance(shoe, PtyEndpoint) and isinstance(shuffler, PtyEndpoint)  # over_ptys() made them
        devices = DevicesConfig(shoe=shoe.url, shuffler=shuffler.url)
        return msgspec.structs.replace(simulated(self.directory, self.rules), devices=devices)

    def _nvram_path(self, endpoint: Endpoint[Any]) -> Path:
        """Where a simulated device keeps its memory: beside the journal, one file a role."""
        return self.directory / f"{endpoint.device.ROLE.name.lower()}.nvram.json"

    def take_writer_lock(self) -> WriterLock | None:
        """The journal's writer's lock start() took, for Journal.open (once: None after)."""
        lock, self.writer_lock = self.writer_lock, None
        return lock

    def stop(self) -> None:
        """The devices stopped (their ptys' directories removed), the journal's lock released if the
        daemon never took it, and the directory made here removed."""
        if self.writer_lock is not None:
            self.writer_lock.release()
            self.writer_lock = None
        self.table.stop()
        if self._kept:  # once more, stopped: the events the host confirmed since are let go
            for endpoint in (self.table.shuffler, self.table.shoe):
                endpoint.device.on_change()  # nvram.keep's writer: a write that fails is logged, never raised
        if self._made:
            shutil.rmtree(self.directory, ignore_errors=True)

    async def command(self, name: str, args: dict[str, Any], shoe_state: str) -> dict[str, Any]:
        """Do simulation command ``name``; ``shoe_state`` is the tracker's (the stub is counted
        only once the shoe is complete: before that its cards are undealt and stay unseen)."""
        if name == "sim_load_shoe":
            cut_at = self._parse(name, args, _LoadArgs).cut_at
            return await asyncio.to_thread(self._load_shoe, cut_at)
        if name == "sim_deal":
            try:
                parsed = msgspec.convert(args, _DealArgs)
            except msgspec.ValidationError as exc:
                raise CommandFailed(schema_problem(exc).sentence("sim_deal"), code=ErrorCode.BAD_ARGS) from None
            if not 1 <= parsed.cards <= MAX_DEAL:
                raise CommandFailed(f"sim_deal: cards {parsed.cards}: from 1 to {MAX_DEAL}", code=ErrorCode.BAD_ARGS)
            shoe = self.table.shoe
            held = await asyncio.to_thread(shoe.call, shoe.device.cards_free)
            if held == 0:  # an ACK would journal cards that never come
                way = ("void the shoe (void_shoe) and shuffle a new one" if shoe_state in SHOE_IN_PLAY
                       else "load one with sim_load_shoe first")
                raise CommandFailed(f"sim_deal: the simulated shoe holds no cards to deal (the table's shoe is "
                                    f"{shoe_state}): {way}")
            cards = min(parsed.cards, held)  # what leaves: a shoe runs out
            drawn = await asyncio.to_thread(shoe.call, shoe.device.deal, cards)
            # the cards as the dealer sees them leave (null: a foreign card, no face the shoe knows)
            result: dict[str, Any] = {"cards": cards, "drawn": [None if card is None else str(card) for card in drawn]}
            return result if cards == parsed.cards else {**result, "asked": parsed.cards}
        if name == "sim_unload_shoe":
            if args:
                raise CommandFailed("sim_unload_shoe takes no args", code=ErrorCode.BAD_ARGS)
            if shoe_state != "complete":
                raise CommandFailed(f"sim_unload_shoe: the shoe is {shoe_state}: the stub comes out once it is complete")
            shoe = self.table.shoe
            stub = await asyncio.to_thread(shoe.call, shoe.device.unload)
            return {"returned": dict(Counter(str(card) for card in stub if card is not None)),
                    "unreadable": sum(card is None for card in stub)}
        if name == "sim_fault":
            fault = self._parse(name, args, _FaultArgs)
            try:
                code = FaultCode[fault.code.upper()]
            except KeyError:
                known = ", ".join(code.name.lower() for code in FaultCode)
                raise CommandFailed(f"sim_fault: code {fault.code!r} is not a fault: {known}",
                                    code=ErrorCode.BAD_ARGS) from None
            endpoint = self._endpoint(name, fault.device)
            await asyncio.to_thread(endpoint.call, endpoint.device.raise_fault, code)
            return {"device": fault.device, "code": code.name.lower()}
        if name == "sim_switches":
            spec = self._parse(name, args, _SwitchArgs)
            endpoint = self._endpoint(name, spec.device)
            try:
                changes = Faults.changes(spec.switches)  # "drop_rate=0" switches a fault off
                changes.update(Faults.defaults(spec.off))  # and any switch, back to its default
                await asyncio.to_thread(endpoint.set_faults, **changes)
            except FaultSpecError as exc:
                raise CommandFailed(f"sim_switches: {exc}", code=ErrorCode.BAD_ARGS) from None
            faults = await asyncio.to_thread(endpoint.call, lambda: endpoint.device.faults)
            return {"device": spec.device, "switches": _switch_values(changes), "on": _switch_values(faults.active()),
                    "known": Faults.honoured_by(spec.device)}
        raise CommandFailed(f"{name} is not a simulation command", code=ErrorCode.UNKNOWN_COMMAND)

    def _load_shoe(self, cut_at: int | None) -> dict[str, Any]:
        """sim_load_shoe (on a thread of its own): the shuffled stack into the shoe, the cut card after
        card ``cut_at`` (checked before the stack leaves the shuffler) or at the rules' penetration
        (a hand-shuffle table's, rules' shoe.shuffle = "hand": the dealer's own shuffle of the
        rules' decks; the shuffler is not used)."""
        rules = self.house_rules
        shuffler = self.table.shuffler
        hand = rules.shoe.shuffle == "hand"
        cards = 52 * rules.decks if hand else shuffler.call(shuffler.device.cards_shuffled)
        if not cards:
            raise CommandFailed("sim_load_shoe: the simulated shuffler holds no shuffled stack: shuffle one "
                                "first with start_shuffle")
        if cut_at is not None and not 1 <= cut_at <= cards:
            raise CommandFailed(f"sim_load_shoe: cut_at {cut_at}: the stack holds {cards} cards, so the cut card "
                                f"goes after card 1 to {cards}", code=ErrorCode.BAD_ARGS)
        cut = cut_card_at(cards, DEFAULT_PENETRATION if not hand else rules.shoe.penetration, cut_at)
        if hand:
            self.table.load_shoe(fisher_yates(full_shoe(rules.decks)), cut_at=cut)
        else:
            try:
                self.table.hand_off(cut_at=cut)
            except RuntimeError as exc:  # the stack went between the check and the hand-off
                raise CommandFailed(f"sim_load_shoe: {exc}") from None
        return {"cards": cards, "cut_at": cut}

    @staticmethod
    def _parse(name: str, args: dict[str, Any], kind: type[S]) -> S:
        try:
            return msgspec.convert(args, kind)
        except msgspec.ValidationError as exc:
            raise CommandFailed(schema_problem(exc).sentence(name), code=ErrorCode.BAD_ARGS) from None

    def _endpoint(self, name: str, device: str) -> Endpoint[Any]:
        if device == "shoe":
            return self.table.shoe
        if device == "shuffler":
            return self.table.shuffler
        raise CommandFailed(f"{name}: device {device!r}: shoe or shuffler", code=ErrorCode.BAD_ARGS)


def _switch_values(switches: dict[str, Any]) -> dict[str, Any]:
    """Fault switches' values as JSON (the journal's and the client's): cards as their codes."""
    return {name: [str(card) for card in value] if isinstance(value, tuple) else value
            for name, value in switches.items()}
