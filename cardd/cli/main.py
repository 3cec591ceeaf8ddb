"""``cardctl``'s entry point (pyproject's console script); its commands are cardd.cli.program's.

A Ctrl-C at any moment ends cardctl quietly with exit 130 (cardd.cli.ctrl_c), while it still
imports too: the imports are most of a short command's time (about 0.3 s: click, rich, the API
client, the tracker's records), and a KeyboardInterrupt there printed Python's traceback. So this
module imports nothing at its top (typing alone takes milliseconds), and the program inside
main's ``try``.
"""


def main() -> None:
    try:
        from cardd.cli.program import cli  # the imports: a Ctrl-C here is caught as any other
        from cardd.cli.common import run
        run(cli, "cardctl")
    except KeyboardInterrupt:  # what run itself could not catch: in the imports, or as it ends
        from cardd.cli.ctrl_c import end_interrupted
        end_interrupted()


if __name__ == "__main__":
    main()
