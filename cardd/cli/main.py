"""``cardctl``'s entry point (pyproject's console script); its commands are cardd.cli.program's.

A Ctrl-C at any moment ends cardctl quietly with exit 130 (core.ctrl_c), while it still
imports too: the imports are most of a short command's time (about 0.3 s: click, rich, the API
client, the tracker's records), and a KeyboardInterrupt there printed Python's traceback. So this
module imports nothing at its top but core.ctrl_c (which imports nothing Python's start has not),
and the program inside :func:`core.ctrl_c.run_entry_point`.
"""
from core.ctrl_c import run_entry_point


def main() -> None:
    run_entry_point(_cardctl)


def _cardctl() -> None:
    from cardd.cli.program import cli  # the imports: a Ctrl-C here ends cardctl as any other does
    from cardd.cli.common import run
    run(cli, "cardctl")


if __name__ == "__main__":
    main()
