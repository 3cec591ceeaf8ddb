"""The host's protocol 2.0 identity key file: made once at the first start (0600), then read;
a file others may read, or a damaged one, stops the start with one line naming it."""
from __future__ import annotations

import os
from pathlib import Path

import pytest

from cardd.daemon.host_key import HostKeyError, host_fingerprint, host_key_path, load_host_key, load_or_create_host_key


def test_the_first_start_makes_a_key_only_its_user_may_read_and_later_starts_read_it(tmp_path: Path) -> None:
    path = host_key_path(tmp_path / "journal.sqlite3")
    key, made = load_or_create_host_key(path)
    assert made and path.stat().st_mode & 0o777 == 0o600
    again, made_again = load_or_create_host_key(path)
    assert not made_again and host_fingerprint(again) == host_fingerprint(key)
    assert len(host_fingerprint(key).split("-")) == 8


@pytest.mark.parametrize("mode", [0o640, 0o644, 0o604])
def test_a_key_others_may_read_is_refused_in_one_line(tmp_path: Path, mode: int) -> None:
    path = tmp_path / "host_key.pem"
    load_or_create_host_key(path)
    path.chmod(mode)
    with pytest.raises(HostKeyError) as refused:
        load_host_key(path)
    text = str(refused.value)
    assert "\n" not in text and str(path) in text and f"mode {mode:04o}" in text and "chmod 0600" in text


@pytest.mark.parametrize("content", [b"", b"not a key\n", bytes(range(200, 256)) * 2, b"x" * 10_000],
                         ids=["empty", "text", "binary", "long"])
def test_a_damaged_key_is_refused_in_one_line(tmp_path: Path, content: bytes) -> None:
    path = tmp_path / "host_key.pem"
    path.write_bytes(content)
    path.chmod(0o600)
    with pytest.raises(HostKeyError, match="damaged: not an Ed25519 private key") as refused:
        load_or_create_host_key(path)
    assert "\n" not in str(refused.value)


def test_a_link_in_its_place_is_refused(tmp_path: Path) -> None:
    real = tmp_path / "elsewhere.pem"
    load_or_create_host_key(real)
    (tmp_path / "host_key.pem").symlink_to(real)
    with pytest.raises(HostKeyError, match="cannot read the host key"):
        load_or_create_host_key(tmp_path / "host_key.pem")
