"""What every command shares (the console, ``migrate``, ``serve``, ``worker``): the DSN it
connects to, the one line it fails with, and the connection check made before anything starts.

Below ``cli`` (which only parses and dispatches) and the commands it dispatches to, so none of
them imports another back.
"""

from __future__ import annotations

import os
import sys

from storage import Client, redact_secrets


def resolve_dsn(explicit: str | None, environ: dict[str, str] | None = None) -> str | None:
    """``--dsn``, then AWA_DSN, then DATABASE_URL; None leaves it to libpq's environment."""
    env = os.environ if environ is None else environ
    for candidate in (explicit, env.get("AWA_DSN"), env.get("DATABASE_URL")):
        if candidate:
            return candidate
    return None


def fail(message: str, code: int, dsn: str | None = None) -> int:
    """One line on stderr, passwords masked (those of ``dsn`` and ``PGPASSWORD`` too)."""
    line = " ".join(redact_secrets(message, dsn).split())
    print(f"awa-tui: {line}", file=sys.stderr)
    return code


async def preflight(dsn: str | None, schema: str, read_only: bool) -> None:
    """Connect once before the terminal switches screens, so errors print as one clean line."""
    client = await Client.connect(dsn, schema, read_only=read_only, max_connections=1)
    await client.close()
