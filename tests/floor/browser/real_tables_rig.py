"""A floor of real tables for the pit page's tests: the pit page's floor (tests/floor/browser/
pit_rig.py: mosquitto, PostgreSQL, cardfloor, its users) with no contract publisher, and a real
daemon per table on simulated devices over ptys exporting to the floor's broker
(tests/export/export_rig.py's ExportTable, the test owning the devices so it can misload a card).

One table's devices sit in a folder named like markup, so its devices' URLs (``[devices]`` of
its configuration, sent in its status) carry that text to the floor."""
from __future__ import annotations

import time
from contextlib import ExitStack
from pathlib import Path
from typing import Any

from tests.daemon.daemon_rig import deal_one, play_out, remove, state_dir
from tests.export.export_rig import SITE, ExportTable
from tests.floor.browser.pit_rig import PitFloor
from tests.support.postgres import PostgresServer

#: the pit users of pit_rig.USERS: pat and tom see Pit 1, pia Pit 2
PITS = {"Pit 1": ["bj-11", "bj-12"], "Pit 2": ["bj-21"]}
HOSTILE = "<img src=x onerror=window.__pwned=1>"
#: the table whose devices' URLs carry :data:`HOSTILE`
HOSTILE_DEVICES = "bj-12"


class RealFloor:
    """The floor and its tables, each a ``cardd`` daemon exporting to :attr:`pit`'s broker."""

    def __init__(self, directory: Path, postgres: PostgresServer) -> None:
        self.site = SITE
        self.pit = PitFloor(directory, postgres, site=SITE, pits=PITS, unassigned=[], publishers=False)
        self._stack = ExitStack()
        self.tables: dict[str, ExportTable] = {}
        try:
            for name in [table for tables in PITS.values() for table in tables]:
                folder = state_dir()  # the daemon's socket and journal, reachable by every test uid
                self._stack.callback(remove, folder)
                user, password_file = self.pit.broker.add_table(SITE, name)
                devices = folder / HOSTILE if name == HOSTILE_DEVICES else None
                if devices is not None:
                    devices.mkdir()
                self.tables[name] = self._stack.enter_context(
                    ExportTable(folder, [self.pit.broker.url], name, user=user, password_file=password_file,
                                devices_directory=devices))
        except BaseException:
            self.close()
            raise

    def close(self) -> None:
        self._stack.close()
        self.pit.close()


def open_round(table: ExportTable, player: str = "p1") -> dict[str, Any]:
    """A round open at ``table`` (its shoe loaded first if it is not in play), ``player``'s bet on
    box 1, no more bets: the STATE then."""
    client = table.client
    if client.state()["shoe"]["state"] not in ("in_play", "burning"):
        table.shuffle_and_load()
    client.ok("open_round")
    client.ok("place_bet", box=1, player=player, amount=1000)
    client.ok("no_more_bets")
    return client.state()


def deal_to_box(table: ExportTable) -> dict[str, Any]:
    """The round's first card, to box 1: the STATE then."""
    return deal_one(table.client, table.deal)


def fault_next_card(table: ExportTable, state: dict[str, Any], switch: str) -> float:
    """The shoe's fault ``switch`` (docs/simulators.md: ``face_up_at``, a misload;
    ``conflicting_read_at``, a read sent again as another card) at its next card after ``state``'s,
    and that card dealt: when the fault was put in (time.monotonic)."""
    injected = time.monotonic()
    table.sim.shoe.set_faults(**{switch: state["shoe"]["cards_out"] + 1})
    table.deal(1)
    return injected


def play_round_out(table: ExportTable) -> dict[str, Any]:
    """The open round dealt and every hand standing, to its end: the STATE then."""
    return play_out(table.client, table.deal, lambda _state: None)
