"""Fixtures of the end-to-end tests: the same test runs over the pty and the pyusb path, and
no test may leave a thread, an fd or a port behind."""
from __future__ import annotations

import asyncio
import gc
import os
import threading
from typing import Any, Awaitable, Callable

import pytest

from e2e_rig import PATHS, Host, make_endpoint, open_host
from simulators.device import SimulatedDevice
from simulators.endpoint import Endpoint


def _fds() -> set[str]:
    return set(os.listdir("/proc/self/fd"))


@pytest.fixture(autouse=True)
def no_leaks():
    """Simulator threads, host driver threads, ptys and ports are all gone after each test.
    (The same check as tests/drivers/conftest.py; a shared tests/conftest.py would hold one.)"""
    gc.collect()
    threads, fds = set(threading.enumerate()), _fds()
    yield
    gc.collect()
    assert not set(threading.enumerate()) - threads, f"leaked threads: {set(threading.enumerate()) - threads}"
    assert _fds() <= fds, f"leaked fds: {sorted(_fds() - fds)}"


@pytest.fixture(params=PATHS)
def link_path(request) -> str:
    return request.param


@pytest.fixture
def e2e(link_path):
    """``e2e(device, body, **endpoint_kwargs)``: run ``body(endpoint, host)`` over the chosen path."""
    def run(device: SimulatedDevice, body: Callable[[Endpoint, Host], Awaitable[None]], **kwargs: Any) -> None:
        endpoint, transport = make_endpoint(link_path, device, **kwargs)

        async def main() -> None:
            host = await open_host(transport())
            try:
                await body(endpoint, host)
            finally:
                await host.session.close()

        with endpoint:
            asyncio.run(main())
    return run
