"""Power cuts on the daemon: while a simulated shoe deals a live round, ``cardd`` and the
simulated devices are killed together (SIGKILL, the devices stopped), the -shm file is lost
(a reboot loses it) and the journal's WAL is damaged after its durable part the way a power
cut mid-write leaves it: cut at a random byte, or its last page torn (tests.support.powercut,
the journal's own power-cut helpers). After each cut the journal opens and verifies, holds
every record the daemon had published to a WATCH client before the cut (it publishes only
after the commit returned), the daemon restarts on it with fresh devices, and the round that
was live comes back held. CI makes 12 cuts; ``CARDD_FULL=1`` 100; more (up to three times as
many) while fewer than a quarter of them landed inside a commit (a kill between two commits
leaves no unsynced bytes to damage); at least one must have (on a loaded machine the kills land
between commits more often; the journal's own power-cut test, whose writer commits back to back,
damages about half of its cuts)."""
from __future__ import annotations

import json
import os
import random
import socket
import threading
import time
from pathlib import Path
from typing import Any

import pytest

from cardd.journal import Journal
from simulators.rig import SimulatedTable
from tests.daemon.daemon_rig import (Client, Daemon, open_and_bet, remove, shuffle_and_load, state_dir,
                                     write_config)
from tests.support.powercut import Committed, cut_wal, wal_position

FULL = os.environ.get("CARDD_FULL") == "1"
CUTS = 100 if FULL else 12


class Watcher(threading.Thread):
    """A WATCH client: every EVENT the daemon published to it, until the connection ends."""

    def __init__(self, path: Path) -> None:
        super().__init__(daemon=True)
        self.client = Client(path)
        reply = self.client.request({"class": "WATCH"})
        assert reply["class"] == "ACK", reply
        self.events: list[dict[str, Any]] = list(self.client.events)

    def run(self) -> None:
        try:
            for line in self.client.stream:
                event = json.loads(line)
                if event["class"] == "EVENT":
                    self.events.append(event)
        except (OSError, ValueError):
            pass  # the daemon was killed mid-line: what came whole was published
        finally:
            self.client.close()


def check_published(journal: Journal, published: list[dict[str, Any]], what: str) -> None:
    assert journal.verify().ok, what
    if not published:
        return
    last = published[-1]["seq"]
    assert journal.last_seq >= last, f"{what}: seq {last} was published, the journal ends at {journal.last_seq}"
    records = {r.seq: r for r in journal.query(seq_from=published[0]["seq"], seq_to=last, limit=None)}
    for event in published:
        record = records.get(event["seq"])
        assert record is not None and (record.kind, record.reason, record.data) == \
            (event["kind"], event["reason"], event["data"]), f"{what}: published {event}, journaled {record}"


@pytest.mark.soak
@pytest.mark.timeout(3600 if FULL else 600)
def test_power_cuts_while_dealing_lose_nothing_published(capsys: pytest.CaptureFixture[str]) -> None:
    rng = random.Random(20261123)
    directory = state_dir()
    path, sock = directory / "journal.sqlite3", directory / "cardd.sock"
    damaged: list[str] = []
    published_total = 0
    try:
        cut = 0
        while True:
            with SimulatedTable.over_ptys() as sim:
                def deal(n: int) -> None:
                    sim.shoe.call(sim.shoe.device.deal, n)

                daemon = Daemon(["--config", str(write_config(directory, sim.shoe.url, sim.shuffler.url))], sock)
                client = daemon.client()
                if cut > 0:  # back from the last cut: a round that was live is held
                    round_ = client.state()["round"]
                    assert round_ is not None, cut
                    live = round_["state"] not in ("complete", "void")  # the cards may have finished it first
                    assert not live or round_["held"] is not None, (cut, round_)
                    if cut >= 3 * CUTS or (cut >= CUTS and len(damaged) >= CUTS // 4):
                        client.close()
                        assert daemon.stop()[0] == 0
                        break
                    if live:
                        client.ok("redeal")
                    client.ok("void_shoe")
                shuffle_and_load(client, lambda: sim.hand_off(1.0), deal)
                for alarm in client.state()["alarms"]:  # the fresh shoe held none of the cut shoe's cards
                    if alarm["reason"] == "SHOE_COUNT_MISMATCH":  # (when its Status came before the void)
                        client.ok("clear_alarm", alarm_id=alarm["id"])
                open_and_bet(client)
                watcher = Watcher(sock)
                watcher.start()
                cards = rng.randint(20, 80)
                deal(cards)  # returns at once: the shoe deals them on its own loop
                # the cut comes while they pour in: after a random number of them were published
                until = len(watcher.events) + rng.randint(1, cards // 2)
                deadline = time.monotonic() + 10
                while len(watcher.events) < until and time.monotonic() < deadline:
                    time.sleep(0.0005)
                daemon.kill()  # the power goes: the daemon and the devices at once
            client.close()
            watcher.join(10)
            published_total += len(watcher.events)
            mx_frame, salts = wal_position(path)
            Path(f"{path}-shm").unlink()  # a reboot loses the shared memory
            committed = Committed(watcher.events[-1]["seq"] if watcher.events else 0, mx_frame, bytes.fromhex(salts))
            done = cut_wal(Path(f"{path}-wal"), committed, rng, tear=cut % 2 == 1)
            if done is not None:
                damaged.append(done)
            with Journal.open(path) as journal:
                check_published(journal, watcher.events, f"cut {cut} ({done or 'WAL untouched'})")
            cut += 1
        assert damaged, f"none of {cut} cuts found unsynced WAL bytes to damage"
        with capsys.disabled():
            print(f"\n{cut} power cuts on the daemon: {len(damaged)} damaged unsynced WAL bytes, "
                  f"{published_total} published records all kept")
    finally:
        remove(directory)
