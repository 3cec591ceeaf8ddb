"""``cardbench``'s entry point (pyproject's console script, ``cardd.bench.cli:main``); its commands
are cardd.bench.program's.

A Ctrl-C at any moment ends cardbench quietly with exit 130 (core.ctrl_c), while it still imports
too (about half a second: click, rich, the daemon's modules its scenarios run), where a KeyboardInterrupt
printed Python's traceback: this module imports nothing at its top but core.ctrl_c, and the program
inside :func:`core.ctrl_c.run_entry_point`. Once a command runs, its Ctrl-C is the program's
(core.ctrl_c.end_like_ctrl_c: what it started is stopped, one line, exit 130).
"""
from core.ctrl_c import run_entry_point


def main() -> None:
    run_entry_point(_cardbench)


def _cardbench() -> None:
    from cardd.bench.program import cardbench  # the imports: a Ctrl-C here ends cardbench as any other does
    from cardd.cli.common import run
    run(cardbench, "cardbench")


if __name__ == "__main__":
    main()
