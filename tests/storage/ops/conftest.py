"""Fixtures of the operator tests."""

from __future__ import annotations

from collections.abc import AsyncIterator

import pytest

from storage import Client


@pytest.fixture
async def console(migrated_dsn: str, schema: str) -> AsyncIterator[Client]:
    """A second client on the same schema that registers no tasks, as the console's and the
    HTTP server's do not."""
    async with await Client.connect(migrated_dsn, schema) as c:
        yield c
