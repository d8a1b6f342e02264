"""Errors that say what happened (issue 12, item 5): a timeout is an ``OperationTimeout`` naming
the call, a connection that cannot be (re)made during ``insert_many`` is ``ConnectionFailed``,
and ``migrate`` without privileges is ``PermissionDenied``; each writes nothing.
"""

from __future__ import annotations

from urllib.parse import parse_qsl, urlencode, urlsplit, urlunsplit

import asyncpg
import pytest

from storage import (
    Client,
    ConnectionFailed,
    Job,
    OperationTimeout,
    PermissionDenied,
    migrate,
)
from storage.db.migrator import applied_versions
from storage.db.pool import connect_once
from storage.runtime.supervise import is_transient
from storage.values.errors import DatabaseError
from tests.storage.roles import unprivileged_dsn


def _with_setting(dsn: str, name: str, value: str) -> str:
    """``dsn`` with a server setting in its query (asyncpg sends unknown ones as settings)."""
    parts = urlsplit(dsn)
    query = [*parse_qsl(parts.query), (name, value)]
    return urlunsplit(parts._replace(query=urlencode(query)))


@pytest.mark.parametrize(
    ("setting", "message"),
    [
        (None, "did not answer within the client's command_timeout"),
        ("statement_timeout", "cancelled by the server"),
        ("lock_timeout", "waiting for a lock"),
    ],
)
async def test_a_timed_out_insert_is_an_operation_timeout_naming_the_call(
    migrated_dsn: str, schema: str, conn: asyncpg.Connection, setting: str | None, message: str
) -> None:
    """The insert waits on a lane lock another session holds until a timeout ends the wait:
    the client's command_timeout, or the server's statement_timeout or lock_timeout."""
    dsn = migrated_dsn if setting is None else _with_setting(migrated_dsn, setting, "200")
    command_timeout = 0.2 if setting is None else 60
    async with await Client.connect(dsn, schema, command_timeout=command_timeout) as client:

        @client.task(kind="blocked")
        async def blocked(job: Job[dict[str, int]]) -> None:
            return None

        async with conn.transaction():
            await conn.execute("LOCK TABLE queue_lanes IN ACCESS EXCLUSIVE MODE")
            with pytest.raises(OperationTimeout, match=message) as caught:
                await client.insert({"secret_arg": 7}, kind="blocked")
        assert caught.value.operation == "insert_many"
        assert str(caught.value).startswith("insert_many ")
        assert "secret_arg" not in str(caught.value)
        assert await conn.fetchval("SELECT count(*) FROM ready_entries") == 0
        # The pool is still usable afterwards.
        assert (await client.insert({"n": 1}, kind="blocked")).kind == "blocked"


async def test_insert_many_when_the_server_cannot_be_reached_is_connection_failed(
    migrated_dsn: str, schema: str, conn: asyncpg.Connection
) -> None:
    """The pool's connections are gone and a new one cannot be made (the pool now points at a
    closed port): the failure happens in the pool's acquire, and still arrives translated."""
    async with await Client.connect(migrated_dsn, schema) as client:

        @client.task(kind="unreachable")
        async def unreachable(job: Job[dict[str, int]]) -> None:
            return None

        client.pool.set_connect_args("postgresql://oncall:s3cret@127.0.0.1:1/jobs")
        await client.pool.expire_connections()
        with pytest.raises(ConnectionFailed, match="Could not reach PostgreSQL") as caught:
            await client.insert_many([{"n": 1}, {"n": 2}], kind="unreachable")
        assert isinstance(caught.value.__cause__, OSError)
        assert "s3cret" not in str(caught.value)
        with pytest.raises(ConnectionFailed):
            await client.get_job(1)
    assert await conn.fetchval("SELECT count(*) FROM ready_entries") == 0


async def test_migrate_without_privileges_is_permission_denied_and_applies_nothing(
    migrated_dsn: str,
) -> None:
    async with connect_once(migrated_dsn) as admin:
        before = await applied_versions(admin)
    async with unprivileged_dsn(migrated_dsn) as (dsn, password):
        with pytest.raises(PermissionDenied, match="migrate was refused: permission denied"):
            await migrate(dsn)
        with pytest.raises(PermissionDenied) as caught:
            await migrate(dsn)
        assert password not in str(caught.value)
    async with connect_once(migrated_dsn) as admin:
        assert await applied_versions(admin) == before


def test_too_many_clients_translated_at_connect_is_retried_not_fatal() -> None:
    """A fleet over its connection budget waits for a slot instead of failing its workers."""
    refused = asyncpg.TooManyConnectionsError("sorry, too many clients already")
    translated = DatabaseError("connect failed in PostgreSQL: TooManyConnectionsError")
    translated.__cause__ = refused
    assert is_transient(translated)
    not_found = DatabaseError("run_maintenance failed")
    not_found.__cause__ = asyncpg.UndefinedTableError("relation does not exist")
    assert not is_transient(not_found)
