"""``awa-tui`` start-up: DSN resolution, one clear line on stderr, documented exit codes."""

from __future__ import annotations

import os
import subprocess
import sys

import pytest

from awa_tui.cli import main
from awa_tui.commands import resolve_dsn
from awa_tui.errors import EXIT_CONNECT, EXIT_OK, EXIT_SCHEMA, EXIT_USAGE


def run_cli(*args: str) -> subprocess.CompletedProcess[str]:
    env = {k: v for k, v in os.environ.items() if k not in ("AWA_DSN", "DATABASE_URL")}
    return subprocess.run(
        [sys.executable, "-m", "awa_tui", *args],
        capture_output=True,
        text=True,
        env=env,
        timeout=60,
        check=False,
    )


def assert_one_clean_line(result: subprocess.CompletedProcess[str]) -> str:
    lines = result.stderr.strip().splitlines()
    assert len(lines) == 1, result.stderr
    assert lines[0].startswith("awa-tui: ")
    assert "Traceback" not in result.stderr
    return lines[0]


def test_dsn_resolution_order() -> None:
    env = {"AWA_DSN": "postgresql://a/x", "DATABASE_URL": "postgresql://b/y"}
    assert resolve_dsn("postgresql://c/z", env) == "postgresql://c/z"
    assert resolve_dsn(None, env) == "postgresql://a/x"
    assert resolve_dsn(None, {"DATABASE_URL": "postgresql://b/y"}) == "postgresql://b/y"
    assert resolve_dsn(None, {}) is None  # libpq environment and .pgpass


def test_unreachable_server_exits_3_without_the_password() -> None:
    result = run_cli("--dsn", "postgresql://oncall:s3cret@127.0.0.1:1/jobs")
    assert result.returncode == EXIT_CONNECT
    line = assert_one_clean_line(result)
    assert "s3cret" not in result.stderr + result.stdout
    assert "oncall:***@127.0.0.1:1" in line


def test_bad_dsn_exits_2() -> None:
    result = run_cli("--dsn", "postgresql://oncall:pw@db:notaport/jobs")
    assert result.returncode == EXIT_USAGE
    assert "connection string is not valid" in assert_one_clean_line(result)


def test_bad_schema_name_and_options_exit_2() -> None:
    assert (
        run_cli("--schema", "Robert'); DROP", "--dsn", "postgresql://x/y").returncode == EXIT_USAGE
    )
    assert run_cli("--refresh", "-1").returncode == EXIT_USAGE
    assert run_cli("--state", "sleeping").returncode == EXIT_USAGE


def test_unmigrated_schema_exits_4(migrated_dsn: str) -> None:
    result = run_cli("--dsn", migrated_dsn, "--schema", "not_installed")
    assert result.returncode == EXIT_SCHEMA
    assert "awa-tui migrate" in assert_one_clean_line(result)


def test_migrate_runs_storage_migrate(migrated_dsn: str) -> None:
    result = run_cli("migrate", "--dsn", migrated_dsn)
    assert result.returncode == EXIT_OK, result.stderr
    assert "already up to date" in result.stdout


@pytest.mark.parametrize(
    "dsn",
    [
        "postgresql://oncall:s3cret@[::1/jobs",  # an unbalanced [ in the host
        "postgresql://oncall:s3cret@127.0.0.1:99999/jobs",  # a port out of range
        "host=127.0.0.1 port=1 user=oncall password=s3cret dbname=jobs",  # libpq key/value
        "mysql://oncall:s3cret@db/jobs",  # not PostgreSQL
    ],
)
@pytest.mark.parametrize("command", [[], ["migrate"]])
def test_malformed_dsn_exits_2_with_one_line(
    capsys: pytest.CaptureFixture[str], dsn: str, command: list[str]
) -> None:
    """A DSN asyncpg cannot use: one line, exit 2, no traceback, no password."""
    code = main([*command, "--dsn", dsn])
    captured = capsys.readouterr()
    assert code == EXIT_USAGE
    lines = captured.err.strip().splitlines()
    assert len(lines) == 1, captured.err
    assert lines[0].startswith("awa-tui: ")
    assert "connection string is not valid" in lines[0]
    assert "s3cret" not in captured.err + captured.out
    assert "Traceback" not in captured.err


@pytest.mark.parametrize(
    ("dsn", "env"),
    [
        ("postgresql://oncall:s3cret@127.0.0.1:1/jobs", {}),
        ("postgresql://oncall@127.0.0.1:1/jobs?password=s3cret", {}),
        ("postgresql://oncall@127.0.0.1:1/jobs", {"PGPASSWORD": "s3cret"}),
        ("host=127.0.0.1 port=1 password=s3cret", {}),
        ("postgresql://oncall:s3cret@db:notaport/jobs", {}),
    ],
)
def test_no_password_in_cli_errors(
    dsn: str,
    env: dict[str, str],
    capsys: pytest.CaptureFixture[str],
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    for name, value in env.items():
        monkeypatch.setenv(name, value)
    code = main(["--dsn", dsn])
    captured = capsys.readouterr()
    assert code in (EXIT_USAGE, EXIT_CONNECT)
    assert len(captured.err.strip().splitlines()) == 1, captured.err
    assert "s3cret" not in captured.err + captured.out


def test_an_actor_the_audit_trail_cannot_keep_exits_2_before_connecting() -> None:
    result = run_cli("--actor", " ", "--dsn", "postgresql://oncall@127.0.0.1:1/jobs")
    assert result.returncode == EXIT_USAGE
    assert "actor must be non-empty" in assert_one_clean_line(result)
    too_long = run_cli("--actor", "a" * 201, "--dsn", "postgresql://oncall@127.0.0.1:1/jobs")
    assert too_long.returncode == EXIT_USAGE
