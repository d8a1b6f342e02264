"""What an ended attempt becomes, decided without a database (``storage.finalize.rules``).

The writes that carry these decisions out are tested against PostgreSQL in test_failures,
test_core and test_callbacks; here the rule alone, input by input."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

import pytest

from storage.finalize.rules import (
    Failure,
    completes_on_general_path,
    outcome_of_rewrite,
    plan_failure,
)
from storage.finalize.types import AttemptRecord, AttemptRef, Outcome
from storage.insert.enqueue import NewJob
from storage.values.models import JobState

NOW = datetime(2026, 11, 30, 12, 0, tzinfo=UTC)


def _record(attempt: int, max_attempts: int = 3, output: str | None = None) -> AttemptRecord:
    return AttemptRecord(
        ref=AttemptRef(1, 1, 1),
        attempt=attempt,
        max_attempts=max_attempts,
        attempted_at=NOW,
        output_text=output,
    )


def test_an_error_with_attempts_left_retries_after_the_given_delay() -> None:
    plan = plan_failure(_record(1), Failure.ERROR, "boom", now=NOW, retry_in=5)
    assert (plan.state, plan.closure, plan.terminal) == (JobState.RETRYABLE, "retried", False)
    assert plan.run_at == NOW + timedelta(seconds=5)
    assert plan.message == "boom"
    assert plan.error_entry


def test_an_error_on_the_last_attempt_fails_and_says_the_attempts_ran_out() -> None:
    plan = plan_failure(_record(3), Failure.ERROR, "boom", now=NOW)
    assert (plan.state, plan.closure, plan.terminal) == (JobState.FAILED, "error", True)
    assert plan.message == "boom (max attempts 3 exhausted)"
    assert plan.run_at is None
    assert plan.dlq_reason == "max_attempts_exhausted"


@pytest.mark.parametrize(
    ("failure", "state", "dlq_reason"),
    [
        (Failure.TERMINAL, JobState.FAILED, "terminal_error"),
        (Failure.CONTRACT, JobState.FAILED, "wait_for_callback_contract_violation"),
        (Failure.CANCEL, JobState.CANCELLED, "terminal_error"),
    ],
)
def test_terminal_failures_end_at_once_whatever_the_attempts_left(
    failure: Failure, state: JobState, dlq_reason: str
) -> None:
    plan = plan_failure(_record(1), failure, "why", now=NOW)
    assert (plan.state, plan.closure, plan.dlq_reason) == (state, failure.value, dlq_reason)
    assert plan.message == "why"


def test_a_retry_after_writes_an_error_entry_only_to_keep_an_output() -> None:
    bare = plan_failure(_record(1), Failure.RETRY_AFTER, "later", now=NOW, retry_in=1)
    kept = plan_failure(_record(1, output="{}"), Failure.RETRY_AFTER, "later", now=NOW, retry_in=1)
    assert (bare.error_entry, kept.error_entry) == (False, True)


def test_a_callers_closure_and_dlq_reason_win() -> None:
    plan = plan_failure(
        _record(3),
        Failure.ERROR,
        "callback timed out",
        now=NOW,
        closure="callback_timeout",
        dlq_reason="callback_timeout",
    )
    assert (plan.closure, plan.dlq_reason) == ("callback_timeout", "callback_timeout")


def test_follow_ups_poison_or_a_payload_send_a_completion_down_the_general_path() -> None:
    assert not completes_on_general_path([], None, None)
    assert completes_on_general_path([], None, {"tags": ["x"]})
    assert completes_on_general_path([NewJob("k", "default", b"{}", 2, 25, None, None)], None, None)
    assert completes_on_general_path([], "ValueError: no", None)
    assert completes_on_general_path([], None, None, unique_key="k")


@pytest.mark.parametrize(
    ("closed_with", "outcome"),
    [
        ("completed", Outcome.ALREADY),
        ("retried", Outcome.ALREADY),
        ("error", Outcome.ALREADY),
        ("rescued", Outcome.STALE),
        ("cancelled_admin", Outcome.STALE),
        (None, Outcome.STALE),
    ],
)
def test_a_write_that_matched_nothing_is_already_done_only_if_its_own_executor_closed_it(
    closed_with: str | None, outcome: Outcome
) -> None:
    assert outcome_of_rewrite(closed_with) is outcome
