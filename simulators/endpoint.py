"""Where a simulated device meets a real transport: its own thread, asyncio loop, Link and wire.

An :class:`Endpoint` runs one device (:mod:`simulators.shuffler`, :mod:`simulators.shoe`)
behind the bridge's :class:`~firmware_bridge.link.Link` (the same class the host uses) and a
:class:`~simulators.wire.FaultyWire`. Subclasses move the raw bytes: :class:`PtyEndpoint`
(a pseudo-terminal the host opens with pyserial) and :class:`UsbEndpoint`
(:mod:`simulators.usb_backend`, the host's pyusb core reads it). Host code runs unchanged.

The device's link waits for the host's RESET at power-on (nothing is written before a host
is there); after a reboot the device starts the link itself with RESET, as firmware does.
Every method called from another thread (the test's) is marshalled onto the device's loop.
"""
from __future__ import annotations

import abc
import asyncio
import threading
from collections import deque
from dataclasses import replace
from typing import Any, Callable, TypeVar

import structlog

from firmware_bridge.link import Link, LinkConfig, LinkEvent, LinkState, discard_outcome
from firmware_bridge.messages import Heartbeat, Message, MessageDecodeError, Refused, decode, encode

from simulators.device import SimulatedDevice
from simulators.wire import FaultyWire

log = structlog.get_logger(__name__)
T = TypeVar("T")

START_TIMEOUT = 5.0
#: the RESET nonce of a device with the same_nonce fault, at every boot
SAME_NONCE = b"\x00\x00\x00\x01"


class Endpoint(abc.ABC):
    def __init__(self, device: SimulatedDevice, *, link_config: LinkConfig | None = None) -> None:
        self.device = device
        self.link_config = link_config or LinkConfig()
        self.loop: asyncio.AbstractEventLoop | None = None
        self.link: Link | None = None
        self.wire: FaultyWire | None = None
        self._thread: threading.Thread | None = None
        self._unacked: deque[asyncio.Future] = deque()
        self._stopped: asyncio.Event | None = None
        self.link_events: list[tuple[str, str]] = []

    # ---- life (any thread) ---------------------------------------------------------

    def start(self) -> "Endpoint":
        """Start the device's thread and loop; returns once the transport is ready."""
        ready = threading.Event()
        failure: list[BaseException] = []
        self._thread = threading.Thread(target=self._run, args=(ready, failure), daemon=True,
                                        name=f"sim-{self.device.ROLE.name.lower()}-{self.device.serial}")
        self._thread.start()
        if not ready.wait(START_TIMEOUT) or failure:
            self.stop()
            raise RuntimeError(f"simulator {self.device.serial} did not start: {failure[0] if failure else 'timeout'}")
        return self

    def stop(self) -> None:
        """Stop the device, close the transport and join the thread; idempotent."""
        if self.loop is not None and self._stopped is not None and not self.loop.is_closed():
            try:
                self.loop.call_soon_threadsafe(self._stopped.set)
            except RuntimeError:
                pass  # the loop already ended
        if self._thread is not None:
            self._thread.join(START_TIMEOUT)
            self._thread = None

    def __enter__(self) -> "Endpoint":
        return self.start()

    def __exit__(self, *exc: object) -> None:
        self.stop()

    def call(self, fn: Callable[..., T], *args: Any, timeout: float = START_TIMEOUT) -> T:
        """Run ``fn(*args)`` on the device's loop (awaiting it if it is a coroutine function)."""
        assert self.loop is not None, "endpoint not started"

        async def run() -> Any:
            result = fn(*args)
            return await result if asyncio.iscoroutine(result) else result

        return asyncio.run_coroutine_threadsafe(run(), self.loop).result(timeout)

    # ---- for tests, the bench and the CLI ------------------------------------------

    def state(self) -> dict[str, Any]:
        """Device state plus link and wire counters."""
        def collect() -> dict[str, Any]:
            link = self.link
            return self.device.state() | {
                "link_state": link.state.value if link else None,
                "link_stats": link.stats if link else None,
                "wire": replace(self.wire.stats) if self.wire else None,  # a copy, like link.stats
                "link_events": list(self.link_events),
            }
        return self.call(collect)

    def reset(self) -> None:
        """Device back to factory defaults (faults, counters, cards, firmware), then running."""
        def reset_and_start() -> None:
            self.device.reset()
            self.device.start()
        self.call(reset_and_start)

    def set_faults(self, **changes: Any) -> None:
        self.call(lambda: self.device.set_faults(**changes))

    # ---- the thread ----------------------------------------------------------------

    def _run(self, ready: threading.Event, failure: list[BaseException]) -> None:
        try:
            asyncio.run(self._main(ready))
        except BaseException as exc:  # reported to start(), never a silent dead thread
            failure.append(exc)
            log.exception("sim_endpoint_crashed", device=self.device.serial)
            ready.set()

    async def _main(self, ready: threading.Event) -> None:
        self.loop = asyncio.get_running_loop()
        self._stopped = asyncio.Event()
        self.wire = FaultyWire(lambda: self.device.faults, self._write_raw, self.loop)
        self._open_raw()
        self._new_link()
        self.device.attach(self._emit, flush=self._flush, on_reboot=self._rebooted, disconnect=self._disconnect)
        self.device.start()
        ready.set()
        try:
            await self._stopped.wait()
        finally:
            self.device.close()
            if self.link is not None:
                self.link.close()
            self.wire.close()
            self._close_raw()

    def _new_link(self) -> None:
        if self.link is not None:
            self.link.close()
        self._unacked.clear()
        assert self.wire is not None, "the wire is made before the first link"
        self.link = Link(self.wire.to_host, self._payload, self._link_event, self.link_config,
                         name=f"sim-{self.device.serial}")

    def _link_event(self, event: LinkEvent, detail: str) -> None:
        self.link_events.append((event.value, detail))

    # ---- device side ---------------------------------------------------------------

    def _payload(self, payload: bytes) -> None:
        try:
            msg = decode(payload)
        except MessageDecodeError as exc:
            log.warning("sim_bad_message", device=self.device.serial, error=str(exc))
            self._emit(Refused(payload[0] if payload else 0, str(exc)[:255]))
            return
        for reply in self.device.handle(msg):
            self._emit(reply)

    def _emit(self, msg: Message) -> None:
        link = self.link
        if link is None or (isinstance(msg, Heartbeat) and link.state is not LinkState.UP):
            return  # no proof of life into a link nobody listens on
        future = link.send(encode(msg))
        future.add_done_callback(discard_outcome)  # a message lost to a reset is the device's loss, not an error
        self._unacked.append(future)
        while self._unacked and self._unacked[0].done():
            self._unacked.popleft()

    async def _flush(self, limit: int = 0) -> None:
        """Wait until at most ``limit`` emitted messages are unacknowledged (0: all delivered)."""
        while len(self._unacked) > limit:
            head = self._unacked[0]
            await asyncio.wait([head])
            if self._unacked and self._unacked[0] is head:
                self._unacked.popleft()

    def _rebooted(self) -> None:
        self._new_link()
        assert self.link is not None
        nonce = SAME_NONCE if self.device.faults.same_nonce else None
        self.link.reset("device reboot", nonce=nonce)

    async def _disconnect(self, seconds: float) -> None:
        log.info("sim_disconnect", device=self.device.serial, seconds=seconds)
        self._unplug()
        self._new_link()
        await asyncio.sleep(seconds)
        self._replug()

    def _from_host(self, data: bytes) -> None:
        assert self.wire is not None
        damaged = self.wire.from_host(data)
        if damaged and self.link is not None:
            self.link.bytes_received(damaged)

    # ---- the transport (subclasses) ------------------------------------------------

    @abc.abstractmethod
    def _open_raw(self) -> None: ...

    @abc.abstractmethod
    def _close_raw(self) -> None: ...

    @abc.abstractmethod
    def _write_raw(self, data: bytes) -> None: ...

    @abc.abstractmethod
    def _unplug(self) -> None: ...

    @abc.abstractmethod
    def _replug(self) -> None: ...
