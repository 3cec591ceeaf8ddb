"""``cardd``'s entry point (pyproject's console script, ``python -m cardd.daemon.main``); the daemon's
command line and start are cardd.daemon.program's.

Once it serves (from ``asyncio.run`` on) the daemon takes SIGINT and SIGTERM as a clean stop (exit 0).
A Ctrl-C may also come while the daemon still imports (about 0.35 s: the API, the journal, the
tracker, the drivers) or checks its configuration, where Python would print a traceback. So
this module imports nothing at its top but core.ctrl_c, and the daemon inside
:func:`core.ctrl_c.run_entry_point`: such a Ctrl-C ends it quietly with exit 130.
"""
import sys

from core.ctrl_c import run_entry_point


def main(argv: list[str] | None = None) -> int:
    return run_entry_point(lambda: _cardd(argv))


def _cardd(argv: list[str] | None) -> int:
    from cardd.daemon.program import main as cardd  # the imports: a Ctrl-C here ends cardd quietly
    return cardd(argv)


if __name__ == "__main__":
    sys.exit(main())
