"""``awa-tui worker``: options and targets a person must fix exit 2 with one clean line;
an unreachable server exits 3 without the password. (Running workers: tests/faults.)"""

from __future__ import annotations

import pytest

from awa_tui.errors import EXIT_CONNECT, EXIT_USAGE
from awa_tui.worker import UsageError, load_tasks, parse_queues, settings_from
from tests.tui.test_cli import assert_one_clean_line, run_cli

TARGET = "tests.workers_tasks:tasks"


def test_queues_take_names_or_names_with_caps() -> None:
    assert parse_queues(None) is None
    assert parse_queues("mail, images") == ["mail", "images"]
    assert parse_queues("mail=8,images=2") == {"mail": 8, "images": 2}


@pytest.mark.parametrize("text", ["mail=8,images", "mail=0", "mail=x", "mail,,b", "=3"])
def test_queues_refuse_what_they_would_have_to_guess(text: str) -> None:
    with pytest.raises(UsageError):
        parse_queues(text)


def test_the_target_must_name_a_tasks_registry_with_tasks() -> None:
    assert load_tasks(TARGET).specs
    with pytest.raises(UsageError, match="not MODULE:TASKS"):
        load_tasks("tests.workers_tasks")
    with pytest.raises(UsageError, match="Cannot import module 'no_such_module_here'"):
        load_tasks("no_such_module_here:tasks")
    with pytest.raises(UsageError, match=r"is a \w+, not a storage\.Tasks"):
        load_tasks("tests.workers_tasks:Count")
    with pytest.raises(UsageError, match="is nothing"):
        load_tasks("tests.workers_tasks:missing")


@pytest.mark.parametrize(
    ("args", "says"),
    [
        (["no_such_module_here:tasks"], "Cannot import module"),
        ([TARGET, "--concurrency", "0"], "--concurrency must be at least 1"),
        ([TARGET, "--grace", "-1"], "--grace must be 0"),
        ([TARGET, "--processes", "0"], "--processes must be at least 1"),
        ([TARGET, "--queues", "a=1,b"], "give every queue a cap"),
        ([TARGET, "--schema", "Bad-Name"], "Schema name 'Bad-Name' is not allowed"),
    ],
)
def test_usage_errors_exit_2_with_one_line(args: list[str], says: str) -> None:
    result = run_cli("worker", *args)
    assert result.returncode == EXIT_USAGE
    assert says in assert_one_clean_line(result)


@pytest.mark.parametrize("processes", ["1", "3"])
def test_an_unreachable_server_exits_3_without_the_password(processes: str) -> None:
    """With several processes the parent checks the server first: one line, not one each."""
    dsn = "postgresql://ops:s3cret@127.0.0.1:1/jobs"
    result = run_cli("worker", TARGET, "--dsn", dsn, "--processes", processes)
    assert result.returncode == EXIT_CONNECT
    line = assert_one_clean_line(result)
    assert "s3cret" not in result.stderr + result.stdout
    assert "ops:***@127.0.0.1:1" in line


def test_the_worker_freezes_the_start_up_heap_unless_told_not_to() -> None:
    assert settings_from([TARGET]).gc_freeze
    assert not settings_from([TARGET, "--no-gc-freeze"]).gc_freeze
