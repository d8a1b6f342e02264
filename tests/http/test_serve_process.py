"""A real ``awa-tui serve`` process over TCP: it refuses to start without a token, asks for
the token, completes a callback with an output, lists by time (a bad time is a 400, no
traceback), logs no contents or query values, and on SIGTERM stops with exit code 0, its port
closed and its database sessions gone. Also the refusals at start."""

from __future__ import annotations

import asyncio
import os
import signal
import socket
import sys
from collections.abc import AsyncIterator
from dataclasses import dataclass

import asyncpg
import httpx
import pytest

from awa_tui.http.serve import listen
from storage import Client
from tests.http.conftest import AUTH, TOKEN, park

DEADLINE = 60.0


@dataclass
class Served:
    process: asyncio.subprocess.Process
    url: str
    application_name: str


def _with_application_name(dsn: str, name: str) -> str:
    return f"{dsn}{'&' if '?' in dsn else '?'}application_name={name}"


async def _start(*args: str, token: str | None = TOKEN) -> asyncio.subprocess.Process:
    env = {k: v for k, v in os.environ.items() if k != "AWA_API_TOKEN"}
    if token is not None:
        env["AWA_API_TOKEN"] = token
    return await asyncio.create_subprocess_exec(
        sys.executable,
        "-m",
        "awa_tui",
        "serve",
        *args,
        env=env,
        stdout=asyncio.subprocess.PIPE,
        stderr=asyncio.subprocess.PIPE,
    )


@pytest.fixture
async def served(migrated_dsn: str, schema: str) -> AsyncIterator[Served]:
    name = f"awa_http_{schema}"
    process = await _start(
        "--dsn", _with_application_name(migrated_dsn, name), "--schema", schema, "--port", "0"
    )
    try:
        assert process.stdout is not None
        line = (await asyncio.wait_for(process.stdout.readline(), DEADLINE)).decode()
        assert line.startswith("awa-tui: serving http://127.0.0.1:"), line
        yield Served(process, line.split()[2], name)
    finally:
        if process.returncode is None:
            process.kill()
            await process.wait()


async def _sessions(conn: asyncpg.Connection, name: str) -> int:
    count: int = await conn.fetchval(
        "SELECT count(*) FROM pg_stat_activity WHERE application_name = $1", name
    )
    return count


async def test_serve_over_tcp_then_sigterm_leaves_nothing_running(
    served: Served, client: Client, kind: str, conn: asyncpg.Connection
) -> None:
    job_id, callback_id = await park(client, kind, args={"card": "4rgs-s3cret"})
    async with httpx.AsyncClient(base_url=served.url, timeout=DEADLINE) as http:
        assert (await http.get("/api/jobs")).status_code == 401
        answer = await http.post(
            f"/api/callbacks/{callback_id}/complete",
            json={"output": {"receipt": "0utput-s3cret"}, "payload": "p4yload-s3cret"},
            headers=AUTH,
        )
        assert answer.status_code == 200
        detail = await http.get(f"/api/jobs/{job_id}", headers=AUTH)
        assert detail.json()["output"] == {"receipt": "0utput-s3cret"}
        recent = {"since": "1h", "sort": "-when", "kind": kind}
        listed = (await http.get("/api/jobs", params=recent, headers=AUTH)).json()
        assert [row["id"] for row in listed["jobs"]] == [job_id]
        refused = await http.get("/api/jobs", params={"since": "s00n-s3cret"}, headers=AUTH)
        assert (refused.status_code, refused.json()["error"]) == (400, "invalid_filter")
    assert await _sessions(conn, served.application_name) >= 1
    served.process.send_signal(signal.SIGTERM)
    assert await asyncio.wait_for(served.process.wait(), DEADLINE) == 0
    assert served.process.stderr is not None
    log = (await served.process.stderr.read()).decode()
    assert "POST /api/callbacks/{callback_id}/complete 200" in log
    assert "HTTP/1.1" not in log  # uvicorn's access log (which shows paths) is off
    assert "GET /api/jobs 400" in log
    assert "Traceback" not in log
    leaked = ["4rgs-s3cret", "0utput-s3cret", "p4yload-s3cret", "s00n-s3cret", TOKEN, callback_id]
    assert [secret for secret in leaked if secret in log] == []
    host, port = served.url.removeprefix("http://").rsplit(":", 1)
    with pytest.raises(ConnectionRefusedError):
        socket.create_connection((host, int(port)), timeout=5).close()
    for _ in range(int(DEADLINE / 0.05)):  # a backend leaves pg_stat_activity shortly after
        if await _sessions(conn, served.application_name) == 0:
            break
        await asyncio.sleep(0.05)
    assert await _sessions(conn, served.application_name) == 0


async def test_no_auth_on_loopback_serves_without_a_token_and_sigint_is_130(
    migrated_dsn: str, schema: str
) -> None:
    process = await _start(
        "--dsn", migrated_dsn, "--schema", schema, "--port", "0", "--no-auth", token=None
    )
    try:
        assert process.stdout is not None
        line = (await asyncio.wait_for(process.stdout.readline(), DEADLINE)).decode()
        assert line.rstrip().endswith(", no auth"), line
        async with httpx.AsyncClient(base_url=line.split()[2], timeout=DEADLINE) as http:
            assert (await http.get("/api/jobs")).status_code == 200
        process.send_signal(signal.SIGINT)
        assert await asyncio.wait_for(process.wait(), DEADLINE) == 130
    finally:
        if process.returncode is None:
            process.kill()
            await process.wait()


@pytest.mark.parametrize(
    ("args", "token", "message"),
    [
        ((), None, "Set AWA_API_TOKEN"),
        (("--no-auth", "--host", "0.0.0.0"), None, "--no-auth is allowed only on a loopback"),
        (("--port", "70000"), TOKEN, "--port 70000 is not a port number"),
        (("--schema", "Bad-Name"), TOKEN, "Bad-Name"),
    ],
)
async def test_serve_refuses_to_start_with_exit_code_2(
    args: tuple[str, ...], token: str | None, message: str
) -> None:
    process = await _start(*args, token=token)
    stdout, stderr = await asyncio.wait_for(process.communicate(), DEADLINE)
    assert process.returncode == 2
    assert stdout == b""
    assert message in stderr.decode()
    assert len(stderr.decode().strip().splitlines()) == 1


async def test_a_taken_port_is_exit_code_2(migrated_dsn: str, schema: str) -> None:
    with socket.create_server(("127.0.0.1", 0)) as taken:
        port = str(taken.getsockname()[1])
        process = await _start("--dsn", migrated_dsn, "--schema", schema, "--port", port)
        _, stderr = await asyncio.wait_for(process.communicate(), DEADLINE)
    assert process.returncode == 2
    assert f"Cannot listen on 127.0.0.1:{port}" in stderr.decode()


async def test_an_unreachable_database_is_exit_code_3_with_the_password_masked() -> None:
    process = await _start("--dsn", "postgresql://u:pw-s3cret@127.0.0.1:1/db")
    _, stderr = await asyncio.wait_for(process.communicate(), DEADLINE)
    assert process.returncode == 3
    assert "pw-s3cret" not in stderr.decode()
    assert "Could not reach PostgreSQL" in stderr.decode()


async def test_connections_to_the_listening_socket_have_nagle_off() -> None:
    """asyncio sets TCP_NODELAY only on sockets whose protocol says TCP; without it each
    answer waited for a delayed ACK (~40 ms a request)."""
    sock = listen("127.0.0.1", 0)
    nodelay: asyncio.Future[int] = asyncio.get_running_loop().create_future()

    def accepted(_reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        nodelay.set_result(
            writer.get_extra_info("socket").getsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY)
        )
        writer.close()

    async with await asyncio.start_server(accepted, sock=sock):
        _, writer = await asyncio.open_connection(*sock.getsockname()[:2])
        assert await asyncio.wait_for(nodelay, DEADLINE) != 0
        writer.close()
