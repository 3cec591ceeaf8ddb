"""The simulated devices' CPU per card, dealt flat out: a benchmark (prints figures), not a test.

    .venv/bin/python benchmarks/sim_deal.py [--shoes 10] [--decks 6] [--profile FILE]
    valgrind --tool=callgrind --callgrind-out-file=/tmp/cg.%p .venv/bin/python benchmarks/sim_deal.py --shoes 4
        (and --shoes 8: instructions a card = (Ir of 8 shoes - Ir of 4 shoes) / the cards of 4 shoes)

This process is benchmarks/daemon.py's devices' process (``_devices``): a simulated table
(:meth:`SimulatedTable.over_ptys`, shuffler and shoe each behind its own pty). A host in its own
process (spawned: callgrind follows no child, so only the devices' side is counted) opens the
shoe with the real :class:`~firmware_bridge.connection.DeviceConnection` (serial driver, link,
session, numbered events confirmed as delivered, one EventsJournaled a loop turn, as the daemon
confirms its commits). Each shoe is loaded straight into the simulated shoe (no shuffle: the
shuffler only idles, as between shoes in the daemon benchmark) and dealt on demand as fast as
its link allows; the host says when the shoe's ShoeEmpty came. Printed: CPU of this process a
card (``time.process_time``: every thread) from the first load to the last ShoeEmpty, the
host's likewise, and the shoe link's retransmits (0 on a clean run).
"""
from __future__ import annotations

import argparse
import asyncio
import cProfile
import logging
import multiprocessing
import resource
import sys
import time
from multiprocessing.connection import Connection
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

import structlog  # noqa: E402

from firmware_bridge.messages import CardRead, Message, ShoeEmpty  # noqa: E402
from simulators.pty_endpoint import PtyEndpoint  # noqa: E402
from simulators.rig import DEFAULT_PENETRATION, SimulatedTable  # noqa: E402
from simulators.stack import fisher_yates, full_shoe  # noqa: E402

import random  # noqa: E402


def _quiet() -> None:
    structlog.configure(wrapper_class=structlog.make_filtering_bound_logger(logging.WARNING))


def _host(url: str, conn: Connection) -> None:
    """The host: reads the shoe's events, ACKs and confirms them; says ("empty", cards read) at
    each ShoeEmpty and, asked with "cpu", its CPU seconds so far."""
    from firmware_bridge.connection import DeviceConnection
    _quiet()

    async def main() -> None:
        loop = asyncio.get_running_loop()
        cards = 0

        def on_message(msg: Message) -> None:
            nonlocal cards
            if type(msg) is CardRead:
                cards += 1
            elif type(msg) is ShoeEmpty:
                conn.send(("empty", cards))

        connection = DeviceConnection(url, on_message)
        await connection.open()
        conn.send(("up", 0))
        stop = asyncio.Event()

        def command() -> None:
            op = conn.recv()
            if op == "cpu":
                conn.send(("cpu", time.process_time()))
            else:
                stop.set()

        loop.add_reader(conn.fileno(), command)
        await stop.wait()
        await connection.close()
        conn.send(("done", 0))

    asyncio.run(main())


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--shoes", type=int, default=10)
    ap.add_argument("--decks", type=int, default=6, help="decks a shoe (6: 312 cards)")
    ap.add_argument("--profile", help="write a cProfile of the dealing (all of this process's threads "
                                      "are not profiled: the device's loop thread is) to FILE")
    args = ap.parse_args()
    _quiet()
    sim = SimulatedTable.over_ptys(shuffle_time_s=0.0)
    sim.start()
    shoe = sim.shoe
    assert isinstance(shoe, PtyEndpoint)
    context = multiprocessing.get_context("spawn")
    conn, child = context.Pipe()
    host = context.Process(target=_host, args=(shoe.url, child), daemon=True)
    host.start()
    profiler = cProfile.Profile() if args.profile else None
    try:
        assert conn.recv() == ("up", 0)
        rng = random.Random(1)
        stacks = [fisher_yates(full_shoe(args.decks), rng) for _ in range(args.shoes)]
        if profiler is not None:  # profile the device's loop thread, where all the work is
            shoe.call(profiler.enable)
        conn.send("cpu")
        host_before = conn.recv()[1]
        before, began = time.process_time(), time.monotonic()
        usage = resource.getrusage(resource.RUSAGE_SELF)
        total = 0
        for stack in stacks:
            shoe.call(shoe.device.load, stack, int(len(stack) * DEFAULT_PENETRATION))
            shoe.call(shoe.device.deal, len(stack))
            kind, read = conn.recv()
            assert kind == "empty", kind
            total += len(stack)
            if read != total:
                raise RuntimeError(f"the host read {read} cards, {total} were dealt")
        cpu, elapsed = time.process_time() - before, time.monotonic() - began
        system = resource.getrusage(resource.RUSAGE_SELF).ru_stime - usage.ru_stime
        conn.send("cpu")
        host_cpu = conn.recv()[1] - host_before
        if profiler is not None:
            shoe.call(profiler.disable)
            profiler.dump_stats(args.profile)
        stats = shoe.state()["link_stats"]
        conn.send("stop")
        conn.recv()
    finally:
        host.join(10)
        sim.stop()
    print(f"{args.shoes} shoes, {total} cards in {elapsed:.2f} s ({total / elapsed:,.0f} cards/s): "
          f"devices {cpu / total * 1e6:.1f} us CPU a card ({system / total * 1e6:.1f} of it in the kernel), host {host_cpu / total * 1e6:.1f} us; "
          f"shoe link: {stats.data_sent} DATA frames sent, {stats.frames_received} frames received, "
          f"{stats.retransmits} retransmits ({stats.probes} probes)")
    return 0


if __name__ == "__main__":
    sys.exit(main())
