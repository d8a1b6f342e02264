"""The one Postgres fixture: ``AWA_TEST_DSN`` when set, else an embedded PostgreSQL 16 started
once per test session (pgserver). Each test gets a fresh queue-storage schema from the
installer, so tests never see each other's jobs. No mocked database.
"""

from __future__ import annotations

import asyncio
import atexit
import itertools
import os
import shutil
import signal
import tempfile
from collections.abc import AsyncIterator, Iterator
from urllib.parse import urlsplit, urlunsplit

import asyncpg
import pytest

from awa_tui.embedded import EmbeddedPostgres
from storage import Client
from storage.db.migrator import install_schema, migrate
from storage.db.pool import connect_once

if not os.environ.get("XDG_RUNTIME_DIR"):
    # pgserver keeps its lock file here; set before pgserver is imported, removed at exit
    # (registered before pgserver's own exit hooks, so it runs after them).
    os.environ["XDG_RUNTIME_DIR"] = _runtime_dir = tempfile.mkdtemp(prefix="awa-runtime-")
    atexit.register(shutil.rmtree, _runtime_dir, ignore_errors=True)
_schema_numbers = itertools.count(1)


@pytest.fixture(scope="session")
def pg_dsn() -> Iterator[str]:
    """A DSN for a migrated database."""
    dsn = os.environ.get("AWA_TEST_DSN")
    if dsn:
        worker = os.environ.get("PYTEST_XDIST_WORKER")
        if worker is None:
            yield dsn
        else:
            yield from _worker_database(dsn, worker)
        return
    # A session stopped by SIGTERM (a CI timeout, a killed run) ends like Ctrl-C. pytest then
    # skips this fixture's teardown, so the server is also stopped at exit (``stop`` is
    # idempotent): it and its directory never outlive the session.
    previous = signal.signal(signal.SIGTERM, _stop_session)
    try:
        with EmbeddedPostgres(prefix="awa-test-pg-") as server:
            atexit.register(server.stop)
            yield server.dsn
    finally:
        signal.signal(signal.SIGTERM, previous)


def _worker_database(dsn: str, worker: str) -> Iterator[str]:
    """A database of its own for each xdist worker on the server ``AWA_TEST_DSN`` names: the
    control schema (descriptors, which each test empties) is per database, and two sessions
    sharing one would empty each other's. Made afresh, dropped after."""
    url = urlsplit(dsn)
    if url.scheme not in ("postgres", "postgresql"):
        raise pytest.UsageError("AWA_TEST_DSN must be a postgresql:// URL to run with -n")
    name = f"{url.path.lstrip('/') or 'postgres'}_{worker}"
    own = urlunsplit(url._replace(path=f"/{name}"))

    async def run(statement: str) -> None:
        async with connect_once(dsn) as conn:
            await conn.execute(statement)

    asyncio.run(run(f'DROP DATABASE IF EXISTS "{name}" WITH (FORCE)'))
    asyncio.run(run(f'CREATE DATABASE "{name}"'))
    try:
        yield own
    finally:
        asyncio.run(run(f'DROP DATABASE IF EXISTS "{name}" WITH (FORCE)'))


def _stop_session(_signum: int, _frame: object) -> None:
    raise KeyboardInterrupt("SIGTERM")


@pytest.fixture(scope="session")
async def migrated_dsn(pg_dsn: str) -> str:
    await migrate(pg_dsn)
    return pg_dsn


@pytest.fixture(scope="session")
async def awa_made_dsn(pg_dsn: str) -> AsyncIterator[str]:
    """A database the real Awa (awa-pg) migrated and failed one job in (``tests.awa_made``)."""
    from tests.awa_made import awa_made_database

    async with awa_made_database(pg_dsn) as dsn:
        yield dsn


@pytest.fixture
async def schema(migrated_dsn: str) -> str:
    """A fresh queue-storage schema for this test, and no kind descriptors.

    Descriptors live in the control schema every test shares (``awa.job_kind_descriptors``),
    and runtimes publish them on start: emptied here, each test sees what it would see alone,
    whatever ran before it.
    """
    name = f"t{os.getpid()}_{next(_schema_numbers)}"
    async with connect_once(migrated_dsn) as conn:
        await install_schema(conn, name)
        await conn.execute("DELETE FROM awa.job_kind_descriptors")
    return name


@pytest.fixture
async def client(migrated_dsn: str, schema: str) -> AsyncIterator[Client]:
    async with await Client.connect(migrated_dsn, schema) as c:
        yield c


@pytest.fixture
async def conn(migrated_dsn: str, schema: str) -> AsyncIterator[asyncpg.Connection]:
    """A raw connection on the test schema, for asserting on storage rows."""
    async with connect_once(migrated_dsn) as c:
        await c.execute(f"SET search_path TO {schema}")
        yield c
