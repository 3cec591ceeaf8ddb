"""The command line of a generated document: write it, or check that the committed one is fresh.

A module that renders a document from the code (the state diagrams, the API's JSON Schema)
calls :func:`write_or_check` from its ``main``; ``make`` runs ``--write`` to regenerate and
``--check`` in CI, which exits 1 with a diff when the committed file is stale.
"""
from __future__ import annotations

import argparse
import difflib
import inspect
import sys
from collections.abc import Callable
from pathlib import Path
from typing import Any


def write_or_check(argv: list[str] | None, *, prog: str, description: str, render: Callable[[], str],
                   source: str, make_target: str) -> int:
    """``--write PATH`` or ``--check PATH`` for the text ``render()`` makes from ``source``."""
    ap = argparse.ArgumentParser(prog=prog, description=description)
    mode = ap.add_mutually_exclusive_group(required=True)
    mode.add_argument("--write", metavar="PATH", type=Path, help="write the generated file to PATH")
    mode.add_argument("--check", metavar="PATH", type=Path, help=f"exit 1 when PATH differs from {source}")
    args = ap.parse_args(argv)
    text = render()
    if args.write:
        args.write.write_text(text, encoding="utf-8")
        return 0
    current = args.check.read_text(encoding="utf-8") if args.check.exists() else ""
    if current == text:
        return 0
    diff = "".join(difflib.unified_diff(current.splitlines(True), text.splitlines(True), str(args.check), source, n=1))
    sys.stderr.write(f"{args.check} is stale ({source} changed): run `make {make_target}` and commit it.\n{diff[:4000]}")
    return 1


def clean_descriptions(node: Any) -> Any:
    """Every ``description`` as ``inspect.cleandoc`` leaves it: msgspec takes a Struct's docstring
    as it is (0.22) or cleaned (0.23), and the committed schema must not depend on which."""
    if isinstance(node, dict):
        return {key: inspect.cleandoc(value) if key == "description" and isinstance(value, str)
                else clean_descriptions(value) for key, value in node.items()}
    if isinstance(node, list):
        return [clean_descriptions(item) for item in node]
    return node
