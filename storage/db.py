"""Connections: DSN checks, the pool and its codecs, and the one place driver errors are
translated."""

from __future__ import annotations

import re
import socket
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from typing import Any, TypeAlias

import asyncpg
import orjson
from asyncpg.pool import PoolConnectionProxy

from storage.errors import (
    AwaError,
    ConfigError,
    ConnectionFailed,
    ReadOnlyError,
    SchemaNotMigrated,
)
from storage.redact import redact_dsn as redact_dsn
from storage.redact import redact_secrets

SCHEMA_NAME = re.compile(r"^[a-z_][a-z0-9_]*$")

# A plain connection or one borrowed from a pool: engine functions accept either.
Conn: TypeAlias = "asyncpg.Connection[asyncpg.Record] | PoolConnectionProxy[asyncpg.Record]"


def check_schema_name(schema: str) -> str:
    """Queue-storage schema names are interpolated into SQL, so only plain lower-case names pass."""
    if not SCHEMA_NAME.match(schema):
        raise ConfigError(
            f"Schema name {schema!r} is not allowed: "
            "use lower-case letters, digits and underscores."
        )
    return schema


def _encode_jsonb(value: Any) -> bytes:
    # bytes are JSON text already serialized by storage.codec: sent as is, not re-encoded.
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


async def create_pool(
    dsn: str | None,
    schema: str,
    *,
    min_size: int = 1,
    max_size: int = 10,
    read_only: bool = False,
) -> asyncpg.Pool:
    """A pool whose connections see ``schema`` first and speak orjson for json and jsonb."""
    # Startup settings, not SET: the pool's RESET ALL on release returns to these.
    settings = {"search_path": f"{check_schema_name(schema)}, public"}
    if read_only:
        settings["default_transaction_read_only"] = "on"
    with translate_errors(dsn):
        return await asyncpg.create_pool(
            dsn,
            min_size=min_size,
            max_size=max_size,
            init=_init_connection,
            server_settings=settings,
            command_timeout=60,
        )


class translate_errors:
    """Turn driver and socket errors into AwaError subclasses with a message a person can act on."""

    def __init__(self, dsn: str | None = None) -> None:
        self.dsn = dsn

    def __enter__(self) -> None:
        return None

    async def __aenter__(self) -> None:
        return None

    async def __aexit__(
        self, exc_type: type[BaseException] | None, exc: BaseException | None, tb: Any
    ) -> None:
        self.__exit__(exc_type, exc, tb)

    def __exit__(
        self, exc_type: type[BaseException] | None, exc: BaseException | None, tb: Any
    ) -> None:
        if exc is None or isinstance(exc, AwaError):
            return
        try:
            self._translate(exc)
        except AwaError as translated:
            # Driver messages can echo the DSN: no password leaves this boundary.
            translated.message = redact_secrets(translated.message, self.dsn)
            translated.args = (translated.message,)
            raise translated from exc

    def _translate(self, exc: BaseException) -> None:
        where = redact_dsn(self.dsn)
        if isinstance(exc, asyncpg.ReadOnlySQLTransactionError):
            raise ReadOnlyError() from exc
        if isinstance(exc, asyncpg.UndefinedTableError | asyncpg.InvalidSchemaNameError):
            raise SchemaNotMigrated() from exc
        if isinstance(
            exc, asyncpg.InvalidPasswordError | asyncpg.InvalidAuthorizationSpecificationError
        ):
            raise ConnectionFailed(f"The server at {where} refused the login: {exc}") from exc
        if isinstance(exc, asyncpg.InvalidCatalogNameError):
            raise ConnectionFailed(f"The database named in {where} does not exist.") from exc
        if isinstance(exc, asyncpg.ClientConfigurationError | ValueError) and not isinstance(
            exc, asyncpg.PostgresError
        ):
            raise ConfigError(f"The connection string is not valid: {exc}") from exc
        if isinstance(
            exc, OSError | socket.gaierror | TimeoutError | asyncpg.CannotConnectNowError
        ):
            raise ConnectionFailed(f"Could not reach PostgreSQL at {where}: {exc}") from exc
        if isinstance(exc, asyncpg.ConnectionDoesNotExistError | asyncpg.InterfaceError):
            raise ConnectionFailed(f"The connection to PostgreSQL was lost: {exc}") from exc
        return


@asynccontextmanager
async def connect_once(dsn: str | None) -> AsyncIterator[asyncpg.Connection]:
    """A single plain connection (migrations, probes) with errors translated."""
    with translate_errors(dsn):
        conn = await asyncpg.connect(dsn)
    try:
        yield conn
    finally:
        await conn.close()
