"""The files cardd ships beside its code, found through the installed package (importlib.resources),
never through the source tree: the seed casinos' house rules (``cardd/rules/``) and the bench's
scenario library (``cardd/bench/scenarios/``). A checkout, an editable install and a wheel installed
into any venv find them the same way; pyproject.toml declares them as the package's data.
"""
from __future__ import annotations

from importlib.resources import files
from pathlib import Path


def package_folder(package: str, name: str) -> Path:
    """The folder ``name`` of data inside ``package`` (``cardd``, ``rules``), as a path: its files
    are read, globbed, named in messages and given to subprocesses as paths. cardd is installed as
    files (a wheel or the checkout, never a zip), so the package's folder is a path on disk."""
    folder = files(package) / name
    if not isinstance(folder, Path):  # a zip import: a Traversable that is not a file on disk
        raise RuntimeError(f"{package} is not installed as files ({folder}): install it from its wheel")
    return folder
