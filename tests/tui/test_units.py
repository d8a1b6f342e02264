"""Pure pieces: the filter grammar, relative times, the action rules, output checks."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

import pytest

from awa_tui.actions import JobAction, why_not
from awa_tui.query import FilterSyntaxError, JobQuery, parse_filter
from awa_tui.timefmt import absolute, relative
from awa_tui.validation import check_output, check_payload
from storage import DeclaredOutput, JobRow, JobState

NOW = datetime(2026, 3, 14, 9, 30, tzinfo=UTC)


def test_filter_grammar() -> None:
    query = parse_filter('kind:send_email queue:mail id:#42 "gateway timeout" eu')
    assert (query.kind, query.queue, query.job_id) == ("send_email", "mail", 42)
    assert query.search == "gateway timeout eu"
    assert JobQuery(tab="failed").with_filter("kind:x", NOW).filter_text == "kind:x"
    assert JobQuery(tab="dlq").where(NOW).dlq is True
    assert JobQuery(tab="failed").where(NOW).state is JobState.FAILED
    with pytest.raises(FilterSyntaxError):
        parse_filter("id:abc")
    with pytest.raises(FilterSyntaxError):
        parse_filter("kind:")
    # Whatever a person types can be searched for: a lone quote, a backslash, an apostrophe.
    assert parse_filter('"').search == '"'
    assert parse_filter('"unterminated').search == '"unterminated'
    assert parse_filter("don't panic").search == "don't panic"
    assert parse_filter("back\\slash").search == "back\\slash"
    assert parse_filter("\\").search == "\\"
    assert parse_filter("""kind:x '"'""").search == '"'


def test_time_range_and_sort_terms() -> None:
    query = JobQuery(tab="completed").with_filter("since:90m before:2026-03-15 sort:-when", NOW)
    bounds = query.where(NOW)
    assert bounds.since == NOW - timedelta(minutes=90)
    assert bounds.before == datetime(2026, 3, 15, tzinfo=UTC)  # a date without a zone is UTC
    assert query.filter_text == "since:90m before:2026-03-15 sort:-when"
    assert query.describe_sort() == "by finish time, latest first"
    for term, moment in (
        ("since:30s", NOW - timedelta(seconds=30)),
        ("since:2d", NOW - timedelta(days=2)),
        ("since:1w", NOW - timedelta(weeks=1)),
        ("since:2026-03-14T09:00", datetime(2026, 3, 14, 9, tzinfo=UTC)),
        ("since:2026-03-14T09:00+01:00", datetime(2026, 3, 14, 8, tzinfo=UTC)),
    ):
        assert parse_filter(term).where(NOW).since == moment, term
    # before: with a duration means "older than": finished more than 2 hours ago
    assert parse_filter("before:2h").where(NOW).before == NOW - timedelta(hours=2)
    assert parse_filter("sort:id").sort.text == "id"
    assert parse_filter("sort:-id").filter_text == ""  # the default order is not spelled out


@pytest.mark.parametrize(
    ("text", "message"),
    [
        ("since:yesterday", "since:yesterday is not a duration (30s, 15m, 1h, 2d, 1w) or an ISO"),
        ("before:1y", "before:1y is not a duration"),
        ("since:", "since: needs a value"),
        ("since:99999999w", "reaches back too far"),
        ("sort:name", "Cannot sort by 'name'; use one of id, when, attempts"),
        ("sort:attempts", "Completed jobs cannot be sorted by attempts"),
        ("sort:id", "Completed jobs cannot be listed oldest id first"),
        ("since:1h before:2h", "since: must be earlier than before:"),
    ],
)
def test_bad_time_and_sort_terms_say_why(text: str, message: str) -> None:
    with pytest.raises(FilterSyntaxError, match=message.replace("(", r"\(").replace(")", r"\)")):
        JobQuery(tab="completed").with_filter(text, NOW)


def test_relative_times() -> None:
    assert relative(NOW - timedelta(seconds=42), NOW) == "42s ago"
    assert relative(NOW - timedelta(minutes=3, seconds=5), NOW) == "3m05s ago"
    assert relative(NOW + timedelta(hours=2, minutes=7), NOW) == "in 2h07m"
    assert relative(NOW - timedelta(days=3), NOW) == "3d ago"
    assert relative(NOW, NOW) == "now"
    assert relative(None, NOW) == "-"
    assert absolute(NOW) == "2026-03-14 09:30:00Z"


def row(state: JobState) -> JobRow:
    return JobRow(
        id=9,
        kind="k",
        queue="q",
        state=state,
        args={},
        priority=2,
        attempt=1,
        max_attempts=3,
        run_lease=1,
        run_at=NOW,
        created_at=NOW,
    )


def test_action_rules_match_storage() -> None:
    assert why_not(JobAction.RETRY, row(JobState.FAILED)) is None
    assert why_not(JobAction.RETRY, row(JobState.RUNNING)) == (
        "Job 9 is running; only failed or cancelled jobs can be retried."
    )
    assert why_not(JobAction.CANCEL, row(JobState.WAITING_EXTERNAL)) is None
    assert why_not(JobAction.DELETE, row(JobState.AVAILABLE)) is not None
    assert why_not(JobAction.PURGE_DLQ, row(JobState.FAILED)) is not None


def test_output_checks() -> None:
    assert check_output("", None).ok
    assert check_output("null", None).value is None
    ok = check_output('{"b": 1.0, "a": [1, 2]}', None)
    assert ok.ok
    assert ok.stored_text == '{"b":1.0,"a":[1,2]}'
    assert ok.size == 19
    assert check_output("[", None).reason == "not_json"
    schema = {"type": "object", "properties": {"n": {"type": "integer"}}, "required": ["n"]}
    bad = check_output('{"n": "x"}', DeclaredOutput({"type": "Count", "schema": schema}))
    assert (bad.ok, bad.reason, bad.path) == (False, "wrong_type", "$.n")
    assert bad.refusal == "output $.n: expected integer, got string"
    assert check_payload("{").ok is False
    assert check_payload("").value is None


def test_form_refuses_integers_beyond_64_bits_instead_of_rounding_them() -> None:
    from awa_tui.validation import check_output

    verdict = check_output('{"n": 123456789012345678901234567890}', None)
    assert not verdict.ok
    assert verdict.reason == "invalid"
    assert verdict.path == "$.n"


def test_the_form_and_the_panel_name_every_violation_and_never_the_value() -> None:
    from awa_tui.widgets.output_panel import output_facts
    from storage import JobKindDescriptor

    secret = "s3cr3t-in-the-value"
    schema = {
        "type": "object",
        "properties": {
            "status": {"enum": ["paid", "failed"]},
            "amount": {"type": "integer", "minimum": 0},
            "ref": {"type": "string", "maxLength": 4},
        },
        "required": ["status", "amount"],
    }
    text = f'{{"status": "{secret}", "amount": -5, "ref": "{secret}"}}'
    check = check_output(text, DeclaredOutput({"type": "Payment", "schema": schema}))
    assert not check.ok
    assert check.path == "$.amount"
    assert "$.ref: must be at most 4 characters long" in check.message
    assert secret not in check.refusal
    assert '$.status: is not one of the allowed values: "paid", "failed"' in check.message
    assert "$.amount: must be >= 0" in check.message
    assert secret not in check.message
    descriptor = JobKindDescriptor(kind="pay", output={"type": "Payment", "schema": schema})
    facts = output_facts(text.replace(" ", ""), descriptor)
    assert facts.fits is False
    assert facts.schema_verdict.startswith("does not fit: $.amount: must be >= 0; $.ref: ")
    assert "$.status: is not one of the allowed values" in facts.schema_verdict
    assert secret not in facts.schema_verdict
