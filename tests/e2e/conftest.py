"""Fixtures of the end-to-end tests: the same test runs over the pty and the pyusb path, and
no test may leave a thread, an fd or a port behind."""
from __future__ import annotations

import asyncio
from typing import Any, Awaitable, Callable

import pytest

from simulators.device import SimulatedDevice
from simulators.endpoint import Endpoint

from tests.e2e.e2e_rig import PATHS, Host, make_endpoint, open_host


@pytest.fixture(autouse=True)
def _no_leaks(no_leaks):
    """Simulator threads, host driver threads, ptys and ports are all gone after each test
    (the check itself is tests/conftest.py's)."""
    yield


@pytest.fixture(params=PATHS)
def link_path(request) -> str:
    return request.param


@pytest.fixture
def e2e(link_path):
    """``e2e(device, body, **endpoint_kwargs)``: run ``body(endpoint, host)`` over the chosen path."""
    def run(device: SimulatedDevice, body: Callable[[Endpoint, Host], Awaitable[None]], **kwargs: Any) -> None:
        endpoint, target = make_endpoint(link_path, device, **kwargs)

        async def main() -> None:
            host = await open_host(**target())
            try:
                await body(endpoint, host)
            finally:
                await host.conn.close()

        with endpoint:
            asyncio.run(main())
    return run
