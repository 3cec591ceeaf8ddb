"""The API's tokens (cardd/floor/auth.py): the file, its mode, its lines, the check."""
from __future__ import annotations

import os

import pytest

from cardd.floor.auth import Auth, AuthError, Principal

PIT = "p1t-t0ken-0123456789abcdef"
EYE = "surv-t0ken-0123456789abcdef"


def tokens_file(tmp_path, text, mode=0o600):
    path = tmp_path / "tokens"
    path.write_text(text)
    os.chmod(path, mode)
    return path


def test_a_tokens_file_with_comments_and_blank_lines(tmp_path):
    auth = Auth.load(tokens_file(tmp_path, f"# who may read the floor\n\n{PIT} pit boss-1\n   \n"
                                           f"{EYE}\tsurveillance  desk.2  \n"))
    assert auth.check(f"Bearer {PIT}") == Principal("boss-1", "pit")
    assert auth.check(f"bearer {EYE}") == Principal("desk.2", "surveillance")


@pytest.mark.parametrize("header", [None, "", "Bearer", "Bearer ", f"Basic {PIT}", f"Bearer {PIT}x",
                                    f"Bearer {PIT[:-1]}", "Bearer " + "x" * 10_000])
def test_no_token_or_a_wrong_one_is_nobody(tmp_path, header):
    auth = Auth.load(tokens_file(tmp_path, f"{PIT} pit boss-1\n"))
    assert auth.check(header) is None


@pytest.mark.parametrize("mode", [0o640, 0o604, 0o644, 0o660])
def test_a_file_others_may_read_is_refused(tmp_path, mode):
    path = tokens_file(tmp_path, f"{PIT} pit boss-1\n", mode)
    with pytest.raises(AuthError) as refused:
        Auth.load(path)
    assert str(refused.value) == (f"{path}: others may read it (mode {mode:04o}): only cardfloor may "
                                  "(chown cardfloor, chmod 0600)")


@pytest.mark.parametrize("line, why", [
    (f"{PIT} pit", "expected `token role name`, got 2 fields"),
    (f"{PIT} pit boss 1", "expected `token role name`, got 4 fields"),
    ("short pit boss", "a token is 16 to 256 visible ASCII characters"),
    (f"{PIT} pitboss boss", "the role must be one of pit, surveillance, admin"),
    (f"{PIT} pit b\u00f6ss", "a name is 1 to 64 of A-Z a-z 0-9 _ . @ -"),
    (f"{EYE} admin again", "this token is on an earlier line too (for desk)"),
])
def test_a_bad_line_is_one_error_naming_it(tmp_path, line, why):
    path = tokens_file(tmp_path, f"# tokens\n{EYE} surveillance desk\n{line}\n")
    with pytest.raises(AuthError) as refused:
        Auth.load(path)
    assert str(refused.value) == f"{path} line 3: {why}"
    assert PIT not in str(refused.value), "a token is never shown"


def test_a_missing_file_or_a_directory_is_one_sentence(tmp_path):
    with pytest.raises(AuthError, match=r"tokens: no such file$"):
        Auth.load(tmp_path / "tokens")
    with pytest.raises(AuthError, match=r"a directory, not a regular file: not read$"):
        Auth.load(tmp_path)


def test_a_file_not_utf8_is_refused(tmp_path):
    path = tokens_file(tmp_path, "")
    path.write_bytes(b"\xff\xfe tokens\n")
    with pytest.raises(AuthError, match=r"tokens: not UTF-8 text$"):
        Auth.load(path)
