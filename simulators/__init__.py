"""The devices' side of the protocol: a simulated shuffler and a simulated shoe reader.

Device logic (:mod:`simulators.shuffler`, :mod:`simulators.shoe`) is transport-agnostic;
:mod:`simulators.pty_endpoint` and :mod:`simulators.usb_endpoint` put a device behind a real
pseudo-terminal or the pyusb backend, :mod:`simulators.rig` links a shuffler to a shoe, and
``python -m simulators`` runs one by hand. Importing this package registers the ``sim://``
URL scheme with the drivers (see :mod:`simulators.sim_url`). docs/simulators.md has the rest.
"""
from simulators.sim_url import register as _register_sim_scheme

_register_sim_scheme()
