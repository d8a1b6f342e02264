"""``POST /api/jobs``: an operator's enqueue of a new job of a known kind, over the engine's
``enqueue_job`` (the console's form on Kinds): 201 with the job and its Location, audited as
the caller's token name; args that do not fit the kind's published args schema 400 with the
path, an unknown kind 422, both writing nothing; a read token 403 (``test_safety`` and
``test_tokens`` also walk the route with every write)."""

from __future__ import annotations

from collections.abc import AsyncIterator
from typing import Any

import httpx
import pytest
from pydantic import BaseModel

from awa_tui.http.app import create_app
from awa_tui.http.tokens import parse
from storage import Client, Job
from tests.http.conftest import asgi_client
from tests.http.test_tokens import READER, TOML, WRITER, bearer

SECRET = "4rgs-s3cret"


class Invoice(BaseModel):
    number: int
    memo: str = ""


async def _noop(job: Job[Any]) -> None:
    del job


@pytest.fixture
async def published(client: Client, kind: str) -> str:
    """``kind`` with its args schema and queue published by a runtime (the worker client)."""
    client.task(Invoice, kind=kind, queue="billing")(_noop)
    await client.sync_descriptors()
    return kind


@pytest.fixture
async def named(server_client: Client) -> AsyncIterator[httpx.AsyncClient]:
    async with asgi_client(create_app(server_client, tokens=parse(TOML, "t", toml=True))) as h:
        yield h


async def _enqueue(http: httpx.AsyncClient, body: dict[str, Any]) -> httpx.Response:
    """``POST /api/jobs`` with the write token ``ci``."""
    return await http.post("/api/jobs", headers=bearer(WRITER), json=body)


async def test_an_enqueue_is_201_with_the_job_and_audited_as_the_token(
    named: httpx.AsyncClient, server_client: Client, published: str
) -> None:
    answer = await _enqueue(
        named, {"kind": published, "args": {"number": 7, "memo": SECRET}, "reason": "INC-3"}
    )
    assert answer.status_code == 201, answer.text
    job = answer.json()
    assert (job["kind"], job["queue"], job["state"], job["args"]) == (
        published,
        "billing",
        "available",
        {"number": 7, "memo": SECRET},
    )
    assert answer.headers["Location"] == f"/api/jobs/{job['id']}"
    (entry,) = await server_client.list_audit(job_id=job["id"])
    assert (entry.action, entry.actor, entry.reason, entry.queue) == (
        "enqueue",
        "ci",
        "INC-3",
        "billing",
    )
    trail = await named.get("/api/audit", headers=bearer(READER))
    assert trail.json()["entries"][0]["args_size"] == entry.args_size
    assert SECRET not in trail.text


async def test_a_queue_priority_and_run_at_are_taken(
    named: httpx.AsyncClient, published: str
) -> None:
    answer = await _enqueue(
        named,
        {
            "kind": published,
            "args": {"number": 1},
            "queue": "urgent",
            "priority": 1,
            "run_at": "2999-01-01T00:00:00Z",
        },
    )
    assert answer.status_code == 201, answer.text
    job = answer.json()
    assert (job["queue"], job["priority"], job["state"]) == ("urgent", 1, "scheduled")
    naive = await _enqueue(named, {"kind": published, "args": {}, "run_at": "2999-01-01T00:00:00"})
    assert (naive.status_code, naive.json()["error"]) == (400, "invalid_request")


async def test_args_that_do_not_fit_are_400_with_the_path_and_write_nothing(
    named: httpx.AsyncClient, server_client: Client, published: str
) -> None:
    answer = await _enqueue(named, {"kind": published, "args": {"number": SECRET}})
    assert answer.status_code == 400
    body = answer.json()
    assert (body["error"], body["path"]) == ("invalid_args", "$.number")
    assert "nothing was enqueued" in body["message"]
    assert SECRET not in answer.text
    assert await server_client.list_jobs() == []
    assert await server_client.list_audit() == []


async def test_an_unknown_kind_is_422_and_writes_nothing(
    named: httpx.AsyncClient, server_client: Client, schema: str
) -> None:
    answer = await _enqueue(named, {"kind": f"{schema}_nope", "args": {}})
    assert answer.status_code == 422
    assert answer.json()["error"] == "unknown_kind"
    assert f"kind '{schema}_nope'" in answer.json()["message"]
    assert await server_client.list_jobs() == []


async def test_a_read_token_is_403_and_writes_nothing(
    named: httpx.AsyncClient, server_client: Client, published: str
) -> None:
    answer = await named.post(
        "/api/jobs", headers=bearer(READER), json={"kind": published, "args": {"number": 1}}
    )
    assert (answer.status_code, answer.json()["error"]) == (403, "forbidden")
    assert await server_client.list_jobs() == []


async def test_the_route_is_in_openapi_with_its_body(server_client: Client) -> None:
    spec = create_app(server_client, token="t").openapi()
    post = spec["paths"]["/api/jobs"]["post"]
    assert set(post["responses"]) >= {"201", "400", "422"}
    body = spec["components"]["schemas"]["EnqueueBody"]
    assert set(body["required"]) == {"kind", "args"}
