"""A simulated device behind the pyusb simulator backend: the host's USB driver finds it with
``usb.core.find(backend=...)`` and talks to it through pyusb's own core.

The VID:PID come from the one table of known devices (:mod:`drivers.known_devices`);
a ``disconnect_for`` fault unplugs the device from the backend and plugs it back in.
"""
from __future__ import annotations

from typing import Any

from drivers.known_devices import by_role

from simulators.endpoint import D, Endpoint
from simulators.usb_backend import SimUsbBackend, SimUsbDevice


class UsbEndpoint(Endpoint[D]):
    def __init__(self, device: D, *, backend: SimUsbBackend | None = None, **kwargs: Any) -> None:
        super().__init__(device, **kwargs)
        self.backend = backend or SimUsbBackend()
        known = by_role(device.ROLE.name.lower())
        self.vid, self.pid = known.vid, known.pid
        self.usb: SimUsbDevice | None = None

    @property
    def url(self) -> str:
        return f"usb://{self.vid:04x}:{self.pid:04x}?serial={self.device.serial}"

    def host_wrote(self, data: bytes) -> None:
        """Called by the backend on the host's writer thread: hop onto the device's loop."""
        if self.loop is None:
            return  # not started: the bytes reach nobody, like a powered-off device
        try:
            self.loop.call_soon_threadsafe(self._from_host, bytes(data))
        except RuntimeError:
            pass  # the simulator is stopped (its loop closed): the same

    def _open_raw(self) -> None:
        self.usb = self.backend.add_device(self, vid=self.vid, pid=self.pid, serial=self.device.serial,
                                           product=f"{self.device.MODEL} ({self.device.ROLE.name.lower()})")

    def _close_raw(self) -> None:
        if self.usb is not None:
            self.backend.remove_device(self.usb)
            self.usb = None

    def _write_raw(self, data: bytes) -> None:
        if self.usb is not None:
            self.usb.send_to_host(data)

    def _unplug(self) -> None:
        if self.usb is not None:
            self.usb.unplug()

    def _replug(self) -> None:
        if self.usb is not None:
            self.usb.replug()
