"""A job's output: exact stored text, its declared type and schema, its size, why it is absent."""

from __future__ import annotations

from dataclasses import dataclass

import orjson
from rich.text import Text
from textual.app import ComposeResult
from textual.containers import Vertical
from textual.reactive import reactive
from textual.widgets import Static

from awa_tui.present import size_text
from awa_tui.resilience import Guarded
from awa_tui.widgets.json_view import json_content, pretty_json
from storage import MAX_OUTPUT_BYTES, JobKindDescriptor, JobRow, JobState, schema_violations

LATEST_ONLY_NOTE = (
    "Only the latest failed attempt that recorded an output keeps it; "
    "a later one replaces it, and rescues or admin actions record none."
)


@dataclass(frozen=True)
class OutputFacts:
    """What the panel says about one output (or its absence)."""

    text: str | None
    size: int | None
    type_name: str | None
    schema_verdict: str  # "fits the schema", "does not fit: ...", "no schema declared", ...
    fits: bool | None
    absence: str | None


def output_facts(
    text: str | None, descriptor: JobKindDescriptor | None, absence: str | None = None
) -> OutputFacts:
    type_name = descriptor.output_type_name if descriptor is not None else None
    schema = descriptor.output_schema if descriptor is not None else None
    if text is None:
        return OutputFacts(None, None, type_name, "", None, absence)
    size = len(text.encode())
    if descriptor is None:
        verdict, fits = "kind has no descriptor, so no schema to check", None
    elif schema is None:
        verdict, fits = "no schema declared", None
    else:
        violations = schema_violations(orjson.loads(text), schema)
        verdict, fits = (
            ("fits the schema", True)
            if not violations
            else ("does not fit: " + "; ".join(map(str, violations)), False)
        )
    return OutputFacts(text, size, type_name, verdict, fits, None)


def why_absent(row: JobRow | None) -> str:
    """Why a job shows no completed output."""
    if row is None:
        return (
            "The job no longer exists: it was deleted, or pruned with its queue slot, "
            "and its output with it."
        )
    kept = row.kept_output_position()
    kept_note = (
        f" Error entry #{kept + 1} kept a failed attempt's output: press e for the error history."
        if kept is not None
        else ""
    )
    if row.dlq is not None:
        return "Dead-lettered: failed attempts keep their output in the error history." + kept_note
    match row.state:
        case JobState.COMPLETED:
            return (
                "Completed without an output: recording one is opt-in (job.set_output), an "
                "external completion may send none, and a schema without output columns drops "
                "it. Deleted or pruned jobs lose theirs." + kept_note
            )
        case JobState.FAILED | JobState.RETRYABLE | JobState.CANCELLED:
            return (
                f"Not completed ({row.state.value}): failed attempts keep their output in the "
                "error history, not here." + kept_note
            )
        case _:
            return (
                f"Not completed yet ({row.state.value}): an output appears when an attempt "
                "completes with one." + kept_note
            )


class OutputPanel(Guarded, Vertical):
    """Header line (type, size vs limit, schema fit) and the highlighted text or an explanation."""

    DEFAULT_CSS = """
    OutputPanel { height: auto; }
    OutputPanel > .output-head { height: auto; }
    OutputPanel > .output-body { height: auto; }
    OutputPanel > .output-note { height: auto; }
    """

    pretty: reactive[bool] = reactive(False)

    def __init__(self, *, title: str = "Output", id: str | None = None) -> None:
        super().__init__(id=id)
        self.title = title
        self.facts: OutputFacts | None = None
        self.note: str | None = None

    def compose(self) -> ComposeResult:
        yield Static(classes="output-head")
        yield Static(classes="output-body")
        yield Static(classes="output-note")

    def show(
        self,
        text: str | None,
        descriptor: JobKindDescriptor | None,
        *,
        absence: str | None = None,
        note: str | None = None,
    ) -> None:
        self.facts = output_facts(text, descriptor, absence)
        self.note = note
        self._render_facts()

    def watch_pretty(self) -> None:
        self._render_facts()

    def _render_facts(self) -> None:
        facts = self.facts
        if facts is None or not self.is_mounted:
            return
        head = self.query_one(".output-head", Static)
        body = self.query_one(".output-body", Static)
        note = self.query_one(".output-note", Static)
        head.update(self._head(facts))
        notes = [self.note] if self.note else []
        if facts.text is None:
            body.update(Text(facts.absence or "No output.", style="italic"))
        elif self.pretty:
            body.update(json_content(pretty_json(orjson.loads(facts.text))))
            notes.insert(0, "Pretty-printed view; p shows the exact stored text.")
        else:
            body.update(json_content(facts.text))
        note.update(Text("\n".join(notes), style="dim"))
        note.display = bool(notes)

    def _head(self, facts: OutputFacts) -> Text:
        head = Text()
        head.append(self.title, style="bold")
        type_label = facts.type_name or "untyped (no declared output type)"
        head.append("  type ")
        head.append(type_label, style="bold cyan" if facts.type_name else "dim")
        if facts.size is not None:
            over = facts.size > MAX_OUTPUT_BYTES
            head.append("  size ")
            head.append(
                f"{size_text(facts.size)} of {size_text(MAX_OUTPUT_BYTES)}",
                style="bold red" if over else "",
            )
            head.append("  ")
            style = {True: "green", False: "bold red", None: "dim"}[facts.fits]
            mark = {True: "✓ ", False: "✗ ", None: ""}[facts.fits]
            head.append(mark + facts.schema_verdict, style=style)
        return head
