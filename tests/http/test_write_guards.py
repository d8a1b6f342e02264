"""Every write route refuses what the console refuses, whatever route it is: a ``--read-only``
server and a read-only database session (a replica) answer ``403 read_only``, a read token
``403 forbidden``, and nothing is written (no audit entry, which every write records in its own
transaction). The routes come from the app's own route table (FastAPI's
``iter_route_contexts``, hidden routes too), and each must have a request here that would
succeed on a writable server (a job in a state the action admits), so a new write route cannot
pass unchecked, and a guard is proven on requests that would otherwise change something."""

from __future__ import annotations

import itertools
import re
from collections.abc import AsyncIterator, Awaitable, Callable
from contextlib import asynccontextmanager
from datetime import timedelta
from typing import Any

import httpx
import pytest
from fastapi import FastAPI
from fastapi.routing import iter_route_contexts

from awa_tui.http.app import create_app
from awa_tui.http.tokens import API_TOKEN_NAME, parse
from storage import Client, Job, WaitForCallback
from storage.testing import work_one
from tests.http.conftest import AUTH, TOKEN, asgi_client
from tests.http.test_tokens import READER, TOML, bearer

Route = tuple[str, str]
Body = dict[str, Any] | None
Target = Callable[[Client, str], Awaitable[Any]]
"""Makes what a route acts on (a job in the right state, a queue, a schedule) and returns it:
the value of the route's path parameter, or what its body names."""


def write_routes(app: FastAPI) -> set[Route]:
    """Every (method, path) of ``app`` that is not a read."""
    return {
        (method, context.path_format)
        for context in iter_route_contexts(app.routes)
        if context.path_format is not None
        for method in context.methods or ()
        if method not in {"GET", "HEAD", "OPTIONS"}
    }


def register(client: Client, kind: str) -> None:
    """``do``: ``wait`` parks for a callback, ``fail`` raises, anything else completes."""

    @client.task(kind=kind)
    async def work(job: Job[Any]) -> WaitForCallback | None:
        if job.args["do"] == "wait":
            return WaitForCallback(await job.register_callback(timeout_seconds=600))
        if job.args["do"] == "fail":
            raise RuntimeError("the gateway timed out")
        return None


_names = itertools.count()


async def run(client: Client, kind: str, do: str, *, queue: str = "", tries: int = 1) -> int:
    """One job run once, in a queue of its own unless ``queue`` names one (so the run takes
    this job, not one an earlier request left)."""
    queue = queue or f"own_{next(_names)}"
    job = await client.insert({"do": do}, kind=kind, queue=queue, max_attempts=tries)
    await work_one(client, [queue])
    return job.id


async def callback(client: Client, kind: str) -> str:
    row = await client.get_job(await run(client, kind, "wait"))
    assert row is not None
    assert row.callback is not None
    return row.callback.callback_id


async def failed(client: Client, kind: str) -> int:
    return await run(client, kind, "fail")


async def completed(client: Client, kind: str) -> int:
    return await run(client, kind, "ok")


async def available(client: Client, kind: str) -> int:
    return (await client.insert({"do": "ok"}, kind=kind, queue="idle")).id


async def dead(client: Client, kind: str) -> int:
    queue = f"dead_{next(_names)}"
    await client.configure_queue(queue, dlq=True)
    return await run(client, kind, "fail", queue=queue)


async def published(client: Client, kind: str) -> str:
    await client.sync_descriptors()
    return kind


async def queue(client: Client, kind: str) -> str:
    return f"queue_{next(_names)}"


async def paused(client: Client, kind: str) -> str:
    name = f"paused_{next(_names)}"
    await client.pause_queue(name)
    return name


async def group_of(client: Client, kind: str, tries: int) -> Body:
    await run(client, kind, "fail", queue="grouped", tries=tries)
    (group,) = await client.failure_groups(kind=kind, queue="grouped")
    return {"kind": kind, "signature": group.signature, "queue": "grouped", "dry_run": False}


async def failed_group(client: Client, kind: str) -> Body:
    return await group_of(client, kind, 1)


async def retryable_group(client: Client, kind: str) -> Body:
    return await group_of(client, kind, 3)


async def schedule(client: Client, kind: str) -> str:
    client.periodic({"do": "ok"}, kind=kind, every=timedelta(hours=1), name=f"{kind}_hourly")
    await client.store_schedules()
    return f"{kind}_hourly"


def no_body(made: Any) -> Body:
    return None


def itself(made: Any) -> Body:
    body: Body = made
    return body


VALID: dict[Route, tuple[Target, Callable[[Any], Body]]] = {
    ("POST", "/api/callbacks/{callback_id}/complete"): (callback, lambda _: {"output": 1}),
    ("POST", "/api/callbacks/{callback_id}/fail"): (callback, lambda _: {"error": "declined"}),
    ("POST", "/api/callbacks/{callback_id}/retry"): (callback, no_body),
    ("POST", "/api/callbacks/{callback_id}/heartbeat"): (callback, no_body),
    ("POST", "/api/jobs"): (published, lambda kind: {"kind": kind, "args": {"do": "ok"}}),
    ("POST", "/api/jobs/{job_id}/retry"): (failed, no_body),
    ("POST", "/api/jobs/{job_id}/cancel"): (available, no_body),
    ("DELETE", "/api/jobs/{job_id}"): (completed, no_body),
    ("POST", "/api/jobs/bulk"): (
        failed,
        lambda job: {"action": "retry", "ids": [job], "dry_run": False},
    ),
    ("POST", "/api/queues/{queue}/pause"): (queue, no_body),
    ("POST", "/api/queues/{queue}/resume"): (paused, no_body),
    ("POST", "/api/dlq/{job_id}/retry"): (dead, no_body),
    ("POST", "/api/dlq/{job_id}/purge"): (dead, no_body),
    ("POST", "/api/failure-groups/retry"): (failed_group, itself),
    ("POST", "/api/failure-groups/cancel"): (retryable_group, itself),  # cancels retryable
    ("POST", "/api/schedules/{name}/trigger"): (schedule, no_body),
}
"""A request for every write route that would succeed on a writable server."""


async def request_for(client: Client, kind: str, route: Route) -> tuple[str, Body]:
    target, body = VALID[route]
    made = await target(client, kind)
    return re.sub(r"\{[^}]+\}", str(made), route[1]), body(made)


@asynccontextmanager
async def guarded(
    guard: str, dsn: str, schema: str, server_client: Client
) -> AsyncIterator[tuple[FastAPI, dict[str, str]]]:
    """The app behind ``guard`` and the headers its caller sends."""
    if guard == "read-only database session":
        separator = "&" if "?" in dsn else "?"
        replica_like = f"{dsn}{separator}default_transaction_read_only=on"
        async with await Client.connect(replica_like, schema) as reader:
            yield create_app(reader, token=TOKEN), AUTH
    elif guard == "read-only server":
        yield create_app(server_client, token=TOKEN, read_only=True), AUTH
    else:
        yield create_app(server_client, tokens=parse(TOML, "test", toml=True)), bearer(READER)


CALLERS = {API_TOKEN_NAME, "grafana"}
"""The API's callers here (the setup writes as the test's own client, audited too)."""
REFUSED = {
    "read-only server": "read_only",
    "read-only database session": "read_only",
    "read token": "forbidden",
}


@pytest.mark.parametrize("guard", list(REFUSED))
async def test_every_write_route_is_refused_and_writes_nothing(
    migrated_dsn: str, schema: str, server_client: Client, client: Client, kind: str, guard: str
) -> None:
    register(client, kind)
    async with guarded(guard, migrated_dsn, schema, server_client) as (app, headers):
        routes = write_routes(app)
        assert routes == VALID.keys(), "a write route without a valid request in VALID"
        async with asgi_client(app) as http:
            for route in sorted(routes):
                path, body = await request_for(client, kind, route)
                answer = await http.request(route[0], path, json=body, headers=headers)
                assert (route, answer.status_code) == (route, 403), answer.text
                assert answer.json()["error"] == REFUSED[guard]
                assert answer.text.count("\n") == 0  # one line, as every error body
    if guard == "read token":
        assert answer.json()["message"] == (
            "The token grafana has the read role; this call changes jobs and needs a write token."
        )
    assert [e for e in await client.list_audit() if e.actor in CALLERS] == []


async def test_each_request_here_succeeds_on_a_writable_server(
    api: httpx.AsyncClient, client: Client, kind: str
) -> None:
    """Else a guard could pass for a request the engine would refuse anyway."""
    register(client, kind)
    for route in sorted(VALID):
        path, body = await request_for(client, kind, route)
        answer = await api.request(route[0], path, json=body)
        assert (route, answer.status_code in (200, 201, 204)) == (route, True), answer.text
    assert len([e for e in await client.list_audit() if e.actor in CALLERS]) >= len(VALID)
