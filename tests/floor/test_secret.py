"""The session key's file (cardd/floor/secret.py): made 0600 once, kept, refused when others may
read it, too short or not a file."""
from __future__ import annotations

import os
from pathlib import Path

import pytest

from cardd.floor.secret import SECRET_BYTES, SecretError, load_or_make_secret


def test_made_once_then_kept(tmp_path: Path):
    path = tmp_path / "session.secret"
    key = load_or_make_secret(path)
    assert len(key) == SECRET_BYTES and path.stat().st_mode & 0o777 == 0o600
    assert load_or_make_secret(path) == key


def test_a_key_others_may_read_or_too_short_is_refused(tmp_path: Path):
    path = tmp_path / "session.secret"
    path.write_bytes(os.urandom(SECRET_BYTES))
    path.chmod(0o644)
    with pytest.raises(SecretError, match=r"others may read it \(mode 0644\)"):
        load_or_make_secret(path)
    path.write_bytes(b"short")
    path.chmod(0o600)
    with pytest.raises(SecretError, match=r"5 bytes: a session key is at least 32"):
        load_or_make_secret(path)


def test_a_directory_or_a_folder_missing_is_one_sentence(tmp_path: Path):
    with pytest.raises(SecretError, match=r"a directory, not a regular file: not read$"):
        load_or_make_secret(tmp_path)
    with pytest.raises(SecretError, match=r"none/session.secret: cannot make it: No such file or directory$"):
        load_or_make_secret(tmp_path / "none" / "session.secret")
