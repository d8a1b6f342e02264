"""The worker's metrics port: ``/metrics``, ``/healthz`` and ``/readyz`` on uvicorn, inside the
worker's own event loop (its asyncpg pool belongs to that loop), for as long as the worker runs.

The worker keeps its signal handlers: uvicorn's own (it swaps SIGTERM and SIGINT for its
handler while it serves) are not installed, and the worker stops this server when it stops.
Stopping is bounded: requests in flight get ``GRACE_SECONDS``, then the server task is
cancelled.
"""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import AsyncIterator, Iterator

import uvicorn
from prometheus_client import CollectorRegistry

from awa_tui.http.app import create_probe_app
from awa_tui.http.serve import listen
from storage import Client

GRACE_SECONDS = 2


class _QuietServer(uvicorn.Server):
    """uvicorn without its signal handlers: the worker's stay in place."""

    @contextlib.contextmanager
    def capture_signals(self) -> Iterator[None]:
        yield


@contextlib.asynccontextmanager
async def serving_probes(
    client: Client, registry: CollectorRegistry, host: str, port: int
) -> AsyncIterator[tuple[str, int]]:
    """Serve the probes on ``host:port`` (0: a free port) while the block runs; yields the
    address bound. A port that cannot be bound raises ``OSError`` before anything serves."""
    sock = listen(host, port)
    config = uvicorn.Config(
        create_probe_app(client, registry),
        log_config=None,
        access_log=False,
        lifespan="off",
        server_header=False,
        timeout_graceful_shutdown=GRACE_SECONDS,
    )
    server = _QuietServer(config)
    task = asyncio.create_task(server.serve(sockets=[sock]))
    try:
        bound_host, bound_port = sock.getsockname()[:2]
        yield bound_host, bound_port
    finally:
        server.should_exit = True
        try:
            await asyncio.wait_for(asyncio.shield(task), GRACE_SECONDS + 1.0)
        except TimeoutError:
            task.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await task
        finally:
            sock.close()
