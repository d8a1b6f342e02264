"""A job's output: exact stored text, its declared type and schema, its size, why it is absent."""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime

import orjson
from rich.text import Text
from textual.app import ComposeResult
from textual.containers import Vertical
from textual.reactive import reactive
from textual.widgets import Static

from awa_tui.present import size_text
from awa_tui.resilience import Guarded
from awa_tui.widgets.json_view import json_content, pretty_json
from storage import MAX_OUTPUT_BYTES, JobAccount, JobKindDescriptor, NoOutput, schema_violations

JSONB_NOTE = "Read from the error history (jsonb): key order and number forms are normalized."
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


def why_absent(account: JobAccount, now: datetime) -> str:
    """The one reason a job shows no completed output, from what storage keeps
    (``storage.JobAccount.absence``), and where a failed attempt's output is, if one is kept."""
    absence = account.absence(now)
    if absence is None:
        return ""
    text = absence.text[:1].upper() + absence.text[1:] + "."
    kept = account.kept_output()
    if kept is not None and absence.cause is not NoOutput.FAILED:
        text += f" Error entry #{kept[0] + 1} kept a failed attempt's output: press e for it."
    elif kept is not None:
        text += " Press e for the error history."
    return text


class OutputPanel(Guarded, Vertical):
    """Header line (type, size vs limit, schema fit) and the highlighted text or an explanation."""

    DEFAULT_CSS = """
    OutputPanel { height: auto; }
    OutputPanel > .output-head { height: auto; }
    OutputPanel > .output-body { height: auto; }
    OutputPanel > .output-provenance { height: auto; }
    OutputPanel > .output-note { height: auto; }
    """

    pretty: reactive[bool] = reactive(False)

    def __init__(self, *, title: str = "Output", id: str | None = None) -> None:
        super().__init__(id=id)
        self.title = title
        self.facts: OutputFacts | None = None
        self.note: str | None = None
        self.provenance: str | None = None

    def compose(self) -> ComposeResult:
        yield Static(classes="output-head")
        yield Static(classes="output-body")
        yield Static(classes="output-provenance")
        yield Static(classes="output-note")

    def show(
        self,
        text: str | None,
        descriptor: JobKindDescriptor | None,
        *,
        absence: str | None = None,
        note: str | None = None,
        provenance: str | None = None,
    ) -> None:
        """``provenance``: which attempt wrote the output, how, and when it goes (shown under
        it; ``storage.Provenance.text``)."""
        self.facts = output_facts(text, descriptor, absence)
        self.note = note
        self.provenance = provenance if text is not None else None
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
        origin = self.query_one(".output-provenance", Static)
        origin.update(Text(self.provenance or "", style="italic dim"))
        origin.display = self.provenance is not None
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
