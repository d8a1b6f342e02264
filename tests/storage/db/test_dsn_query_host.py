"""A ``host=`` or ``port=`` in a DSN's query wins over the URL's own, as in libpq: asyncpg
alone let the URL's win, so ``postgresql://u@localhost/db?host=/run/pg`` went to localhost
over TCP instead of the socket in /run/pg (``storage.db.pool.libpq_order``)."""

from __future__ import annotations

from urllib.parse import parse_qs, urlsplit

import pytest

from storage import Client
from storage.db.pool import connect_once, libpq_order


@pytest.mark.parametrize(
    ("dsn", "expected"),
    [
        ("postgresql://u@localhost/db?host=/run/pg", "postgresql://u@/db?host=/run/pg"),
        (  # the URL's port still applies to the query's host, as in libpq
            "postgresql://u:p@localhost:5433/db?host=/run/pg",
            "postgresql://u:p@/db?host=/run/pg&port=5433",
        ),
        (  # a query port wins over the URL's; its hosts move to the query with theirs dropped
            "postgresql://u@h1:1,[::1]:2/db?port=7",
            "postgresql://u@/db?port=7&host=h1,[::1]",
        ),
        ("postgresql://localhost/db?host=/run/pg", "postgresql:///db?host=/run/pg"),
        ("postgresql://u@localhost/db?sslmode=require", None),  # nothing to reorder
        ("postgresql://u@/db?host=/run/pg", None),  # no URL host
        ("postgresql://u@localhost/db?host=", None),  # an empty host= is no host
        ("postgresql://u@localhost/db", None),
    ],
)
def test_the_query_host_and_port_win(dsn: str, expected: str | None) -> None:
    assert libpq_order(dsn) == (expected or dsn)


def _socket_dsn_behind_localhost(dsn: str) -> str:
    """The test server's DSN (its socket directory in ``host=``) with ``localhost`` written in
    the URL, where nothing of this test listens over TCP."""
    parts = urlsplit(dsn)
    socket_dir = parse_qs(parts.query)["host"][-1]
    auth = parts.netloc.rpartition("@")[0]
    if not socket_dir.startswith("/") or not auth:
        pytest.skip("needs a DSN with a user and a unix socket directory in host=")
    return f"postgresql://{auth}@localhost{parts.path}?host={socket_dir}"


async def test_a_dsn_with_localhost_and_a_socket_in_host_connects_to_the_socket(
    pg_dsn: str, migrated_dsn: str, schema: str
) -> None:
    dsn = _socket_dsn_behind_localhost(pg_dsn)
    async with connect_once(dsn) as conn:
        assert await conn.fetchval("SELECT inet_server_addr()") is None  # a unix socket
    async with await Client.connect(dsn, schema) as client:
        assert await client.counts() is not None
