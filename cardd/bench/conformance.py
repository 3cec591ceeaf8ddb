"""``cardbench conformance URL``: docs/protocol.md's requirements checked against a device, real or
simulated, by the suite acting as a host at the frame level (docs/bench.md, "cardbench
conformance"). Each requirement (:mod:`cardd.bench.conformance_requirements`) is one result:
PASS, FAIL with the bytes that showed it, BLOCKED (what it needs failed, or a person must act),
or not applicable to the device's protocol."""
from __future__ import annotations

import asyncio
import enum
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from cryptography.hazmat.primitives.asymmetric.ed25519 import Ed25519PrivateKey

from cardd.bench import conformance_framing, conformance_messages, conformance_trust
from cardd.bench.conformance_requirements import REQUIREMENTS, Requirement
from cardd.bench.conformance_session import DeviceUnderTest, detect_protocol
from cardd.bench.conformance_wire import Blocked, Failed
from cardd.bench.junit import JUnitCase, write_cases
from core.errors import CarddError
from firmware_bridge.errors import ProtocolError
from firmware_bridge.handshake2 import raw_public_key

#: the longest one check may take before it counts as failed
CHECK_TIMEOUT = 30.0


class Outcome(enum.Enum):
    PASS = "PASS"
    FAIL = "FAIL"
    BLOCKED = "BLOCKED"
    NOT_APPLICABLE = "n/a"


@dataclass(frozen=True, slots=True)
class CheckResult:
    requirement: Requirement
    outcome: Outcome
    message: str
    data: bytes = b""
    seconds: float = 0.0

    def lines(self) -> list[str]:
        """The report's lines: the outcome, the section, the id and what was found; then the bytes."""
        r = self.requirement
        lines = [f"{self.outcome.value:7} §{r.section:5} {r.id:26} {self.message}"]
        if self.data:
            lines.append(f"{'':16}bytes: {self.data.hex(' ')}")
        return lines

    def line(self) -> str:
        return "\n".join(self.lines())


async def run_suite(dut: DeviceUnderTest, only: set[str] | None = None) -> list[CheckResult]:
    """Every requirement (or those in ``only``) against ``dut``, in the table's order."""
    if not dut.protocol:
        dut.protocol = await detect_protocol(dut)
    results = []
    try:
        for req in requirements():
            if only is not None and req.id not in only:
                continue
            results.append(await run_check(dut, req))
    finally:
        if dut.port is not None:
            dut.port.close()
            dut.port = None
    return results


async def run_check(dut: DeviceUnderTest, req: Requirement) -> CheckResult:
    if dut.protocol not in req.protocols:
        return CheckResult(req, Outcome.NOT_APPLICABLE, f"protocol {dut.protocol} (applies to {', '.join(req.protocols)})")
    loop = asyncio.get_running_loop()
    start = loop.time()
    if dut.port is not None and dut.port.lost is not None:  # the port went away in the last check: open it again
        dut.port.close()
        dut.port = None
    if dut.port is not None:
        dut.port.drop_pending()
    try:
        note = await asyncio.wait_for(req.run(dut), CHECK_TIMEOUT)
        outcome, message, data = Outcome.PASS, note, b""
    except Failed as exc:
        outcome, message, data = Outcome.FAIL, exc.message, exc.data
    except Blocked as exc:
        outcome, message, data = Outcome.BLOCKED, str(exc), b""
    except TimeoutError:
        outcome, message, data = Outcome.FAIL, f"no outcome within {CHECK_TIMEOUT:g} s", b""
    except (ProtocolError, ValueError) as exc:  # the device sent what the host's decoders refuse
        outcome, message, data = Outcome.FAIL, str(exc), b""
    await asyncio.sleep(0.05)  # what the check provoked settles before the next one starts
    return CheckResult(req, outcome, message, data, loop.time() - start)


#: the check modules, each adding its requirements to the table as it is imported, in this order
CHECK_MODULES = (conformance_framing, conformance_messages, conformance_trust)


def requirements() -> list[Requirement]:
    """Every requirement, in the order the suite runs them."""
    return list(REQUIREMENTS.values())


def passed(results: list[CheckResult]) -> bool:
    return not any(r.outcome is Outcome.FAIL for r in results)


def summary(results: list[CheckResult]) -> str:
    counts = {o: sum(r.outcome is o for r in results) for o in Outcome}
    return (f"{counts[Outcome.PASS]} passed, {counts[Outcome.FAIL]} failed, {counts[Outcome.BLOCKED]} blocked, "
            f"{counts[Outcome.NOT_APPLICABLE]} not applicable")


def write_junit(results: list[CheckResult], path: Path, seconds: float, device: str) -> None:
    """One testcase a requirement: classname ``protocol.md §section``, name its id."""
    cases = []
    for r in results:
        req = r.requirement
        failure = None
        if r.outcome is Outcome.FAIL:
            failure = r.message + (f"\nbytes: {r.data.hex(' ')}" if r.data else "")
        skipped = r.message if r.outcome in (Outcome.BLOCKED, Outcome.NOT_APPLICABLE) else None
        cases.append(JUnitCase(f"protocol.md §{req.section}", req.id, r.seconds, failure=failure, skipped=skipped,
                               failure_type="RequirementFailed", file=f"docs/protocol.md#{req.section}"))
    write_cases(cases, path, seconds, suite=f"cardbench conformance {device}")


def simulator_under_test(endpoint: Any, url: str, host_identity: Ed25519PrivateKey | None = None) -> DeviceUnderTest:
    """A DUT for a simulator running in this process (``simulators.endpoint.Endpoint``): its own
    key as the enrolled one, and a shoe's cards dealt by the suite's hands."""
    device = endpoint.device
    dut = DeviceUnderTest(url, device_key=raw_public_key(device.identity_key.public_key()),
                          enrolled_serial=device.serial)
    if host_identity is not None:
        dut.host_identity = host_identity
    if device.ROLE.name == "SHOE":
        dut.make_events = lambda: _deal(endpoint)
    return dut


async def _deal(endpoint: Any) -> None:
    from simulators.stack import full_shoe  # only a simulated shoe is dealt by the suite

    def load_and_deal() -> None:
        endpoint.device.load(full_shoe(1)[:6])
        endpoint.device.deal(4)
    await asyncio.get_running_loop().run_in_executor(None, endpoint.call, load_and_deal)


def run(dut: DeviceUnderTest, only: set[str] | None = None) -> tuple[list[CheckResult], float]:
    start = time.monotonic()
    try:
        results = asyncio.run(run_suite(dut, only))
    except Failed as exc:
        raise CarddError(f"{dut.url}: {exc.message}") from None
    return results, time.monotonic() - start
