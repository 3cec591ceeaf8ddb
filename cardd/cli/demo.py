"""``make demo``'s entry point, ``python -m cardd.cli.demo``; the demo itself is cardd.cli.demo_program's.

A Ctrl-C at any moment ends the demo with exit 130, while it still imports too (click, rich, the API
client, the journal: about 0.2 s), where a KeyboardInterrupt printed Python's traceback:
this module imports nothing at its top but core.ctrl_c, and the demo inside
:func:`core.ctrl_c.run_entry_point` (quietly: nothing is started yet). Once it runs, its Ctrl-C is the
demo's own (one line: the daemon stopped, its directory removed).
"""
import os
import sys

from core.ctrl_c import run_entry_point


def main() -> int:
    return run_entry_point(_demo)


def _demo() -> int:
    from cardd.cli.demo_program import main as demo  # the imports: a Ctrl-C here ends the demo as any other does
    return demo()


if __name__ == "__main__":
    os.environ.setdefault("PYTHONUNBUFFERED", "1")
    sys.exit(main())
