"""A program group whose subcommands are imported when one is used, not when the program starts
(click's lazy-loading pattern): each entry names the module that defines the subcommand and its
one-line help, so ``cardctl --help`` and shell completion list every subcommand without importing
any. The line is the subcommand's help in one place: its own ``--help`` page begins with it, the
rest of that page is the subcommand's docstring."""
from __future__ import annotations

import importlib
import inspect
from collections.abc import Iterator, MutableMapping
from dataclasses import dataclass
from typing import Any

import click
from click.shell_completion import CompletionItem

from cardd.cli.common import Program


@dataclass(frozen=True)
class Lazy:
    """A subcommand defined in ``module`` (one of its ``COMMANDS``), and its one-line help."""
    module: str
    summary: str


class LazyCommands(MutableMapping[str, click.Command]):
    """A group's subcommands by name: the names without importing anything, a subcommand (its
    module imported on first use) when one is looked up."""

    def __init__(self, entries: dict[str, Lazy]) -> None:
        self.entries = entries
        self.loaded: dict[str, click.Command] = {}

    def __getitem__(self, name: str) -> click.Command:
        if name not in self.loaded:
            entry = self.entries[name]
            module = importlib.import_module(entry.module)
            command = {c.name: c for c in module.COMMANDS}[name]  # KeyError: the table names a command its module lacks
            rest = inspect.cleandoc(command.help or "")
            command.help = f"{entry.summary}\n\n{rest}" if rest else entry.summary
            self.loaded[name] = command
        return self.loaded[name]

    def __setitem__(self, name: str, command: click.Command) -> None:
        self.loaded[name] = command

    def __delitem__(self, name: str) -> None:
        self.entries.pop(name, None)
        self.loaded.pop(name, None)

    def __iter__(self) -> Iterator[str]:
        return iter({**dict.fromkeys(self.entries), **dict.fromkeys(self.loaded)})

    def __len__(self) -> int:
        return len(self.entries.keys() | self.loaded.keys())

    def __contains__(self, name: object) -> bool:
        return name in self.entries or name in self.loaded

    def summary(self, name: str, limit: int) -> str:
        """The one-line help of ``name`` as click lists it, shortened to ``limit`` (by click's
        own rule: a command of that help, never imported)."""
        if name in self.loaded:
            return self.loaded[name].get_short_help_str(limit)
        return click.Command(name, help=self.entries[name].summary).get_short_help_str(limit)


class LazyProgram(Program):
    """A :class:`~cardd.cli.common.Program` whose subcommands are :class:`Lazy` entries
    (``cls=LazyProgram, lazy={name: Lazy(...)}``)."""

    def __init__(self, *args: Any, lazy: dict[str, Lazy], **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self.commands: LazyCommands = LazyCommands(lazy)

    def format_commands(self, ctx: click.Context, formatter: click.HelpFormatter) -> None:
        names = self.list_commands(ctx)
        if not names:
            return
        limit = formatter.width - 6 - max(map(len, names))
        with formatter.section("Commands"):
            formatter.write_dl([(name, self.commands.summary(name, limit)) for name in names])

    def shell_complete(self, ctx: click.Context, incomplete: str) -> list[CompletionItem]:
        items = [CompletionItem(name, help=self.commands.summary(name, 45)) for name in self.list_commands(ctx)
                 if name.startswith(incomplete)]
        return items + click.Command.shell_complete(self, ctx, incomplete)
