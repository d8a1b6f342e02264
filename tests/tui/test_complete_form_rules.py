"""The completion form shows its rules: a skeleton from the declared schema, the field list
beside the editor, select-all and clear, a refusal naming the first failing path, and a typed
kind checked by its model the way ``complete_external`` checks it."""

from __future__ import annotations

import json
from typing import Any, Literal

import pytest
from pydantic import BaseModel, field_validator
from textual import events
from textual.pilot import Pilot
from textual.widgets import Static, TextArea

from awa_tui.demo import AwaitPayment
from awa_tui.screens.complete import CompleteCallbackModal
from awa_tui.skeleton import skeleton_text
from storage import Client, Job, JobState, OutputError, WaitForCallback
from tests.tui.conftest import settle, text_of
from tests.tui.scenarios import Incident, build_app
from tests.tui.test_complete_form import open_form

CALLBACK = "4f1c9a2e-5b7d-4c3a-9e1f-000000000007"
SKELETON = '{\n  "status": "paid",\n  "reference": "",\n  "amount_cents": 0\n}'


class PaymentResult(BaseModel):
    """The handler's model of the declared type, with a rule its JSON schema cannot say."""

    status: Literal["paid", "refused"]
    reference: str
    amount_cents: int

    @field_validator("reference")
    @classmethod
    def provider_reference(cls, value: str) -> str:
        if not value.startswith("psp-"):
            raise ValueError("a provider reference starts with psp-")
        return value


async def replace_output(pilot: Pilot[Any], form: CompleteCallbackModal, text: str) -> str:
    """Paste over the editor's selection (the skeleton is selected when the form opens)."""
    await pilot.press("f7")
    pilot.app.post_message(events.Paste(text))
    await settle(pilot)
    return text_of(form.query_one("#output-check", Static))


@pytest.mark.parametrize(("size", "list_width"), [((120, 40), 42), ((80, 24), 26)])
async def test_opens_with_the_skeleton_and_the_field_list_beside_the_editor(
    migrated_dsn: str,
    schema: str,
    incident: Incident,
    size: tuple[int, int],
    list_width: int,
) -> None:
    app = build_app(migrated_dsn, schema, initial_job=incident.waiting)
    async with app.run_test(size=size) as pilot:
        form = await open_form(pilot, app)
        editor = form.query_one("#output-editor", TextArea)
        assert editor.text == SKELETON
        assert editor.text == skeleton_text(form.schema)
        assert editor.selected_text == SKELETON  # a paste replaces it
        assert text_of(form.query_one("#output-check")).startswith("✓ 49 B of 4,096 B")
        fields = form.query_one("#field-list")
        listed = text_of(fields)
        assert "Fields of PaymentResult" in listed
        assert 'status string · required\n  one of "paid", "refused"' in listed
        assert "amount_cents integer · required" in listed
        # Beside the editor, on the screen: not below the fold.
        assert fields.region.width == list_width
        assert fields.region.x >= editor.region.right
        assert fields.region.y <= editor.region.y
        assert editor.region.width >= 30
        assert fields.region.bottom <= size[1]


async def test_select_all_and_clear_are_in_the_footer_and_work(
    migrated_dsn: str, schema: str, incident: Incident
) -> None:
    app = build_app(migrated_dsn, schema, initial_job=incident.waiting)
    async with app.run_test(size=(120, 40)) as pilot:
        form = await open_form(pilot, app)
        shown = {
            key: active.binding.description
            for key, active in form.active_bindings.items()
            if active.binding.show
        }
        assert shown["f7"] == "Select all"
        assert shown["ctrl+l"] == "Clear"
        editor = form.query_one("#output-editor", TextArea)
        await pilot.press("right")  # the selection goes; TextArea's ctrl+a is still line start
        await pilot.press("ctrl+a")
        assert editor.selected_text == ""
        await pilot.press("f7")
        assert editor.selected_text == SKELETON
        await pilot.press("ctrl+l")
        await settle(pilot)
        assert editor.text == ""
        assert "No output: the job completes without one." in text_of(
            form.query_one("#output-check")
        )
        await pilot.press("ctrl+z")  # clearing is an edit like any other
        assert editor.text == SKELETON
        payload = form.query_one("#payload-editor", TextArea)
        payload.load_text('{"note": 1}')
        payload.focus()
        await pilot.press("ctrl+l")  # clears the focused editor only
        assert payload.text == ""
        assert editor.text == SKELETON


async def test_the_refusal_names_the_first_failing_path_and_rule_not_the_value(
    migrated_dsn: str, schema: str, incident: Incident, client: Client
) -> None:
    app = build_app(migrated_dsn, schema, initial_job=incident.waiting)
    async with app.run_test(size=(120, 40), notifications=True) as pilot:
        form = await open_form(pilot, app)
        await replace_output(
            pilot, form, '{"status": "secret-maybe", "reference": "r", "amount_cents": "12"}'
        )
        await pilot.press("ctrl+s")
        await settle(pilot)
        (toast,) = [n for n in app._notifications if n.title == "Not completed"]
        assert toast.message == "output $.amount_cents: expected integer, got string"
        assert "secret-maybe" not in toast.message
        assert pilot.app.screen is form  # nothing asked, nothing written
    row = await client.get_job(incident.waiting)
    assert row is not None
    assert row.state is JobState.WAITING_EXTERNAL


async def typed_console(dsn: str, schema: str) -> Client:
    """A console client that registered the kind's model, as the demo's does."""
    console = await Client.connect(dsn, schema)

    @console.task(AwaitPayment, output=PaymentResult, queue="webhooks")
    async def await_payment(job: Job[AwaitPayment]) -> WaitForCallback:
        raise AssertionError("the console does not run this kind here")

    return console


async def test_a_typed_kind_is_checked_by_its_model_as_the_engine_checks_it(
    migrated_dsn: str, schema: str, incident: Incident, client: Client
) -> None:
    app = build_app(
        migrated_dsn,
        schema,
        initial_job=incident.waiting,
        client_factory=lambda: typed_console(migrated_dsn, schema),
    )
    refused = '{"status": "paid", "reference": "x-1", "amount_cents": 4900}'
    async with app.run_test(size=(120, 40), notifications=True) as pilot:
        form = await open_form(pilot, app)
        assert form.declared.model is PaymentResult
        check = await replace_output(pilot, form, refused)  # fits the schema; not the model
        assert check.startswith("✗ wrong_type: output does not fit PaymentResult: $.reference")
        await pilot.press("ctrl+s")
        await settle(pilot)
        (toast,) = [n for n in app._notifications if n.title == "Not completed"]
        assert toast.message == "output $.reference: refused by a validator (value_error)"
        console = await app.client()
        with pytest.raises(OutputError) as engine:  # the engine says the same
            await console.complete_external(CALLBACK, output=json.loads(refused))
        assert (engine.value.path, engine.value.rule) == (
            "$.reference",
            "refused by a validator (value_error)",
        )
        # What the model accepts the form accepts, and shows what will be stored: the model's
        # dump ("4900" is an integer to it, where the schema alone would refuse a string).
        check = await replace_output(
            pilot, form, '{"status": "paid", "reference": "psp-9", "amount_cents": "4900"}'
        )
        assert check.startswith("✓ 57 B of 4,096 B · valid as PaymentResult (its model")
        assert form.check.stored_text == (
            '{"status":"paid","reference":"psp-9","amount_cents":4900}'
        )
        await pilot.press("ctrl+s")
        await settle(pilot)
        await pilot.press("y")
        await settle(pilot)
        assert form.completed
    row = await client.get_job(incident.waiting)
    assert row is not None
    assert row.state is JobState.COMPLETED
    assert row.output_text == '{"status":"paid","reference":"psp-9","amount_cents":4900}'
