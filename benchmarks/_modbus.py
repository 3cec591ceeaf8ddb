"""The comparison peer for benchmarks/link.py: pymodbus RTU over a socat pty pair.

The server runs in its own process (this file run as a script: ``python _modbus.py PTY``),
so client and server do not share a GIL, as the cardd host and the simulated shoe do not.
The registers are a pymodbus 3.16 SimDevice (the datastore classes it replaces print
deprecation warnings); the client is the blocking ``ModbusSerialClient``.
"""
from __future__ import annotations

import asyncio
import logging
import os
import shutil
import subprocess
import sys
import tempfile
import time
import warnings
from contextlib import contextmanager
from pathlib import Path
from typing import Iterator

from _procs import stop_process

BAUD = 115_200
REGISTERS = 10  # read_holding_registers(1, count=10, device_id=1): a typical small status read
DEVICE_ID = 1
START_TIMEOUT = 10.0


class ModbusPeerError(RuntimeError):
    """The pymodbus peer could not be set up (socat missing, server not answering)."""


def quiet() -> None:
    """Silence pymodbus' own logging and deprecation warnings: the bench prints only figures."""
    warnings.filterwarnings("ignore", category=DeprecationWarning)
    logging.getLogger("pymodbus").setLevel(logging.CRITICAL)


@contextmanager
def pty_pair() -> Iterator[tuple[str, str]]:
    """Two linked ptys from socat (what one end writes, the other end reads)."""
    if shutil.which("socat") is None:
        raise ModbusPeerError("socat not found: install it with `sudo apt-get install socat` "
                              "(the pymodbus comparison needs a pty pair between two processes)")
    tmp = tempfile.mkdtemp(prefix="cardd-bench-")
    a, b = os.path.join(tmp, "client"), os.path.join(tmp, "server")
    proc = subprocess.Popen(["socat", f"pty,raw,echo=0,link={a}", f"pty,raw,echo=0,link={b}"],
                            stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)
    try:
        deadline = time.monotonic() + START_TIMEOUT
        while not (os.path.exists(a) and os.path.exists(b)):
            if proc.poll() is not None or time.monotonic() > deadline:
                why = proc.stderr.read().decode() if proc.stderr else ""  # piped above: never None
                raise ModbusPeerError(f"socat did not make the pty pair: {why!r}")
            time.sleep(0.01)
        yield a, b
    finally:
        stop_process(proc)
        shutil.rmtree(tmp, ignore_errors=True)


@contextmanager
def server_process(port: str) -> Iterator[subprocess.Popen]:
    proc = subprocess.Popen([sys.executable, str(Path(__file__).resolve()), port],
                            stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)
    try:
        yield proc
    finally:
        stop_process(proc)


def round_trips(port: str, n: int, warmup: int) -> list[float]:
    """Seconds per ``read_holding_registers`` round trip, ``n`` of them after ``warmup``."""
    from pymodbus.client import ModbusSerialClient

    client = ModbusSerialClient(port=port, baudrate=BAUD, timeout=1, retries=0)
    if not client.connect():
        raise ModbusPeerError(f"pymodbus client could not open {port}")
    try:
        _wait_for_server(client)
        samples = []
        for i in range(warmup + n):
            start = time.perf_counter()
            reply = client.read_holding_registers(1, count=REGISTERS, device_id=DEVICE_ID)
            elapsed = time.perf_counter() - start
            if reply.isError() or len(reply.registers) != REGISTERS:
                raise ModbusPeerError(f"pymodbus read {i} failed: {reply}")
            if i >= warmup:
                samples.append(elapsed)
        return samples
    finally:
        client.close()


def _wait_for_server(client) -> None:
    """The server process opens its pty a moment after it starts: ask until it answers."""
    from pymodbus.exceptions import ModbusException

    deadline = time.monotonic() + START_TIMEOUT
    while True:
        try:
            if not client.read_holding_registers(1, count=REGISTERS, device_id=DEVICE_ID).isError():
                return
        except ModbusException:
            pass
        if time.monotonic() > deadline:
            raise ModbusPeerError(f"pymodbus server did not answer within {START_TIMEOUT}s")


def measure(n: int, warmup: int) -> list[float]:
    """Round trips of pymodbus' client against its own server process over a socat pty pair."""
    quiet()
    with pty_pair() as (client_port, server_port), server_process(server_port):
        return round_trips(client_port, n, warmup)


async def serve(port: str) -> None:
    from pymodbus.server import StartAsyncSerialServer
    from pymodbus.simulator import DataType, SimData, SimDevice

    registers = SimData(address=0, values=list(range(100)), datatype=DataType.REGISTERS)
    await StartAsyncSerialServer(SimDevice(id=DEVICE_ID, simdata=[registers]), port=port, baudrate=BAUD)


if __name__ == "__main__":
    quiet()
    asyncio.run(serve(sys.argv[1]))
