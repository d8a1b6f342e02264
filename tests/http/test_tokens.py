"""Named tokens with roles: the file and ``AWA_API_TOKENS`` formats, ``AWA_API_TOKEN`` as the
write token ``api``, a read token let read (and refused on every write route:
``tests/http/test_write_guards.py``), the caller's name as the audit actor, and a bad tokens
file refused at start (exit code 2, one line, no token in it)."""

from __future__ import annotations

import hashlib
from collections.abc import AsyncIterator
from pathlib import Path

import httpx
import pytest
from fastapi import Depends, Request

from awa_tui.http.app import create_app
from awa_tui.http.auth import actor_of, authorized
from awa_tui.http.serve import main
from awa_tui.http.tokens import NamedToken, Role, TokenFileError, load, parse
from storage import Client
from tests.http.conftest import asgi_client
from tests.http.test_safety import ROUTES

READER, WRITER = "reader-s3cret-token", "writer-s3cret-token"
TOML = f"""
[[token]]
name = "grafana"
role = "read"
sha256 = "{hashlib.sha256(READER.encode()).hexdigest()}"

[[token]]
name = "ci"
role = "write"
token = "{WRITER}"
"""


def bearer(token: str) -> dict[str, str]:
    return {"Authorization": f"Bearer {token}"}


@pytest.fixture
async def named_api(server_client: Client) -> AsyncIterator[httpx.AsyncClient]:
    app = create_app(server_client, tokens=parse(TOML, "test", toml=True))

    async def whoami(request: Request) -> dict[str, str]:
        return {"actor": actor_of(request)}

    app.add_api_route("/api/whoami", whoami, dependencies=[Depends(authorized)])
    async with asgi_client(app) as http:
        yield http


def test_the_toml_and_json_forms_and_the_single_token_combine(tmp_path: Path) -> None:
    path = tmp_path / "tokens.toml"
    path.write_text(TOML)
    listed = '[{"name": "ops", "role": "write", "token": "ops-token"}]'
    tokens = load(path, {"AWA_API_TOKENS": listed, "AWA_API_TOKEN": "single"})
    assert [(t.name, t.role) for t in tokens] == [
        ("grafana", Role.READ),
        ("ci", Role.WRITE),
        ("ops", Role.WRITE),
        ("api", Role.WRITE),
    ]
    assert tokens[0].digest == hashlib.sha256(READER.encode()).digest()
    assert load(None, {}) == []


async def test_a_read_token_reads_and_a_write_token_writes(
    named_api: httpx.AsyncClient,
) -> None:
    lists = [path for method, path in ROUTES if method == "GET" and path.count("/") == 2]
    assert len(lists) == 7  # jobs, kinds, queues, dlq, failure-groups, schedules, audit
    for path in lists:
        answer = await named_api.get(path, headers=bearer(READER))
        assert (path, answer.status_code) == (path, 200)
    answer = await named_api.post("/api/queues/mail/pause", headers=bearer(WRITER))
    assert answer.json() == {"queue": "mail", "paused": True}
    assert (await named_api.get("/api/jobs", headers=bearer("nope"))).status_code == 401


async def test_the_audit_actor_is_the_token_name(named_api: httpx.AsyncClient) -> None:
    assert (await named_api.get("/api/whoami", headers=bearer(READER))).json() == {
        "actor": "grafana"
    }
    assert (await named_api.get("/api/whoami", headers=bearer(WRITER))).json() == {"actor": "ci"}


async def test_awa_api_token_alone_is_the_write_token_api(server_client: Client) -> None:
    app = create_app(server_client, token=WRITER)

    async def whoami(request: Request) -> dict[str, str]:
        return {"actor": actor_of(request)}

    app.add_api_route("/api/whoami", whoami, dependencies=[Depends(authorized)])
    async with asgi_client(app) as http:
        answer = await http.get("/api/whoami", headers=bearer(WRITER))
    assert answer.json() == {"actor": "api"}


SHA = "a" * 64


@pytest.mark.parametrize(
    ("text", "suffix", "message"),
    [
        ("[[token]]\nname = 'x'\nrole = 'read'\ntoken = ", ".toml", "is not valid TOML"),
        ('{"tokens": [', ".json", "is not valid JSON"),
        ("[]", ".json", "holds no tokens"),
        ('[{"name": "x", "role": "admin", "token": "T0KEN"}]', ".json", "needs a role"),
        ('[{"name": "", "role": "read", "token": "T0KEN"}]', ".json", "needs a name"),
        ('[{"name": "x", "role": "read"}]', ".json", "exactly one of token and sha256"),
        (
            f'[{{"name": "x", "role": "read", "token": "T0KEN", "sha256": "{SHA}"}}]',
            ".json",
            "exactly one",
        ),
        ('[{"name": "x", "role": "read", "sha256": "T0KEN"}]', ".json", "64 hex digits"),
        (
            '[{"name": "x", "role": "read", "token": "T0KEN", "secret": 1}]',
            ".json",
            "unknown keys: secret",
        ),
        (
            '[{"name": "x", "role": "read", "token": "T0KEN"},'
            ' {"name": "y", "role": "write", "token": "T0KEN"}]',
            ".json",
            "The tokens x and y are the same token",
        ),
        (
            '[{"name": "x", "role": "read", "token": "T0KEN"},'
            ' {"name": "x", "role": "write", "token": "other"}]',
            ".json",
            "The token name x is given twice",
        ),
    ],
)
def test_a_bad_tokens_file_is_one_line_and_exit_code_2_without_the_token(
    tmp_path: Path,
    capsys: pytest.CaptureFixture[str],
    monkeypatch: pytest.MonkeyPatch,
    text: str,
    suffix: str,
    message: str,
) -> None:
    monkeypatch.delenv("AWA_API_TOKEN", raising=False)
    monkeypatch.delenv("AWA_API_TOKENS", raising=False)
    path = tmp_path / f"tokens{suffix}"
    path.write_text(text)
    assert main(["--tokens", str(path)]) == 2
    out, err = capsys.readouterr()
    assert out == ""
    assert message in err
    assert len(err.strip().splitlines()) == 1
    assert "T0KEN" not in err


def test_a_missing_file_and_a_bad_environment_value_are_refused(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    with pytest.raises(TokenFileError, match=r"Cannot read the tokens file .*nope\.toml"):
        load(tmp_path / "nope.toml", {})
    with pytest.raises(TokenFileError, match="AWA_API_TOKENS is not valid JSON"):
        load(None, {"AWA_API_TOKENS": "name=x"})
    assert isinstance(load(None, {"AWA_API_TOKEN": "t"})[0], NamedToken)
