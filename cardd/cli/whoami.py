"""``cardctl whoami``: who the daemon sees on this connection (uid, user, groups, from the kernel at
connect time), the roles that gives, and the commands each role allows, in cardctl's words (as
NUT's ``upscmd -l`` lists what a user may do). The daemon answers it for a caller with no role
too: that is who needs it most. Its one-line help is in cardd.cli.program."""
from __future__ import annotations

import click
from rich.console import Console

from cardd.api.protocol import WhoAmIReply
from cardd.cli.common import CARDCTL_COMMANDS, json_option
from cardd.cli.console import emit
from cardd.cli.daemon_client import api_errors, daemon, to_builtins
from cardd.cli.shown import shown

#: what every role may do besides its commands (STATE, LOG and WATCH need any role)
READING = ("status", "watch", "alarm", "log")


@click.command("whoami")
@json_option
def whoami(as_json: bool) -> None:
    """The daemon's answer (WHOAMI), not this process's own idea of itself: the groups are those the
    kernel gave the daemon when cardctl connected (a group added since needs a new login). With
    --json, the API's reply (its command names the API's).

    \b
    Example:
      cardctl whoami
      cardctl whoami --json | jq .roles
    """
    with daemon() as client, api_errors():
        reply = client.whoami()
    document = {key: value for key, value in to_builtins(reply).items() if key not in ("class", "id")}
    emit(document, as_json, lambda out: render(out, reply))


def render(out: Console, reply: WhoAmIReply) -> None:
    """The answer for a person: every name shown as text (a group's name is the machine's)."""
    for line in lines(reply):
        out.print(shown(line))


def lines(reply: WhoAmIReply) -> list[str]:
    groups = ", ".join(f"{g.name or 'no name'} ({g.gid}{f': {g.role}' if g.role else ''})" for g in reply.groups)
    said = [f"user {reply.user} (uid {reply.uid}, gid {reply.gid}), pid {reply.pid}",
            f"groups: {groups or 'none'}"]
    if reply.every_role:
        said.append(f"roles: {', '.join(reply.roles)} (uid {reply.uid} holds every role: root and the daemon's "
                    "own user do)")
    elif reply.roles:
        said.append(f"roles: {', '.join(reply.roles)}")
    else:
        said.append(f"roles: none: the daemon refuses {', '.join(READING)} and every command; "
                    f"{role_groups_text(reply.role_groups)}")
        return said
    said.append(f"every role may: {', '.join(READING)}")
    for role in reply.roles:
        said.append(f"{role} may:")
        said.extend(f"  {words}" for words in sorted(map(command_words, reply.commands.get(role, []))))
    return said


def command_words(name: str) -> str:
    """API command ``name`` as cardctl's command (cardd.cli.common.CARDCTL_COMMANDS), or the API's
    name, said to be one, for a command cardctl does not send."""
    words = CARDCTL_COMMANDS.get(name)
    return words if words is not None else f"{name} (the API's command: cardctl has none for it)"


def role_groups_text(role_groups: dict[str, list[str]]) -> str:
    """Which groups of the daemon's machine give a role, or that none does."""
    if not role_groups:
        return "no group on the daemon's machine gives a role (its log names the groups missing)"
    named = "; ".join(f"{', '.join(groups)} gives {role}" for role, groups in role_groups.items())
    return f"{named} (an administrator adds you: usermod -aG GROUP $USER, then log in again)"


COMMANDS = (whoami,)
