"""Safe by default: the bearer token, read-only mode (every write route refused:
``tests/http/test_write_guards.py``), the 64 KiB body cap (declared or not),
the error body, a log without contents, the last-resort 500, and ``/openapi.json``."""

from __future__ import annotations

import logging
from collections.abc import AsyncIterator
from typing import Any

import httpx
import pytest
from starlette.requests import Request
from starlette.responses import Response

from awa_tui.http.app import create_app
from awa_tui.http.guard import MAX_BODY_BYTES
from storage import Client, JobState
from tests.http.conftest import AUTH, TOKEN, asgi_client, park

ROUTES = [
    ("POST", "/api/callbacks/cb/complete"),
    ("POST", "/api/callbacks/cb/fail"),
    ("POST", "/api/callbacks/cb/retry"),
    ("POST", "/api/callbacks/cb/heartbeat"),
    ("GET", "/api/jobs"),
    ("POST", "/api/jobs"),
    ("GET", "/api/jobs/1"),
    ("GET", "/api/jobs/1/timeline"),
    ("POST", "/api/jobs/1/retry"),
    ("POST", "/api/jobs/1/cancel"),
    ("GET", "/api/kinds"),
    ("GET", "/api/kinds/resize/drift"),
    ("DELETE", "/api/jobs/1"),
    ("POST", "/api/jobs/bulk"),
    ("GET", "/api/queues"),
    ("POST", "/api/queues/mail/pause"),
    ("POST", "/api/queues/mail/resume"),
    ("GET", "/api/dlq"),
    ("POST", "/api/dlq/1/retry"),
    ("POST", "/api/dlq/1/purge"),
    ("GET", "/api/failure-groups"),
    ("GET", "/api/failure-groups/members"),
    ("GET", "/api/failure-groups/outputs"),
    ("POST", "/api/failure-groups/retry"),
    ("POST", "/api/failure-groups/cancel"),
    ("GET", "/api/schedules"),
    ("POST", "/api/schedules/nightly/trigger"),
    ("GET", "/metrics"),
    ("GET", "/api/audit"),
]
OPEN = [("GET", "/healthz"), ("GET", "/readyz")]
"""Health: no token (load balancers send none), no data (tests/http/test_metrics.py)."""


@pytest.fixture
async def anonymous(server_client: Client) -> AsyncIterator[httpx.AsyncClient]:
    """The API with a token, called without one."""
    async with asgi_client(create_app(server_client, token=TOKEN)) as http:
        yield http


@pytest.fixture
async def read_only_api(server_client: Client) -> AsyncIterator[httpx.AsyncClient]:
    async with asgi_client(create_app(server_client, token=TOKEN, read_only=True)) as http:
        http.headers.update(AUTH)
        yield http


@pytest.mark.parametrize(
    "authorization",
    [None, "Bearer wrong-token", f"Basic {TOKEN}", f"Bearer {TOKEN}x", "Bearer \u00e9"],
    ids=["none", "wrong", "basic-scheme", "longer", "non-ascii"],
)
async def test_every_api_route_is_401_without_the_token(
    anonymous: httpx.AsyncClient, authorization: str | None
) -> None:
    headers = {b"Authorization": authorization.encode()} if authorization else {}
    for method, path in ROUTES:
        answer = await anonymous.request(method, path, headers=headers, json={"error": "x"})
        assert (method, path, answer.status_code) == (method, path, 401)
        assert answer.json()["error"] == "unauthorized"
        assert answer.headers["WWW-Authenticate"] == "Bearer"
        assert TOKEN not in answer.text


async def test_the_token_is_not_taken_from_the_query_string(
    anonymous: httpx.AsyncClient,
) -> None:
    answer = await anonymous.get("/api/jobs", params={"token": TOKEN, "access_token": TOKEN})
    assert answer.status_code == 401


async def test_no_auth_serves_without_a_token(server_client: Client) -> None:
    async with asgi_client(create_app(server_client, token=None)) as http:
        assert (await http.get("/api/jobs")).status_code == 200


async def test_read_only_mode_reads_and_changes_nothing(
    read_only_api: httpx.AsyncClient, client: Client, kind: str
) -> None:
    job_id, callback_id = await park(client, kind)
    refused = await read_only_api.post(f"/api/callbacks/{callback_id}/complete", json={})
    assert refused.status_code == 403
    assert (await read_only_api.get(f"/api/jobs/{job_id}")).json()["state"] == "waiting_external"
    assert (await read_only_api.get("/api/jobs")).status_code == 200
    row = await client.get_job(job_id)
    assert row is not None
    assert row.state is JobState.WAITING_EXTERNAL


async def test_a_read_only_client_makes_a_read_only_api(migrated_dsn: str, schema: str) -> None:
    async with (
        await Client.connect(migrated_dsn, schema, read_only=True) as reader,
        asgi_client(create_app(reader, token=TOKEN)) as http,
    ):
        answer = await http.post("/api/jobs/1/cancel", headers=AUTH)
        assert (answer.status_code, answer.json()["error"]) == (403, "read_only")


async def test_401_comes_before_403(server_client: Client) -> None:
    async with asgi_client(create_app(server_client, token=TOKEN, read_only=True)) as http:
        assert (await http.post("/api/jobs/1/cancel")).status_code == 401


async def test_a_declared_body_over_64_kib_is_413(api: httpx.AsyncClient) -> None:
    answer = await api.post(
        "/api/callbacks/cb/complete",
        content=b"{" + b" " * MAX_BODY_BYTES + b"}",
        headers={"Content-Type": "application/json"},
    )
    assert answer.status_code == 413
    assert answer.json() == {
        "error": "body_too_large",
        "message": "The request body is over 65,536 bytes, this API's limit.",
    }


async def test_an_undeclared_body_is_cut_off_at_64_kib_while_it_is_read(
    api: httpx.AsyncClient, client: Client, kind: str
) -> None:
    """Chunked, no Content-Length: counted as it arrives; the job is left as it was."""
    job_id, callback_id = await park(client, kind)
    sent: list[int] = []

    async def chunks() -> AsyncIterator[bytes]:
        yield b'{"output": "'
        for _ in range(64):
            sent.append(4096)
            yield b"x" * 4096
        yield b'"}'

    answer = await api.post(f"/api/callbacks/{callback_id}/complete", content=chunks())
    assert answer.status_code == 413
    assert sum(sent) < 64 * 4096  # refused before the sender finished
    row = await client.get_job(job_id)
    assert row is not None
    assert row.state is JobState.WAITING_EXTERNAL


async def test_a_body_of_exactly_64_kib_is_read(api: httpx.AsyncClient) -> None:
    body = b'{"error": "' + b"x" * (MAX_BODY_BYTES - 13) + b'"}'
    assert len(body) == MAX_BODY_BYTES
    answer = await api.post(
        "/api/callbacks/cb/fail", content=body, headers={"Content-Type": "application/json"}
    )
    assert answer.status_code == 400  # read, then refused for its content (error too long)
    assert answer.json()["message"].startswith("body.error: ")


async def test_an_unknown_path_answers_the_error_body(api: httpx.AsyncClient) -> None:
    answer = await api.get("/api/nothing")
    assert answer.status_code == 404
    assert answer.json() == {
        "error": "not_found",
        "message": "No such endpoint; /openapi.json lists them.",
    }


async def test_the_log_has_routes_and_statuses_never_contents(
    api: httpx.AsyncClient, client: Client, kind: str, caplog: pytest.LogCaptureFixture
) -> None:
    caplog.set_level(logging.DEBUG)
    job_id, callback_id = await park(client, kind, args={"card": "4rgs-s3cret"})
    secrets = ["4rgs-s3cret", "0utput-s3cret", "p4yload-s3cret", TOKEN, callback_id]
    await api.post(
        f"/api/callbacks/{callback_id}/complete",
        json={"output": {"bad": "0utput-s3cret\u0000"}, "payload": "p4yload-s3cret"},
    )
    await api.post(
        f"/api/callbacks/{callback_id}/complete",
        json={"output": {"receipt": "0utput-s3cret"}, "payload": {"p": "p4yload-s3cret"}},
    )
    detail = await api.get(f"/api/jobs/{job_id}")
    assert "0utput-s3cret" in detail.text
    await api.get("/api/jobs")
    server_side = [r for r in caplog.records if not r.name.startswith(("httpx", "httpcore"))]
    logged = "\n".join(r.getMessage() for r in server_side)  # the test's client logs URLs
    assert "POST /api/callbacks/{callback_id}/complete 400" in logged
    assert "POST /api/callbacks/{callback_id}/complete 200" in logged
    assert f"GET /api/jobs/{job_id} 200" in logged
    assert [secret for secret in secrets if secret in logged] == []


async def test_an_unexpected_error_is_500_logged_by_type_and_place_only(
    server_client: Client, caplog: pytest.LogCaptureFixture
) -> None:
    async def broken(request: Request) -> Response:
        raise ValueError(f"value 0utput-s3cret in {await request.body()!r}")

    app = create_app(server_client, token=None)
    app.add_api_route("/api/broken", broken, methods=["POST"])
    caplog.set_level(logging.DEBUG)
    async with asgi_client(app) as http:
        answer = await http.post("/api/broken", content=b"0utput-s3cret")
    assert answer.status_code == 500
    assert answer.json() == {
        "error": "internal",
        "message": "The server hit an internal error; see its log.",
    }
    assert "internal error: ValueError in " in caplog.text
    assert "0utput-s3cret" not in caplog.text


def _template(path: str) -> str:
    """A path of ``ROUTES`` as ``/openapi.json`` names it."""
    for value, name in (
        ("cb", "callback_id"),
        ("1", "job_id"),
        ("mail", "queue"),
        ("nightly", "name"),
        ("resize", "kind"),
    ):
        path = path.replace(f"/{value}/", f"/{{{name}}}/")
        path = path.removesuffix(f"/{value}") + (
            f"/{{{name}}}" if path.endswith(f"/{value}") else ""
        )
    return path


async def test_openapi_describes_every_path_and_the_bearer_scheme(
    anonymous: httpx.AsyncClient,
) -> None:
    answer = await anonymous.get("/openapi.json")
    assert answer.status_code == 200
    spec: dict[str, Any] = answer.json()
    paths = {(method.upper(), path) for path, ops in spec["paths"].items() for method in ops}
    assert paths == {(m, _template(p)) for m, p in [*ROUTES, *OPEN]}
    assert spec["components"]["securitySchemes"]["HTTPBearer"]["scheme"] == "bearer"
    complete = spec["paths"]["/api/callbacks/{callback_id}/complete"]["post"]
    assert set(complete["responses"]) >= {"200", "400", "401", "403", "404", "409", "413"}
    body = spec["components"]["schemas"]["CompleteBody"]["properties"]
    assert set(body) == {"payload", "output", "run_lease", "reason"}
    job = spec["components"]["schemas"]["JobOut"]["properties"]
    assert {"output", "errors", "kept_output_position"} <= set(job)


async def test_a_read_only_database_session_answers_403_and_the_job_waits(
    migrated_dsn: str, schema: str, client: Client, kind: str
) -> None:
    """Not --read-only, but the session is (as on a replica): the engine refuses the write."""
    job_id, callback_id = await park(client, kind)
    separator = "&" if "?" in migrated_dsn else "?"
    replica_like = f"{migrated_dsn}{separator}default_transaction_read_only=on"
    async with (
        await Client.connect(replica_like, schema) as reader,
        asgi_client(create_app(reader, token=TOKEN)) as http,
    ):
        assert reader.read_only is False
        answer = await http.post(f"/api/callbacks/{callback_id}/complete", headers=AUTH)
        assert (answer.status_code, answer.json()["error"]) == (403, "read_only")
    row = await client.get_job(job_id)
    assert row is not None
    assert row.state is JobState.WAITING_EXTERNAL
