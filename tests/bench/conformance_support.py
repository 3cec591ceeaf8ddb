"""The conformance suite run in this process against a simulator behind a real pty, and what
each fault switch that breaks a requirement is to make fail (docs/bench.md, "The conformance list")."""
from __future__ import annotations

import asyncio

from cryptography.hazmat.primitives.asymmetric.ed25519 import Ed25519PrivateKey

from cardd.bench.conformance import CheckResult, Outcome, run_suite, simulator_under_test
from firmware_bridge.handshake2 import raw_public_key
from simulators.faults import Faults
from simulators.protocol2 import Protocol2
from simulators.pty_endpoint import PtyEndpoint
from simulators.shoe import SimulatedShoe
from simulators.shuffler import SimulatedShuffler

#: heartbeats sooner than the default second: the heartbeat check ends sooner, nothing else changes
HEARTBEAT_S = 0.3

#: switch (with what it needs to show) -> (device, protocol, the checks it makes fail)
BREAKING: dict[str, tuple[str, str, tuple[str, ...]]] = {
    "legacy_1_0": ("shuffler", "1.1", ("3.3-request-ids", "3.2-events-kept")),
    "no_heartbeat": ("shuffler", "1.1", ("3-heartbeat",)),
    "flapping_ident": ("shuffler", "1.1", ("3-hello-ident",)),
    "status_flood": ("shuffler", "1.1", ("3.1-status-budget",)),
    "unknown_key": ("shoe", "2.0", ("9-unknown-key",)),
    "cloned_serial": ("shoe", "2.0", ("9-cloned-serial",)),
    "forged_tag": ("shoe", "2.0", ("7.3-tagged",)),
    "replayed_capture": ("shoe", "2.0", ("9-replayed-capture",)),
    "downgrade_offer": ("shoe", "2.0", ("9-downgrade",)),
    "rogue_host": ("shoe", "2.0", ("8-enrolled-host",)),
    "accept_any_proof": ("shoe", "2.0", ("8-rogue-host-proof",)),
    "silent_overflow event_buffer=2": ("shoe", "1.1", ("3.2-overflow",)),
}


def run_against(device: str, protocol: str, faults: str = "") -> list[CheckResult]:
    """Every requirement against a simulated ``device`` speaking ``protocol``, enrolled with the
    suite's host, its fault switches ``faults`` on."""
    host = Ed25519PrivateKey.generate()
    kind = SimulatedShoe if device == "shoe" else SimulatedShuffler
    sim = kind(faults=Faults.parse(faults), heartbeat_s=HEARTBEAT_S)
    protocol2 = Protocol2(enrolled_host_key=raw_public_key(host.public_key())) if protocol == "2.0" else None
    with PtyEndpoint(sim, protocol2=protocol2) as endpoint:
        dut = simulator_under_test(endpoint, endpoint.url, host)
        dut.protocol = protocol
        return asyncio.run(run_suite(dut))


def ids(results: list[CheckResult], outcome: Outcome) -> set[str]:
    return {r.requirement.id for r in results if r.outcome is outcome}


def shown(results: list[CheckResult]) -> str:
    return "\n".join(r.line() for r in results if r.outcome is not Outcome.PASS)
