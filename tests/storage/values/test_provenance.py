"""The pure half of "why is there no output": causes storage can only reach with time (a
closure pruned with the claim ring), and the prune wording, on built rows and facts."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

from storage import JobAccount, JobFacts, JobRow, JobState, NoOutput
from storage.client import DEFAULT_RETENTION

NOW = datetime(2026, 3, 14, 9, 30, tzinfo=UTC)


def facts(**changes: object) -> JobFacts:
    base: dict[str, object] = {
        "closure": None,
        "closure_lease": None,
        "closed_at": None,
        "ready_slot": 2,
        "deleted_at": None,
        "ring_slots": 8,
        "ring_current": 1,
        "ring_rotated_at": NOW - timedelta(minutes=5),
        "read_at": NOW,
        "outputs_supported": True,
        "retention": DEFAULT_RETENTION,
    }
    return JobFacts(**(base | changes))  # type: ignore[arg-type]


def completed(**changes: object) -> JobRow:
    base: dict[str, object] = {
        "id": 9,
        "kind": "k",
        "queue": "default",
        "state": JobState.COMPLETED,
        "args": {},
        "priority": 2,
        "attempt": 1,
        "max_attempts": 25,
        "run_lease": 1,
        "run_at": NOW,
        "created_at": NOW,
        "finalized_at": NOW,
        "storage_path": "general",
    }
    return JobRow.model_validate(base | changes)


def test_a_general_completion_whose_closure_was_pruned_says_so() -> None:
    absence = JobAccount(9, completed(), facts()).absence(NOW)
    assert absence is not None
    assert absence.cause is NoOutput.UNKNOWN
    assert "pruned with the claim ring" in absence.text
    # An earlier attempt's closure does not speak for this one.
    older = JobAccount(9, completed(run_lease=2), facts(closure="completed", closure_lease=1))
    assert older.absence(NOW) == absence


def test_provenance_and_prune_time_on_the_next_turn() -> None:
    row = completed(output_text='{"a":1}', has_output=True, storage_path="compact", attempt=2)
    origin = JobAccount(9, row, facts()).provenance(NOW)
    assert origin is not None
    assert origin.text(NOW) == (
        "Attempt 2 at 09:30Z, by its handler, compact path · pruned with its queue slot at "
        "~09:40Z (1 more turn of the queue ring, every 15 min)"
    )
