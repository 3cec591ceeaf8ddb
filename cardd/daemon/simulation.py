"""``cardd --simulate`` only: a simulated shuffler and shoe behind real ptys, and the dealer's
hands on their cards (moving the shuffled stack into the shoe, drawing cards), offered as the
simulation-only commands ``sim_load_shoe`` and ``sim_deal``. A real table has neither: its
cards move by hand and the host learns each one only when the shoe reads it.
"""
from __future__ import annotations

import asyncio
import shutil
import tempfile
from pathlib import Path
from typing import Any

import msgspec

from cardd.api.errors import CommandFailed
from cardd.config import CarddConfig, DevicesConfig, simulated
from simulators.pty_endpoint import PtyEndpoint
from simulators.rig import SimulatedTable

#: the most cards one sim_deal may ask for (a whole 8-deck shoe)
MAX_DEAL = 416


class _DealArgs(msgspec.Struct, forbid_unknown_fields=True, frozen=True):
    cards: int = 1


class Simulation:
    def __init__(self, directory: Path | None = None) -> None:
        self.table = SimulatedTable.over_ptys()
        #: a directory made here (none given) is removed by stop(), the journal in it too
        self._made = directory is None
        self.directory = Path(tempfile.mkdtemp(prefix="cardd-sim-")) if directory is None else directory

    def start(self) -> CarddConfig:
        """Start the devices; the built-in configuration, with their ptys as the device URLs."""
        self.table.start()
        base = simulated(self.directory)
        shoe, shuffler = self.table.shoe, self.table.shuffler
        assert isinstance(shoe, PtyEndpoint) and isinstance(shuffler, PtyEndpoint)  # over_ptys() made them
        devices = DevicesConfig(shoe=shoe.url, shuffler=shuffler.url)
        return msgspec.structs.replace(base, devices=devices)

    def stop(self) -> None:
        """The devices stopped (their ptys' directories removed) and the directory made here."""
        self.table.stop()
        if self._made:
            shutil.rmtree(self.directory, ignore_errors=True)

    async def command(self, name: str, args: dict[str, Any]) -> dict[str, Any]:
        if name == "sim_load_shoe":
            if args:
                raise CommandFailed("sim_load_shoe takes no args", code="bad-args")
            try:
                cards = await asyncio.to_thread(self.table.hand_off)
            except RuntimeError as exc:
                raise CommandFailed(f"sim_load_shoe: {exc}") from None
            return {"cards": cards}
        if name == "sim_deal":
            try:
                parsed = msgspec.convert(args, _DealArgs)
            except msgspec.ValidationError as exc:
                raise CommandFailed(f"sim_deal: {exc}", code="bad-args") from None
            if not 1 <= parsed.cards <= MAX_DEAL:
                raise CommandFailed(f"sim_deal: cards {parsed.cards}: from 1 to {MAX_DEAL}", code="bad-args")
            shoe = self.table.shoe
            await asyncio.to_thread(shoe.call, shoe.device.deal, parsed.cards)
            return {"cards": parsed.cards}
        raise CommandFailed(f"{name} is not a simulation command", code="unknown-command")
