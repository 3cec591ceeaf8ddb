"""The daemon's card path above the link, in one process: CPU per card (a benchmark, not a test).

What ``benchmarks/daemon.py`` measures end to end, without the devices' process, the ptys and
the link: each card read enters as the connection hands it over (the protocol 1.1 event's
message decoded from its payload, then :class:`~cardd.daemon.tracker_service.TableService`
through its feed, as ``cardd.daemon.devices`` does), is applied to the table, journaled in the
service's group commits (a real journal: WAL, synchronous=FULL, the writer thread) and published
to a real :class:`~cardd.api.server.ApiServer` with one WATCH client on its Unix socket (read by
this process). A burst of cards is handed over per loop turn, as the link hands over what one
read brought.

Two streams: ``no-round`` (the daemon benchmark's: whole shoes dealt with no round open, each
card a card drawn in error) and ``rounds`` (recorded shoes of random rounds: cards dealt to
hands, settlement). Prints CPU microseconds per card (all threads: ``process_time``) and the
cards/s of this one process.

    .venv/bin/python benchmarks/card_path.py [--shoes 10] [--stream no-round|rounds] [--burst 16] [--window 128] [--profile FILE]
                                             [--no-freeze]
"""
from __future__ import annotations

import argparse
import asyncio
import cProfile
import gc
import os
import random
import socket
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from cardd.api.server import ApiServer  # noqa: E402
from cardd.config import RULES_DIR  # noqa: E402
from cardd.daemon.backend import DaemonBackend  # noqa: E402
from cardd.daemon.tracker_service import TableService  # noqa: E402
from cardd.journal import Entry, Journal  # noqa: E402
from cardd.logs import configure_logging  # noqa: E402
from core.cards import Orientation, shoe_composition  # noqa: E402
from devices.game.rules import load_rules  # noqa: E402
from devices.tracker.inputs import DeviceMessage, TableInput  # noqa: E402
from devices.tracker.recording import record_random_shoes  # noqa: E402
from firmware_bridge.messages import CardRead, Event, decode, encode  # noqa: E402

SHOE = "shoe-reader"
UNIT = ("shoe", "sim", "shoe-reader-1")


def no_round_shoes(rules: Any, shoes: int, rng: random.Random) -> list[TableInput]:
    """Connect, then per shoe: shuffle, load, every card read with no round open, the shoe voided."""
    from devices.tracker.recording import _Recorder, connect, shuffle_and_load
    from devices.tracker.table import Table
    from devices.events import Role
    from devices.tracker.inputs import VoidShoe
    table = Table(rules, lambda e: None, clock=lambda: 0.0, stale_after_s=1e9)
    rec = _Recorder(table)
    connect(rec)
    for _ in range(shoes):
        shuffle_and_load(rec, rules)
        stack = [c for c, n in shoe_composition(rules.decks).items() for _ in range(n)]
        rng.shuffle(stack)
        for index, card in enumerate(stack, 1):
            rec(DeviceMessage(SHOE, CardRead(index, card, Orientation.FACE_DOWN, index)))
        rec(VoidShoe("supervisor-1", Role.SUPERVISOR))  # as the daemon benchmark's void_shoe
    return rec.records


def numbered(records: list[TableInput]) -> list[tuple[bytes | None, TableInput]]:
    """Each shoe message as the 1.1 event payload it comes in (indexed), the rest as they are."""
    out: list[tuple[bytes | None, TableInput]] = []
    index = 0
    for record in records:
        if isinstance(record, DeviceMessage) and record.device == SHOE and record.message.__class__.__name__ != "Ident":
            index += 1
            out.append((encode(Event(index, record.message)), record))
        else:
            out.append((None, record))
    return out


async def run(args: argparse.Namespace) -> None:
    rules = load_rules(args.rules)
    rng = random.Random(args.seed)
    if args.stream == "rounds":
        records, _ = record_random_shoes(rules, rng, shoes=args.shoes, max_boxes=7)
    else:
        records = no_round_shoes(rules, args.shoes, rng)
    steps = numbered(records)
    cards = sum(isinstance(r, DeviceMessage) and isinstance(r.message, CardRead) for _, r in steps)
    with tempfile.TemporaryDirectory() as tmp:
        journal = Journal.open(Path(tmp) / "journal.db", create=True)
        server: ApiServer | None = None
        service = TableService(rules, journal, lambda event: server.publish(event) if server else None,
                               clock=time.monotonic)
        service.restore(Entry(kind="start", reason="DAEMON_START", source="cardd", data={"message": "bench"}))
        server = await _server(service, Path(tmp) / "api.sock")
        watcher = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
        watcher.connect(str(Path(tmp) / "api.sock"))
        watcher.setblocking(False)
        received = bytearray()
        loop = asyncio.get_running_loop()

        def readable() -> None:
            try:
                received.extend(watcher.recv(1 << 20))
            except BlockingIOError:
                pass
        loop.add_reader(watcher.fileno(), readable)
        watcher.sendall(b'{"class":"WATCH","id":"w"}\n')
        await asyncio.sleep(0.2)
        if not args.no_freeze:
            gc.freeze()  # as cardd's main does once the daemon has started
        gc_time = [0.0, 0.0]

        def gc_timed(phase: str, info: dict[str, int]) -> None:  # the collector's share of the CPU
            if phase == "start":
                gc_time[1] = time.thread_time()
            else:
                gc_time[0] += time.thread_time() - gc_time[1]
        gc.callbacks.append(gc_timed)
        feed = service.feed
        writer_cpu = [0.0]
        append_encoded = journal.append_encoded

        def timed_append(encoded: Any) -> list[int]:  # the writer thread's share of the CPU
            began = time.thread_time()
            try:
                return append_encoded(encoded)
            finally:
                writer_cpu[0] += time.thread_time() - began
        journal.append_encoded = timed_append  # type: ignore[method-assign]
        profile = cProfile.Profile() if args.profile else None
        if profile is not None:
            profile.enable()
        sent = 0
        began_cpu, began = time.process_time(), time.perf_counter()
        for at in range(0, len(steps), args.burst):
            for payload, record in steps[at:at + args.burst]:
                if payload is not None:  # as the session decodes it and the connection hands it on
                    event = decode(payload)
                    assert isinstance(event, Event) and isinstance(record, DeviceMessage)
                    feed.apply(DeviceMessage(SHOE, event.message, event.index, UNIT))
                    sent = event.index
                else:
                    feed.apply(record)
            await asyncio.sleep(0)
            # the shoe stops at its window of events not yet journaled (confirmed), as a 1.1 device does
            while sent - service.event_marks.get(SHOE, {}).get(UNIT, 0) > args.window:
                await asyncio.sleep(0.0002)
        service.flush()
        last = journal.last_seq
        deadline = time.monotonic() + 60
        while f'"seq":{last},'.encode() not in received[-4096:]:
            if time.monotonic() > deadline:
                raise SystemExit(f"the watcher never got seq {last}; the last it got: {bytes(received[-300:])!r}")
            await asyncio.sleep(0.001)
        cpu, took = time.process_time() - began_cpu, time.perf_counter() - began
        gc.callbacks.remove(gc_timed)
        if profile is not None:
            profile.disable()
            profile.dump_stats(args.profile)
        loop.remove_reader(watcher.fileno())
        watcher.close()
        await server.stop()
        journal.close()
    print(f"card path ({args.stream}, {args.shoes} shoes, burst {args.burst}): {cards} cards, {last} records; "
          f"CPU {cpu * 1e6 / cards:.1f} us a card (all threads; the journal's writer thread "
          f"{writer_cpu[0] * 1e6 / cards:.1f}, the garbage collector {gc_time[0] * 1e6 / cards:.1f}), "
          f"{cards / took:,.0f} cards/s in this process")


async def _server(service: TableService, path: Path) -> ApiServer:
    """The API server on the daemon's own backend (a plain WATCH, no since_seq, asks nothing of it;
    no commands: the bench runs none)."""
    backend = DaemonBackend(service, commands={}, links=dict, runners={})
    server = ApiServer(backend, path, release="bench", role_groups={}, admin_uids={os.getuid()})
    await server.start()
    return server


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--shoes", type=int, default=10)
    ap.add_argument("--stream", choices=("no-round", "rounds"), default="no-round")
    ap.add_argument("--burst", type=int, default=16)
    ap.add_argument("--window", type=int, default=128,
                    help="the shoe's events not yet journaled before it pauses (a commit holds about twice as many records)")
    ap.add_argument("--rules", type=Path, default=RULES_DIR / "casino-000.toml")
    ap.add_argument("--seed", type=int, default=2026)
    ap.add_argument("--profile", metavar="FILE")
    ap.add_argument("--no-freeze", action="store_true", help="leave the start-up's objects to the collector")
    args = ap.parse_args()
    configure_logging("json", "info", stream=open(os.devnull, "w"))  # the daemon's logging, to nowhere
    asyncio.run(run(args))


if __name__ == "__main__":
    main()
