"""``cardbench simulate --transport pty``: the same rounds with the devices' side real (the simulated
shuffler and shoe behind real pseudo-terminals, through the serial driver, link, session,
connection and the library's ``Feed``).

Threads: the connections' asyncio loop runs on its own thread and every table input is applied
there. The round loop of :class:`Simulation` runs on the caller's thread and reads the round only
while no card is on its way (it waits for each card to be placed); meanwhile the loop applies at
most the devices' heartbeats, which touch only the device models."""
from __future__ import annotations

import asyncio
import random
import threading
import time
from collections import Counter
from typing import Any, Callable, TypeVar

from cardd.bench.simulate import DEALER, Simulation, SimulationError
from cardd.bench.strategy import Strategy
from devices.game.rules import HouseRules
from devices.tracker.feed import Feed
from devices.tracker.inputs import ShoeRemainder, TableInput, TakeSeat
from firmware_bridge.connection import DeviceConnection
from firmware_bridge.messages import StartShuffle
from firmware_bridge.session import SessionConfig
from simulators.pty_endpoint import PtyEndpoint
from simulators.rig import SimulatedTable
from simulators.shoe import SimulatedShoe
from simulators.shuffler import SimulatedShuffler

T = TypeVar("T")
#: how long one device step (a shuffle, a card) may take on a loaded machine
STEP_TIMEOUT = 30.0


class PtySimulation(Simulation):
    def __init__(self, rules: HouseRules, boxes: int, strategy: Strategy, seed: int) -> None:
        if rules.shoe.shuffle != "automatic":
            raise SimulationError(f"--transport pty needs a table with a shuffler ({rules.name} shuffles by hand)")
        self.sim = SimulatedTable(PtyEndpoint(SimulatedShuffler(shuffle_rng=random.Random(seed))),
                                  PtyEndpoint(SimulatedShoe()))
        self.loop = asyncio.new_event_loop()
        self._thread = threading.Thread(target=self.loop.run_forever, name="bench-pty-loop", daemon=True)
        self._connections: list[DeviceConnection] = []
        self.sim.start()
        self._thread.start()
        super().__init__(rules, boxes, strategy, seed)

    # ---- the loop ---------------------------------------------------------------------------

    def _call(self, fn: Callable[[], T]) -> T:
        async def run() -> T:
            return fn()
        return asyncio.run_coroutine_threadsafe(run(), self.loop).result(STEP_TIMEOUT)

    def _until(self, check: Callable[[], bool], what: str) -> None:
        deadline = time.monotonic() + STEP_TIMEOUT
        while not self._call(check):
            if time.monotonic() > deadline:
                raise SimulationError(f"--transport pty: {what} did not happen within {STEP_TIMEOUT:g} s")
            time.sleep(0.0005)

    def apply(self, record: TableInput) -> None:
        self._call(lambda: self.table.apply(record))

    def close(self) -> None:
        async def shut() -> None:
            for connection in self._connections:
                await connection.close()
        try:
            asyncio.run_coroutine_threadsafe(shut(), self.loop).result(STEP_TIMEOUT)
        finally:
            self.loop.call_soon_threadsafe(self.loop.stop)
            self._thread.join(timeout=STEP_TIMEOUT)
            self.loop.close()
            self.sim.stop()

    # ---- the devices ------------------------------------------------------------------------

    def _connect(self) -> None:
        feed = Feed(self.table)

        async def open_all() -> None:
            for name, endpoint in (("shuffler", self.sim.shuffler), ("shoe-reader", self.sim.shoe)):
                on_message, on_event = feed.callbacks(name)
                connection = DeviceConnection(endpoint.url, on_message, on_event, SessionConfig(host_name="cardbench"))
                self._connections.append(connection)
                await connection.open()
        asyncio.run_coroutine_threadsafe(open_all(), self.loop).result(STEP_TIMEOUT)
        self._until(lambda: self.table.shuffler.usable and self.table.reader.usable, "both devices identified")
        if self.rules.table.lone_player_min_boxes > 1:  # a lone player must play two boxes: one more sits
            self.apply(TakeSeat("seated-1", DEALER))

    def _new_shoe(self) -> None:
        if self.shoes:  # the remainder goes back to the shuffler, counted card by card
            self.apply(ShoeRemainder(dict(Counter(self._stack[self._index:])), DEALER))
        self.shoes += 1
        shuffler = self._connections[0]
        asyncio.run_coroutine_threadsafe(shuffler.send(StartShuffle(self.rules.decks)), self.loop).result(STEP_TIMEOUT)
        self._until(lambda: self.table.shoe.state == "verified", "the shuffled shoe verified")
        stack: list[Any] = self.sim.shuffler.call(self.sim.shuffler.device.unload)
        cut_at = int(len(stack) * self.rules.shoe.penetration)
        self.sim.shoe.call(self.sim.shoe.device.load, stack, cut_at)
        self._until(lambda: self.table.shoe.state == "burning", "the shoe loaded")
        self._stack, self._index, self._cut_at = stack, 0, cut_at
        for _ in range(self.rules.shoe.burn_after_shuffle):
            self._read()

    def _read(self) -> None:
        if self._index >= len(self._stack):
            raise SimulationError(f"the shoe of {self.rules.decks} deck(s) ran out of cards in a round of "
                                  f"{self.boxes} boxes: use more decks or fewer boxes")
        before = self._call(lambda: self.table.shoe.cards_out)
        self.sim.shoe.call(self.sim.shoe.device.deal, 1)
        self._index += 1
        self._until(lambda: self.table.shoe.cards_out > before, f"card {self._index} placed")


def simulation_for(transport: str, rules: HouseRules, boxes: int, strategy: Strategy, seed: int) -> Simulation:
    """The simulation of ``transport``: "inprocess" (the table fed in this process) or "pty"."""
    if transport == "pty":
        return PtySimulation(rules, boxes, strategy, seed)
    return Simulation(rules, boxes, strategy, seed)
