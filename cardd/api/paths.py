"""Where the installed daemon's API socket is: the configuration's default (``[api] socket``) and
the client's, here alone so cardctl names it without importing the client."""
from __future__ import annotations

from pathlib import Path

DEFAULT_SOCKET = Path("/run/cardd/cardd.sock")
