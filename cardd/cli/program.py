"""``cardctl``'s command group (the entry point, cardd.cli.main, imports it); each group of
subcommands lives in its own module.

Shell completion (click's): ``eval "$(_CARDCTL_COMPLETE=bash_source cardctl)"`` (zsh_source,
fish_source for the others); see docs/cardctl.md.
"""
from __future__ import annotations

from pathlib import Path

import click

from cardd.cli import device, firmware, journal, table, trace, watch
from cardd.cli.common import Options, Program, socket_option

CONTEXT = {"help_option_names": ["-h", "--help"], "max_content_width": 100}


@click.group(cls=Program, context_settings=CONTEXT)
@socket_option
@click.version_option(package_name="cardd", prog_name="cardctl")
@click.pass_context
def cli(ctx: click.Context, socket_path: Path) -> None:
    """The technician's and supervisor's tool for cardd: devices, the table, the journal.

    Exit codes: 0 ok, 1 failure, 2 usage, 3 device or daemon unreachable, 4 refused by
    role, 5 integrity failure, 130 interrupted (Ctrl-C), 141 stdout closed (| head) (docs/cardctl.md).

    \b
    Example:
      cardctl status
      cardctl --socket /tmp/cardd.sock watch
    """
    ctx.obj = Options(socket=socket_path)


for module in (table, journal, device, firmware, trace, watch):
    for command in module.COMMANDS:
        cli.add_command(command)
