"""The pit page's users (cardd/floor/users.py): the real ``cardfloor user`` command on real files,
the hashes, the file's mode, and the service's reader."""
from __future__ import annotations

import json
import os
import subprocess
from pathlib import Path

import pytest

from cardd.floor.auth import Principal
from cardd.floor.users import Users, UsersError, check_password, hash_password, load_users
from tests.floor.service_rig import CARDFLOOR

PASSWORD = "correct horse battery"


@pytest.fixture
def config(tmp_path: Path) -> Path:
    path = tmp_path / "cardfloor.toml"
    path.write_text(f'[broker]\nurls = ["mqtt://127.0.0.1:1883"]\n[archive]\ndsn = "postgresql:///none"\n'
                    f'[http]\nusers_file = "{tmp_path / "users"}"\n'
                    '[[pit]]\nname = "Pit 1"\ntables = ["floor1/bj-01"]\n[[pit]]\nname = "Pit 2"\n')
    return path


def user(config: Path, *args: str, password: str | None = PASSWORD) -> subprocess.CompletedProcess[str]:
    return subprocess.run([CARDFLOOR, "user", "--config", str(config), *args], capture_output=True, text=True,
                          input=None if password is None else password + "\n", timeout=60)


def test_add_list_passwd_remove(config: Path, tmp_path: Path):
    users_file = tmp_path / "users"
    added = user(config, "add", "anna", "--role", "pit", "--pit", "Pit 1", "--pit", "Pit 2", "--password-stdin")
    assert (added.returncode, added.stdout, added.stderr) == (0, "added anna\n", "")
    assert users_file.stat().st_mode & 0o777 == 0o600
    key = tmp_path / "users.secret"
    assert key.stat().st_mode & 0o777 == 0o600 and len(key.read_bytes()) == 32, "the session key made with it"
    assert key.stat().st_uid == users_file.stat().st_uid
    assert user(config, "add", "eye", "--role", "surveillance", "--password-stdin").returncode == 0
    listed = user(config, "list", password=None)
    assert listed.stdout == "anna\tpit\tPit 1, Pit 2\neye\tsurveillance\t\n"
    assert PASSWORD not in users_file.read_text()
    found = load_users(users_file)
    assert found["anna"].principal() == Principal("anna", "pit", ("Pit 1", "Pit 2"))
    assert check_password(PASSWORD, found["anna"].password)
    old = found["anna"].generation
    assert user(config, "passwd", "anna", "--password-stdin", password="another password").returncode == 0
    changed = load_users(users_file)["anna"]
    assert changed.generation != old and check_password("another password", changed.password)
    assert not check_password(PASSWORD, changed.password)
    assert user(config, "remove", "anna", password=None).stdout == "removed anna\n"
    assert list(load_users(users_file)) == ["eye"]
    assert [p.name for p in tmp_path.iterdir() if p.name.endswith(".new")] == [], "no file left half written"


@pytest.mark.parametrize("args, said, code", [
    (["add", "anna", "--role", "pit", "--password-stdin"], "a pit user needs --pit (the pits: Pit 1, Pit 2)", 2),
    (["add", "anna", "--role", "pit", "--pit", "Pit 9", "--password-stdin"],
     "no pit 'Pit 9' in", 2),
    (["add", "anna", "--role", "admin", "--pit", "Pit 1", "--password-stdin"],
     "--pit is for the pit role: admin sees every table", 2),
    (["add", "<script>", "--role", "admin", "--password-stdin"], "a user's name is 1 to 64 of", 2),
    (["passwd", "nobody", "--password-stdin"], "no user 'nobody'", 1),
    (["remove", "nobody"], "no user 'nobody'", 1),
])
def test_a_mistake_is_one_line_and_changes_nothing(config: Path, tmp_path: Path, args: list[str], said: str,
                                                    code: int):
    done = user(config, *args)
    assert done.returncode == code and done.stderr.startswith("cardfloor user: ") and said in done.stderr
    assert done.stderr.count("\n") == 1 and "Traceback" not in done.stderr
    assert not (tmp_path / "users").exists()


def test_a_short_password_or_a_user_twice_is_refused(config: Path, tmp_path: Path):
    short = user(config, "add", "anna", "--role", "admin", "--password-stdin", password="short")
    assert (short.returncode, short.stderr) == (1, "cardfloor user: a password is 8 to 1024 characters: "
                                                    "nothing changed\n")
    assert user(config, "add", "anna", "--role", "admin", "--password-stdin").returncode == 0
    again = user(config, "add", "anna", "--role", "admin", "--password-stdin")
    assert again.returncode == 1 and "'anna' is a user already" in again.stderr


def test_a_users_file_others_may_read_is_refused(config: Path, tmp_path: Path):
    assert user(config, "add", "anna", "--role", "admin", "--password-stdin").returncode == 0
    os.chmod(tmp_path / "users", 0o644)
    with pytest.raises(UsersError, match=r"others may read it \(mode 0644\)"):
        load_users(tmp_path / "users")
    listed = user(config, "list", password=None)
    assert listed.returncode == 2 and "http.users_file" in listed.stderr and "others may read it" in listed.stderr


def test_no_users_file_configured(tmp_path: Path):
    path = tmp_path / "cardfloor.toml"
    path.write_text('[broker]\nurls = ["mqtt://127.0.0.1:1883"]\n[archive]\ndsn = "x"\n')
    done = user(path, "list", password=None)
    assert done.returncode == 2 and "http.users_file is not set" in done.stderr


def test_a_line_edited_by_hand_is_named(tmp_path: Path):
    path = tmp_path / "users"
    line = json.dumps({"user": "anna", "role": "pit", "pits": ["Pit 1"], "password": hash_password(PASSWORD)})
    path.write_text(f"{line}\n{{broken\n")
    path.chmod(0o600)
    with pytest.raises(UsersError, match=r"users line 2: not a user's line"):
        load_users(path)


def test_the_service_reads_the_file_again_when_it_changed(config: Path, tmp_path: Path):
    users = Users(tmp_path / "users")
    assert users.check("anna", PASSWORD) is None, "no file: no users"
    assert user(config, "add", "anna", "--role", "admin", "--password-stdin").returncode == 0
    found = users.check("anna", PASSWORD)
    assert found is not None and found.role == "admin"
    assert users.check("anna", "wrong password") is None and users.check("bob", PASSWORD) is None
    assert user(config, "remove", "anna", password=None).returncode == 0
    assert users.get("anna") is None
