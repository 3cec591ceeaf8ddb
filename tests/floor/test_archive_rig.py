"""The PostgreSQL rig of cardfloor's tests (tests/support/postgres.py)."""
from __future__ import annotations

import socket

import psycopg
import pytest

from tests.support.postgres import PostgresServer


def test_a_server_that_cannot_start_says_why_in_its_own_words() -> None:
    """Its port taken by another listener: start() raises with PostgreSQL's own log lines."""
    server = PostgresServer()
    try:
        with socket.socket() as taken:
            taken.bind(("127.0.0.1", server.port))
            taken.listen()
            with pytest.raises(RuntimeError, match=r"PostgreSQL exited with 1:\n(.|\n)*could not (bind|create)"):
                server.start()
    finally:
        server.close()


def test_each_test_gets_a_fresh_database_of_the_process_server(postgres: PostgresServer, floor_db: str) -> None:
    with psycopg.connect(floor_db) as conn:
        tables = conn.execute("SELECT count(*) FROM pg_tables WHERE schemaname = 'public'").fetchone()
        fsync = conn.execute("SHOW fsync").fetchone()
    assert tables == (0,) and fsync == ("on",)
    assert floor_db.startswith(f"postgresql://postgres@127.0.0.1:{postgres.port}/")
