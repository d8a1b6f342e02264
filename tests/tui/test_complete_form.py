"""The external-completion form: live checks, and completed / stale / not found, fail, retry."""

from __future__ import annotations

from textual import events
from textual.widgets import Input, Static, TextArea

from awa_tui.screens.complete import CompleteCallbackModal
from awa_tui.screens.confirm import ConfirmModal, PromptModal
from awa_tui.screens.detail import JobDetailScreen
from storage import Client, JobState
from tests.tui.conftest import settle, text_of
from tests.tui.scenarios import SIZE, Incident, build_app

CALLBACK = "4f1c9a2e-5b7d-4c3a-9e1f-000000000007"
VALID = '{"status": "paid", "reference": "psp-1", "amount_cents": 4900}'


async def open_form(pilot: object, app: object) -> CompleteCallbackModal:
    from textual.pilot import Pilot

    assert isinstance(pilot, Pilot)
    await settle(pilot)
    await pilot.press("C")
    await settle(pilot)
    form = pilot.app.screen
    assert isinstance(form, CompleteCallbackModal)
    return form


async def type_output(pilot: object, form: CompleteCallbackModal, text: str) -> str:
    from textual.pilot import Pilot

    assert isinstance(pilot, Pilot)
    form.query_one("#output-editor", TextArea).clear()
    pilot.app.post_message(events.Paste(text))
    await settle(pilot)
    return text_of(form.query_one("#output-check", Static))


async def test_live_validation_names_reason_path_and_size(
    migrated_dsn: str, schema: str, incident: Incident
) -> None:
    app = build_app(migrated_dsn, schema, initial_job=incident.waiting)
    async with app.run_test(size=SIZE) as pilot:
        form = await open_form(pilot, app)
        assert form.query_one("#callback-id", Input).value == CALLBACK
        assert text_of(form.query_one("#output-check")).startswith(  # the schema's skeleton
            "✓ 49 B of 4,096 B · fits the PaymentResult schema"
        )
        check = await type_output(pilot, form, '{"status": "paid",,}')
        assert check == (
            "✗ not_json: not valid JSON at line 1, column 19: "
            "Expecting property name enclosed in double quotes"
        )
        check = await type_output(
            pilot, form, '{"status": "paid", "reference": "a\\u0000b", "amount_cents": 1}'
        )
        assert check.startswith("✗ invalid: output is invalid at $.reference")
        assert form.check.path == "$.reference"
        check = await type_output(pilot, form, '"' + "x" * 5000 + '"')
        assert check == "✗ too_large: output is 5002 bytes of JSON text; the limit is 4096"
        assert form.check.size == 5002
        check = await type_output(pilot, form, '{"status": "paid", "reference": "r"}')
        assert check == (
            "✗ wrong_type: output does not fit the declared PaymentResult schema: "
            "$.amount_cents: is required but missing"
        )
        assert form.check.refusal == "output $.amount_cents: is required but missing"
        assert form.query_one("#submit").disabled
        check = await type_output(pilot, form, VALID)
        assert check == "✓ 57 B of 4,096 B · fits the PaymentResult schema"
        assert not form.query_one("#submit").disabled
        form.query_one("#payload-editor", TextArea).load_text("{oops")
        await settle(pilot)
        assert "Payload is not valid JSON" in text_of(form.query_one("#payload-check"))
        assert form.query_one("#submit").disabled


async def test_stale_when_someone_else_resolved_it_first(
    migrated_dsn: str, schema: str, incident: Incident, client: Client
) -> None:
    app = build_app(migrated_dsn, schema, initial_job=incident.waiting)
    async with app.run_test(size=SIZE) as pilot:
        form = await open_form(pilot, app)
        await type_output(pilot, form, VALID)
        await client.fail_external(CALLBACK, "provider said no")  # someone else, first
        await pilot.press("ctrl+s")
        await settle(pilot)
        await pilot.press("y")
        await settle(pilot)
        result = text_of(form.query_one("#result"))
        assert (
            "Stale: the callback was resolved by someone else first (job 7 is now failed)" in result
        )
        row = await client.get_job(incident.waiting)
        assert row is not None
        assert row.state is JobState.FAILED
        assert row.output_text is None


async def test_not_found_for_an_unknown_callback_id(
    migrated_dsn: str, schema: str, incident: Incident, client: Client
) -> None:
    app = build_app(migrated_dsn, schema, initial_job=incident.waiting)
    async with app.run_test(size=SIZE) as pilot:
        form = await open_form(pilot, app)
        form.query_one("#callback-id", Input).value = "no-such-callback"
        await pilot.press("ctrl+l")  # clear the skeleton: complete without an output
        await pilot.press("ctrl+s")
        await settle(pilot)
        assert isinstance(app.screen, ConfirmModal)
        assert "without an output" in app.screen.body
        await pilot.press("y")
        await settle(pilot)
        assert "✗ Not found: No job is waiting for callback no-such-callback" in text_of(
            form.query_one("#result")
        )
        row = await client.get_job(incident.waiting)
        assert row is not None
        assert row.state is JobState.WAITING_EXTERNAL


async def test_fail_and_retry_a_waiting_job(
    migrated_dsn: str, schema: str, incident: Incident, client: Client
) -> None:
    app = build_app(migrated_dsn, schema, initial_job=incident.waiting)
    async with app.run_test(size=SIZE) as pilot:
        await settle(pilot)
        await pilot.press("T")
        await settle(pilot)
        assert isinstance(app.screen, ConfirmModal)
        await pilot.press("y")
        await settle(pilot)
        row = await client.get_job(incident.waiting)
        assert row is not None
        assert row.state is JobState.AVAILABLE
        assert isinstance(app.screen, JobDetailScreen)
        assert not app.screen.check_action("fail_callback", ())  # no longer waiting: not offered

    await client.run_until_idle(["webhooks"])  # parks it again with a new callback
    row = await client.get_job(incident.waiting)
    assert row is not None
    assert row.state is JobState.WAITING_EXTERNAL
    app = build_app(migrated_dsn, schema, initial_job=incident.waiting)
    async with app.run_test(size=SIZE) as pilot:
        await settle(pilot)
        await pilot.press("F")
        await settle(pilot)
        assert isinstance(app.screen, PromptModal)
        await pilot.press(*"provider timeout", "enter")
        await settle(pilot)
        row = await client.get_job(incident.waiting)
        assert row is not None
        assert row.state is JobState.FAILED
        assert row.last_error is not None
        assert "provider timeout" in row.last_error


async def test_editor_needs_a_terminal(migrated_dsn: str, schema: str, incident: Incident) -> None:
    app = build_app(migrated_dsn, schema, initial_job=incident.waiting, editor="true")
    async with app.run_test(size=SIZE, notifications=True) as pilot:
        form = await open_form(pilot, app)
        await pilot.press("ctrl+o")
        await settle(pilot)
        assert any("cannot hand over to an editor" in n.message for n in app._notifications)
        assert app.screen is form


async def test_esc_with_typed_output_asks_before_discarding(
    migrated_dsn: str, schema: str, incident: Incident, client: Client
) -> None:
    app = build_app(migrated_dsn, schema, initial_job=incident.waiting)
    async with app.run_test(size=SIZE) as pilot:
        form = await open_form(pilot, app)
        await type_output(pilot, form, VALID)
        await pilot.press("escape")
        await settle(pilot)
        assert isinstance(app.screen, ConfirmModal)
        assert app.screen.title_text == "Discard the typed output?"
        await pilot.press("n")  # back to the form, the text kept
        await settle(pilot)
        assert pilot.app.screen is form
        assert form.query_one("#output-editor", TextArea).text == VALID
        await pilot.press("escape")
        await settle(pilot)
        await pilot.press("y")
        await settle(pilot)
        assert isinstance(app.screen, JobDetailScreen)
        row = await client.get_job(incident.waiting)
        assert row is not None
        assert row.state is JobState.WAITING_EXTERNAL  # nothing was written


async def test_esc_on_an_untouched_form_closes_at_once(
    migrated_dsn: str, schema: str, incident: Incident
) -> None:
    app = build_app(migrated_dsn, schema, initial_job=incident.waiting)
    async with app.run_test(size=SIZE) as pilot:
        await open_form(pilot, app)
        await pilot.press("escape")
        await settle(pilot)
        assert isinstance(app.screen, JobDetailScreen)
