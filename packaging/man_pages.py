"""Man pages made from the programs' own ``--help`` (as help2man does), for the Debian package:
``man cardd``, ``man cardctl``, ``man cardbench``. Each page is the program's help and, for a
command group, each command's help, so the page says exactly what ``--help`` says.
packaging/build_deb.py calls :func:`write_man_pages` with the staged venv's programs.
"""
from __future__ import annotations

import gzip
import re
import subprocess
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

#: the programs and the line their page's NAME section gives them
PROGRAMS = {
    "cardd": "the card-handling table daemon",
    "cardctl": "the technician's and supervisor's tool for cardd",
    "cardbench": "cardd's test bench: scenarios, soak, replay, Monte Carlo, shuffler randomness",
}
_COMMAND = re.compile(r"^  ([a-z][a-z0-9-]*)\s")


def _help(command: list[str]) -> str:
    done = subprocess.run([*command, "--help"], capture_output=True, text=True, timeout=120,
                          env={"PATH": "/usr/bin:/bin", "COLUMNS": "80", "LANG": "C.UTF-8"})
    if done.returncode != 0:
        raise RuntimeError(f"{' '.join(command)} --help: exit {done.returncode}: {done.stderr.strip()}")
    return done.stdout


def _commands(help_text: str) -> list[str]:
    """The command names a click group's help lists under ``Commands:``."""
    _, found, rest = help_text.partition("\nCommands:\n")
    return [m.group(1) for line in rest.splitlines() if (m := _COMMAND.match(line))] if found else []


def _roff(text: str) -> str:
    """``text`` shown as it is: a backslash and a line's leading dot or quote escaped."""
    lines = text.replace("\\", "\\e").splitlines()
    return "\n".join("\\&" + line if line.startswith((".", "'")) else line for line in lines)


def man_page(python: Path, program: Path, version: str) -> str:
    """The page of ``program`` (a console script), run by ``python`` (its venv's, wherever it is)."""
    name, run = program.name, [str(python), str(program)]
    top = _help(run)
    with ThreadPoolExecutor(max_workers=2) as pool:
        commands = list(zip(_commands(top), pool.map(lambda c: _help([*run, c]), _commands(top))))
    page = [f'.TH {name.upper()} 1 "" "cardd {version}" "cardd"', ".SH NAME", f"{name} \\- {PROGRAMS[name]}",
            ".SH DESCRIPTION", ".nf", _roff(top), ".fi"]
    if commands:
        page.append(".SH COMMANDS")
        for command, text in commands:
            page += [f".SS {name} {command}", ".nf", _roff(text), ".fi"]
    page += [".SH SEE ALSO", "/usr/share/doc/cardd/install.md, /usr/share/doc/cardd/cardctl.md, "
             "/usr/share/doc/cardd/bench.md"]
    return "\n".join(page) + "\n"


def write_man_pages(venv: Path, out: Path, version: str) -> list[Path]:
    """``out``/NAME.1.gz for each program of ``venv``."""
    out.mkdir(parents=True, exist_ok=True)
    written = []
    for name in PROGRAMS:
        path = out / f"{name}.1.gz"
        path.write_bytes(gzip.compress(man_page(venv / "bin" / "python", venv / "bin" / name, version).encode(), mtime=0))
        written.append(path)
    return written
