"""Connections: DSN checks, the pool and its codecs, and the one place driver errors are
translated."""

from __future__ import annotations

import asyncio
import logging
import socket
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from functools import partial
from typing import Any, Self, TypeAlias
from urllib.parse import parse_qs, urlsplit

import asyncpg
import orjson
from asyncpg.exceptions._base import InternalClientError
from asyncpg.pool import PoolConnectionProxy

from storage.values.errors import (
    AwaError,
    ConfigError,
    ConnectionFailed,
    DatabaseError,
    OperationTimeout,
    PermissionDenied,
    ReadOnlyError,
    SchemaNotMigrated,
    describe,
)
from storage.values.names import check_schema_name
from storage.values.redact import redact_dsn, redact_secrets

log = logging.getLogger("storage")

# A plain connection or one borrowed from a pool: engine functions accept either.
Conn: TypeAlias = "asyncpg.Connection[asyncpg.Record] | PoolConnectionProxy[asyncpg.Record]"


def _encode_jsonb(value: Any) -> bytes:
    # bytes are JSON text already serialized by storage.values.codec: sent as is, not re-encoded.
    if isinstance(value, bytes):
        return b"\x01" + value
    return b"\x01" + orjson.dumps(value)


def _decode_jsonb(data: bytes) -> Any:
    return orjson.loads(data[1:])


async def _init_connection(conn: asyncpg.Connection) -> None:
    # json keeps asyncpg's own codec: str both ways, so a stored output reads back byte for
    # byte, and in C (a Python identity codec cost 2 µs per element of a flush's json[]).
    await conn.set_type_codec(
        "jsonb", schema="pg_catalog", encoder=_encode_jsonb, decoder=_decode_jsonb, format="binary"
    )


def libpq_order(dsn: str | None) -> str | None:
    """``dsn`` as asyncpg must read it to connect where libpq would.

    In libpq a ``host=`` or ``port=`` in a URL's query wins over the URL's own host and port:
    ``postgresql://u@localhost/db?host=/run/pg`` is the socket in /run/pg. asyncpg reads the
    URL's first, so that went to localhost over TCP. The URL's hosts and ports are moved into
    the query here, where asyncpg reads them after the query's own (which are kept); a URL
    port still applies to a query host, as in libpq. Anything else is left as it is.
    """
    if not dsn or "?" not in dsn:
        return dsn
    try:
        parts = urlsplit(dsn)
        query = parse_qs(parts.query, keep_blank_values=True)
    except ValueError:  # malformed: asyncpg says how, with the DSN checks around it
        return dsn
    given = {key for key in ("host", "port") if query.get(key, [""])[-1]}
    auth, at, hostspec = parts.netloc.rpartition("@")
    if not given or not hostspec:
        return dsn
    hosts, ports = [], []
    for spec in hostspec.split(","):
        if spec.startswith("["):  # [IPv6]:port
            address, _, rest = spec.partition("]")
            host, port = address + "]", rest.removeprefix(":")
        else:
            host, _, port = spec.partition(":")
        hosts.append(host)
        ports.append(port)
    moved = [] if "host" in given else ["host=" + ",".join(hosts)]
    if "port" not in given and any(ports):
        moved.append("port=" + ",".join(port or "5432" for port in ports))
    query_text = "&".join([parts.query, *moved])
    fragment = f"#{parts.fragment}" if parts.fragment else ""  # urlunsplit drops an empty "//"
    return f"{parts.scheme}://{auth}{at}{parts.path}?{query_text}{fragment}"


async def create_pool(
    dsn: str | None,
    schema: str,
    *,
    min_size: int = 1,
    max_size: int = 10,
    read_only: bool = False,
    command_timeout: float | None = 60,
) -> asyncpg.Pool:
    """A pool whose connections see ``schema`` first and speak orjson for json and jsonb."""
    # Startup settings, not SET: the pool's RESET ALL on release returns to these.
    settings = {"search_path": f"{check_schema_name(schema)}, public"}
    if read_only:
        settings["default_transaction_read_only"] = "on"
    with translate_errors(dsn):
        return await asyncpg.create_pool(
            libpq_order(dsn),
            min_size=min_size,
            max_size=max_size,
            init=_init_connection,
            server_settings=settings,
            command_timeout=command_timeout,
            # No expiry timer per cached statement (300 s by default): a timer holds the
            # context of the task that prepared the statement, and with it, in the console,
            # the screen that read. The cache is still bounded by its size (100 statements).
            max_cached_statement_lifetime=0,
        )


@asynccontextmanager
async def snapshot(conn: Conn) -> AsyncIterator[None]:
    """One read-only REPEATABLE READ transaction: every statement inside sees one moment.

    Every read of one job (``storage.read.one_job``, the timeline, a unique key's holder) and
    every list page runs in one, so a job that changes state between two of its statements is
    still read in exactly one state. Inside a caller's transaction it adds nothing (a nested
    block cannot change the isolation level, and a savepoint takes no snapshot): the reads run
    in that transaction, which the caller chose. The engine's own callers read outside one.
    """
    if conn.is_in_transaction():
        yield
        return
    async with conn.transaction(isolation="repeatable_read", readonly=True):
        yield


@asynccontextmanager
async def begun(conn: Conn, begin: str) -> AsyncIterator[None]:
    """A transaction as ``conn.transaction()`` runs one, begun by ``begin`` (a ``BEGIN`` and its
    ``SET LOCAL``s in one round trip: the claim's, the handler flush's); inside a caller's
    transaction, a savepoint as ``conn.transaction()`` nests (the caller's settings kept)."""
    if conn.is_in_transaction():
        async with conn.transaction():
            yield
        return
    await conn.execute(begin)
    try:
        yield
    except BaseException:
        if not conn.is_closed():
            await conn.execute("ROLLBACK")
        raise
    await conn.execute("COMMIT")


@asynccontextmanager
async def pooled(pool: asyncpg.Pool) -> AsyncIterator[PoolConnectionProxy[asyncpg.Record]]:
    """A connection from ``pool`` that always comes back (``give_back``). Every connection the
    engine borrows is borrowed here, except the listener's, held across calls, which goes back
    through ``give_back`` too (``tests/storage/db/test_give_back.py`` checks both)."""
    conn = await pool.acquire()
    try:
        yield conn
    finally:
        await give_back(pool, conn)


async def give_back(pool: asyncpg.Pool, conn: PoolConnectionProxy[asyncpg.Record]) -> None:
    """Return ``conn`` to ``pool``, or terminate it: either way its pool slot is free after.

    ``Pool.release`` can raise before it frees the slot (asyncpg warns about listeners left
    on the connection, an error under ``-W error``) or while it resets the connection (the
    server went away); a slot never freed makes ``Pool.close()`` wait forever. A dead
    connection is terminated without a reset, and so is one given back by a task being
    cancelled (a reset waits on the server; a cancelled task must not wait). A release error
    is logged, not raised: whatever the connection was borrowed for is done by now.

    A task cancelled while the release is under way does not wait for it either, and does not
    touch the connection: asyncpg shields its reset, which goes on and frees the slot (or
    terminates the connection itself if the reset fails). Terminating it here closed it under
    that reset, whose failure nobody retrieved ("Task exception was never retrieved ...
    connection was closed in the middle of operation", once a minute in the console soak).
    """
    raw = connection_of(conn)
    if raw is None:
        return
    task = asyncio.current_task()
    if raw.is_closed() or (task is not None and task.cancelling()):
        raw.terminate()  # frees the slot at once (asyncpg's holder is told on close)
        return
    release = asyncio.ensure_future(pool.release(conn))
    try:
        await asyncio.shield(release)
    except asyncio.CancelledError:
        release.add_done_callback(partial(_released, conn))  # it finishes on its own
        raise
    except Exception:
        _released(conn, release)


def _released(conn: PoolConnectionProxy[asyncpg.Record], release: asyncio.Future[None]) -> None:
    """After ``Pool.release``: a connection it failed to give back is terminated (else its
    slot would never come back) and the failure logged; the failure is retrieved either way."""
    if release.cancelled() or (exc := release.exception()) is None:
        return
    if (raw := connection_of(conn)) is not None:  # still not released
        raw.terminate()
    log.warning("a pooled connection was terminated: releasing it failed (%s)", describe(exc))


def connection_of(conn: PoolConnectionProxy[asyncpg.Record]) -> asyncpg.Connection[Any] | None:
    """The connection behind a borrowed proxy; None once it went back to its pool (released,
    or terminated: a connection whose backend died is handed back by asyncpg itself, and any
    call on its proxy then raises ``InterfaceError``)."""
    raw: asyncpg.Connection[Any] | None = conn._con  # type: ignore[attr-defined]
    return raw


async def close_pool(pool: asyncpg.Pool, within: float | None) -> bool:
    """Close ``pool``: gracefully (every connection given back, then closed) ``within`` that
    many seconds (None: no bound), else by terminating every connection. Returns whether the
    graceful close finished; the pool is closed either way, even when this raises (cancelled,
    or a driver error, raised as it came: translate it at the call)."""
    try:
        async with asyncio.timeout(within):
            await pool.close()
    except TimeoutError:
        return False
    finally:
        pool.terminate()  # a no-op once closed
    return True


@asynccontextmanager
async def acquire(
    pool: asyncpg.Pool, dsn: str | None, operation: str
) -> AsyncIterator[PoolConnectionProxy[asyncpg.Record]]:
    """A pooled connection for one public ``operation``, with every driver error translated:
    while (re)connecting as a connection failure, afterwards as a failure of ``operation``."""
    translator = translate_errors(dsn, operation, connecting=True)
    with translator:
        async with pooled(pool) as conn:
            translator.connecting = False
            yield conn


class translate_errors:
    """Turn driver and socket errors into AwaError subclasses with a message a person can act on.

    ``operation`` names the public call for messages; without one, the block is connecting
    (a timeout there means the server was not reached, a ValueError means a bad DSN).
    """

    def __init__(
        self, dsn: str | None = None, operation: str | None = None, *, connecting: bool = False
    ) -> None:
        self.dsn = dsn
        self.operation = operation or "connect"
        self.connecting = connecting or operation is None

    def __enter__(self) -> Self:
        return self

    async def __aenter__(self) -> Self:
        return self

    async def __aexit__(
        self, exc_type: type[BaseException] | None, exc: BaseException | None, tb: Any
    ) -> None:
        self.__exit__(exc_type, exc, tb)

    def __exit__(
        self, exc_type: type[BaseException] | None, exc: BaseException | None, tb: Any
    ) -> None:
        if exc is None or isinstance(exc, AwaError) or not isinstance(exc, Exception):
            return
        translated = self.translate(exc)
        if translated is not None:
            # Driver messages can echo the DSN: no password leaves this boundary.
            translated.message = redact_secrets(translated.message, self.dsn)
            translated.args = (translated.message,)
            raise translated from exc

    def translate(self, exc: Exception) -> AwaError | None:
        """The engine error for ``exc``, or None to let it through (a bug, not the database)."""
        where = redact_dsn(self.dsn)
        op = self.operation
        if isinstance(exc, asyncpg.ReadOnlySQLTransactionError):
            return ReadOnlyError()
        if isinstance(exc, asyncpg.UndefinedTableError | asyncpg.InvalidSchemaNameError):
            return SchemaNotMigrated()
        if isinstance(
            exc, asyncpg.InvalidPasswordError | asyncpg.InvalidAuthorizationSpecificationError
        ):
            return ConnectionFailed(f"The server at {where} refused the login: {exc}")
        if isinstance(exc, asyncpg.InvalidCatalogNameError):
            return ConnectionFailed(f"The database named in {where} does not exist.")
        if isinstance(exc, asyncpg.InsufficientPrivilegeError):
            # The server's message names the object ("permission denied for schema awa").
            return PermissionDenied(
                f"{op} was refused: {exc}. Run it as a role with that privilege "
                "(for migrate: the database owner, or a role with CREATE on the database)."
            )
        if self.connecting and (
            isinstance(exc, asyncpg.ClientConfigurationError | ValueError | OverflowError)
            and not isinstance(exc, asyncpg.PostgresError)
        ):
            # A DSN asyncpg cannot use (not a postgresql:// URL, a port out of range, ...).
            return ConfigError(f"The connection string is not valid: {exc}")
        if isinstance(exc, asyncpg.InterfaceError) and isinstance(exc, ValueError):
            # asyncpg could not encode an argument; its message quotes the value.
            return DatabaseError(f"{op} was given a value that cannot be sent to PostgreSQL.")
        if self.connecting:
            if isinstance(exc, TimeoutError):
                return ConnectionFailed(
                    f"Could not reach PostgreSQL at {where}: no answer in time."
                )
        elif timeout := _timeout_message(exc, op):
            return OperationTimeout(op, timeout)
        if isinstance(exc, OSError | socket.gaierror | asyncpg.CannotConnectNowError):
            reason = str(exc) or type(exc).__name__
            return ConnectionFailed(f"Could not reach PostgreSQL at {where}: {reason}")
        if isinstance(
            exc,
            asyncpg.ConnectionDoesNotExistError
            | asyncpg.InterfaceError
            | InternalClientError  # asyncpg's state for a connection that died under it
            | asyncpg.PostgresConnectionError
            | asyncpg.OperatorInterventionError,
        ):
            return ConnectionFailed(f"The connection to PostgreSQL was lost during {op}: {exc}")
        if isinstance(exc, asyncpg.PostgresError):
            # Server messages can quote values (job args, outputs): the class and code only.
            return DatabaseError(
                f"{op} failed in PostgreSQL: {type(exc).__name__} (SQLSTATE {exc.sqlstate})."
            )
        return None


def _timeout_message(exc: Exception, operation: str) -> str | None:
    if isinstance(exc, TimeoutError):
        return (
            f"{operation} timed out: PostgreSQL did not answer within the client's "
            "command_timeout, so the statement was cancelled."
        )
    if isinstance(exc, asyncpg.LockNotAvailableError):
        return f"{operation} timed out waiting for a lock (lock_timeout) and was cancelled."
    if isinstance(exc, asyncpg.QueryCanceledError):
        return (
            f"{operation} was cancelled by the server (statement_timeout, or an administrator "
            "cancelled it)."
        )
    return None


@asynccontextmanager
async def connect_once(dsn: str | None) -> AsyncIterator[asyncpg.Connection]:
    """A single plain connection (migrations, probes) with errors translated."""
    with translate_errors(dsn):
        conn = await asyncpg.connect(libpq_order(dsn))
    try:
        yield conn
    finally:
        await conn.close()
