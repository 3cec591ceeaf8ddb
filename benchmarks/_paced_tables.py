"""A floor's tables as the floor receives them, cheaply: the load for cardfloor's benchmark.

    .venv/bin/python benchmarks/_paced_tables.py --broker mqtt://127.0.0.1:1883 --tables 1000 --duration 120
    .venv/bin/python benchmarks/_paced_tables.py --broker URL --tables 1000 --backlog-hours 1

Each table's journal is :class:`cardd.bench.tables.TableStory`'s (what ``cardbench floor``
journals: shoes, rounds, faults, at a real table's pace), and each commit goes out as the table's
export sends it: its records as :func:`cardd.export.payloads.event_payload` makes them (the export
chain, the default card filter), one events message a commit, the state topic when its summary
changes (and every 60 s), an anchor a minute, a retained status at the start and an offline one at
the end. What is left out is what makes a simulated table heavy: its SQLite journal and cursor and
an exporter thread and connection each (``cardbench floor`` measures those). All tables publish
from this one process on one MQTT connection, so a thousand of them take a few per cent of a core
and leave the machine to cardfloor and PostgreSQL, which is what the benchmark measures.

Each record's ``time`` is the moment it was made here, just before it is published: the table's
commit time, which cardfloor's latencies are measured from.

With ``--backlog-hours H`` every table first makes H hours of records (their times in the past,
``"replay": true``), then all of them are published at once, in messages of up to 500 records as
an exporter sends a backlog: the drain of a floor-wide outage. It prints ``backlog N records``
once they are made and ``published`` once the broker has them all, then goes on at pace.
"""
from __future__ import annotations

import argparse
import heapq
import random
import signal
import sys
import threading
import time
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

import paho.mqtt.client as mqtt  # noqa: E402
from paho.mqtt.enums import CallbackAPIVersion  # noqa: E402

from cardd.bench.tables import TableStory  # noqa: E402
from cardd.export import payloads  # noqa: E402
from cardd.export.payloads import CHAIN_START, EVENTS_MAX_RECORDS  # noqa: E402
from cardd.export.topics import ANCHOR, EVENTS, STATE, STATUS, topic  # noqa: E402
from cardd.journal.records import GENESIS_HASH, Record, body_bytes, canonical_json, record_hash, round_of  # noqa: E402

STATE_REFRESH_S, ANCHOR_EVERY_S = 60.0, 60.0
RELEASE = "paced tables"


class PacedTable:
    """One table: its story, its journal's seq and hash, its export chain."""

    def __init__(self, site: str, name: str, seed: int, fault_rate: float) -> None:
        self.site, self.name = site, name
        self.story = TableStory(random.Random(seed), fault_rate=fault_rate)
        self.steps = self.story.steps()
        self.seq, self.hash, self.chain = 0, GENESIS_HASH, CHAIN_START
        self.state_sent: bytes | None = None
        self.state_at = self.anchor_at = -1e9
        self.last: Record | None = None
        self.raised_ns: dict[int, int] = {}

    def records(self, step: Any, ts_ns: int) -> list[Record]:
        made = []
        for entry in step.entries:
            self.seq += 1
            data = canonical_json(dict(entry.data), "data")
            round_id = round_of(entry.data)
            digest = record_hash(self.hash, body_bytes(self.seq, ts_ns, entry.kind, entry.source, entry.reason,
                                                      entry.severity, entry.who, round_id, data))
            made.append(Record(self.seq, ts_ns, entry.kind, entry.source, entry.reason, entry.severity, entry.who,
                               round_id, data, self.hash, digest))
            self.hash = digest
        return made

    def events(self, records: list[Record], *, replay: bool) -> list[bytes]:
        """The events messages for ``records`` (at most EVENTS_MAX_RECORDS each)."""
        bodies = []
        for record in records:
            body, self.chain = payloads.event_payload(record, site=self.site, table=self.name, card_data="none",
                                                      replay=replay, prev=self.chain)
            bodies.append(body)
        if records:
            self.last = records[-1]
        return [payloads.events_payload(bodies[i:i + EVENTS_MAX_RECORDS], site=self.site, table=self.name)
                for i in range(0, len(bodies), EVENTS_MAX_RECORDS)]

    def state(self, summary: dict[str, Any], now: float) -> bytes | None:
        export = {"delivered_through": self.seq, "backlog": 0, "oldest_undelivered_s": None}
        open_ids = {alarm["id"] for alarm in summary["alarms"]}  # since: first seen open, as the daemon's
        for alarm in open_ids - self.raised_ns.keys():
            self.raised_ns[alarm] = time.time_ns()
        for alarm in self.raised_ns.keys() - open_ids:
            del self.raised_ns[alarm]
        summary = {**summary, "alarm_since_ns": dict(self.raised_ns)}
        timeless = payloads.state_payload(site=self.site, table=self.name, ts_ns=0, export=export, **summary)
        if timeless == self.state_sent and now - self.state_at < STATE_REFRESH_S:
            return None
        self.state_sent, self.state_at = timeless, now
        return payloads.state_payload(site=self.site, table=self.name, ts_ns=time.time_ns(), export=export, **summary)

    def anchor(self, now: float) -> bytes | None:
        if self.last is None or now - self.anchor_at < ANCHOR_EVERY_S:
            return None
        self.anchor_at = now
        return payloads.anchor_payload(site=self.site, table=self.name, seq=self.last.seq, chain_hash=self.last.hash,
                                       export_hash=self.chain, ts_ns=self.last.ts_ns)


class Publisher:
    """One paho connection for every table, QoS 1, with no cap on messages in flight or queued."""

    def __init__(self, url: str) -> None:
        host, port = url.removeprefix("mqtt://").rsplit(":", 1)
        self.client = mqtt.Client(CallbackAPIVersion.VERSION2, client_id="paced-tables", protocol=mqtt.MQTTv5)
        self.client.max_inflight_messages_set(5000)
        self.client.max_queued_messages_set(0)
        self.client.connect(host, int(port), keepalive=30)
        self.client.loop_start()
        self.unacked: list[mqtt.MQTTMessageInfo] = []

    def publish(self, leaf_topic: str, payload: bytes, *, retain: bool = False) -> None:
        self.unacked.append(self.client.publish(leaf_topic, payload, qos=1, retain=retain))
        if len(self.unacked) > 20_000:
            self.settle()

    def settle(self) -> None:
        for info in self.unacked:
            info.wait_for_publish(120)
        self.unacked = []

    def close(self) -> None:
        self.settle()
        self.client.loop_stop()
        self.client.disconnect()


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--broker", required=True)
    ap.add_argument("--tables", type=int, default=100)
    ap.add_argument("--site", default="bench")
    ap.add_argument("--duration", type=float, default=None, help="seconds at pace (default: until SIGTERM)")
    ap.add_argument("--backlog-hours", type=float, default=0.0)
    ap.add_argument("--fault-rate", type=float, default=0.02)
    ap.add_argument("--seed", type=int, default=1)
    args = ap.parse_args()
    stop = threading.Event()
    signal.signal(signal.SIGTERM, lambda *_: stop.set())
    signal.signal(signal.SIGINT, lambda *_: stop.set())
    width = max(4, len(str(args.tables)))
    tables = [PacedTable(args.site, f"t{n:0{width}d}", args.seed * 100_003 + n, args.fault_rate)
              for n in range(1, args.tables + 1)]
    out = Publisher(args.broker)
    for table in tables:
        out.publish(topic(table.site, table.name, STATUS), payloads.status_payload(
            site=table.site, table=table.name, session=1, release=RELEASE, rules_name="casino-000",
            rules_sha256="0" * 64, devices={"shoe": "sim://shoe", "shuffler": "sim://shuffler"},
            ts_ns=time.time_ns()), retain=True)
    out.settle()
    rng = random.Random(args.seed)
    due: list[tuple[float, int, Any]] = []
    if args.backlog_hours:
        began, behind = time.monotonic(), []
        start_ns = time.time_ns() - int(args.backlog_hours * 3600e9)
        total = 0
        for index, table in enumerate(tables):
            at_ns, made = start_ns, []
            while True:
                step = next(table.steps)
                at_ns += int(step.delay_s * 1e9)
                if at_ns >= time.time_ns():
                    heapq.heappush(due, (time.monotonic() + rng.uniform(0, 3), index, step))
                    break
                made += table.records(step, at_ns)
            total += len(made)
            behind.append((table, table.events(made, replay=True)))
        print(f"backlog {total} records of {len(tables)} tables made in {time.monotonic() - began:.0f} s", flush=True)
        began = time.monotonic()
        for table, messages in behind:
            for message in messages:
                out.publish(topic(table.site, table.name, EVENTS), message)
        del behind
        out.settle()
        print(f"published in {time.monotonic() - began:.1f} s", flush=True)
    else:
        for index, table in enumerate(tables):
            heapq.heappush(due, (time.monotonic() + rng.uniform(0, 3), index, next(table.steps)))
    print(f"{len(tables)} tables at pace", flush=True)
    ends = None if args.duration is None else time.monotonic() + args.duration
    records = 0
    while not stop.is_set() and (ends is None or time.monotonic() < ends):
        at, index, step = heapq.heappop(due)
        wait = at - time.monotonic()
        if wait > 0 and stop.wait(wait):
            break
        table = tables[index]
        made = table.records(step, time.time_ns())
        records += len(made)
        now = time.monotonic()
        for message in table.events(made, replay=False):
            out.publish(topic(table.site, table.name, EVENTS), message)
        state = table.state(step.summary, now)
        if state is not None:
            out.publish(topic(table.site, table.name, STATE), state, retain=True)
        anchor = table.anchor(now)
        if anchor is not None:
            out.publish(topic(table.site, table.name, ANCHOR), anchor, retain=True)
        nxt = next(table.steps)
        heapq.heappush(due, (at + nxt.delay_s, index, nxt))
        if len(out.unacked) > 2000:
            out.unacked = [i for i in out.unacked if not i.is_published()]
    for table in tables:
        out.publish(topic(table.site, table.name, STATUS),
                    payloads.will_payload(site=table.site, table=table.name, session=1), retain=True)
    out.close()
    print(f"stopped: {records} records at pace", flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
