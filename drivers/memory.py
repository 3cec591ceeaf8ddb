"""``mem://NAME``: an in-memory port for tests and in-process simulators. A device side listens on a
name (:func:`listen`) and is handed its end of every connection; impairment is a wire the caller
injects (drivers never import simulators). docs/architecture.md, "The in-memory port"."""
from __future__ import annotations

import asyncio
from typing import Callable

from drivers.errors import BadURL, DeviceNotFound, PortClosed, LinkLost
from drivers.transport import Transport, TransportListener, deliver
from drivers.urls import DeviceURL, parse_url

Deliver = Callable[[bytes], None]
#: given the delivery towards the other end, the write that feeds it (damaging, delaying, batching ...)
Wire = Callable[[Deliver], Deliver]


class MemoryTransport(Transport):
    """One end of an in-memory connection. Made from a ``mem://NAME`` URL (or any registered
    scheme's ``SCHEME://NAME``) it is a host end that connects to the line listening on NAME when opened; :func:`memory_pair` and a line's accept
    make ends already joined to their peer."""

    def __init__(self, url: str | DeviceURL) -> None:
        parsed = parse_url(url)  # mem://NAME, or NAME under a scheme a test registered to reach a line
        if parsed.scheme == "mem" and parsed.params:
            raise BadURL(parsed.text, "an in-memory port is mem://NAME, with no parameters")
        self.url = parsed.text
        self._name = parsed.name or ""
        self._peer: MemoryTransport | None = None
        self._write: Deliver | None = None  # towards the peer, through the wire if any
        self._listener: TransportListener | None = None

    async def open(self, listener: TransportListener) -> None:
        if self._peer is None:  # a host end made from the URL: reach the line listening on its name
            line = _lines.get(self._name)
            if line is None:
                raise DeviceNotFound(self.url, f"nothing listens on mem://{self._name} (drivers.memory.listen)")
            line.connect(self)
        self.attach(listener)

    def attach(self, listener: TransportListener) -> None:
        """Open an end already joined to its peer, at once (what a line's accept does with its end)."""
        if self._peer is None:
            raise PortClosed(self.url, "not joined to another end")
        self._listener = listener

    def write(self, data: bytes) -> None:
        if self._listener is None or self._write is None:
            raise PortClosed(self.url, "closed")
        self._write(data)

    def close(self) -> None:
        self._end(None)

    @property
    def is_open(self) -> bool:
        return self._listener is not None

    # ---- between the two ends ---------------------------------------------------------------

    def _join(self, peer: MemoryTransport, wire: Wire | None) -> None:
        self._peer = peer
        loop = asyncio.get_running_loop()

        def to_peer(data: bytes) -> None:
            loop.call_soon(peer._receive, bytes(data))

        self._write = wire(to_peer) if wire is not None else to_peer

    def _receive(self, data: bytes) -> None:
        if self._listener is not None:
            deliver(self._listener, data, self.url)

    def _end(self, exc: Exception | None) -> None:
        listener, self._listener, self._write = self._listener, None, None
        peer, self._peer = self._peer, None
        if peer is not None:  # the other side notices on a later turn, as after a real unplug
            asyncio.get_running_loop().call_soon(peer._end, LinkLost(peer.url, "the other end hung up"))
        if listener is not None:
            listener.connection_lost(exc)


def _joined(url_a: str, url_b: str, a_to_b: Wire | None, b_to_a: Wire | None) -> tuple[MemoryTransport, MemoryTransport]:
    a, b = MemoryTransport(url_a), MemoryTransport(url_b)
    a._join(b, a_to_b)
    b._join(a, b_to_a)
    return a, b


def memory_pair(url: str = "mem://pair", *, a_to_b: Wire | None = None,
                b_to_a: Wire | None = None) -> tuple[MemoryTransport, MemoryTransport]:
    """Two joined, unopened ends (call on a running loop); open each with its listener."""
    return _joined(url, url, a_to_b, b_to_a)


class MemoryLine:
    """The device side of ``mem://NAME``: every host that opens the URL gets a fresh connection,
    whose device end goes to ``accept``."""

    def __init__(self, name: str, accept: Callable[[MemoryTransport], object], *,
                 to_host: Wire | None = None, to_device: Wire | None = None) -> None:
        self.url = f"mem://{name}"
        parse_url(self.url)  # BadURL for a name no URL could carry
        self.name = name
        self._accept, self._to_host, self._to_device = accept, to_host, to_device
        self.device_ends: list[MemoryTransport] = []  # one per connection, the latest last

    def connect(self, host_end: MemoryTransport) -> None:
        device_end = MemoryTransport(self.url)
        host_end._join(device_end, self._to_device)
        device_end._join(host_end, self._to_host)
        self.device_ends.append(device_end)
        self._accept(device_end)

    def close(self) -> None:
        """Stop listening on the name and hang up every connection."""
        if _lines.get(self.name) is self:
            del _lines[self.name]
        for end in self.device_ends:
            end.close()


_lines: dict[str, MemoryLine] = {}


def listen(name: str, accept: Callable[[MemoryTransport], object], *,
           to_host: Wire | None = None, to_device: Wire | None = None) -> MemoryLine:
    """Listen on ``mem://name`` (replacing a line listening there before)."""
    line = MemoryLine(name, accept, to_host=to_host, to_device=to_device)
    _lines[name] = line
    return line
