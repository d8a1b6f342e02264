"""A kind's declared output type and JSON Schema, full screen."""

from __future__ import annotations

from typing import ClassVar

from rich.text import Text
from textual.app import ComposeResult
from textual.binding import Binding, BindingType
from textual.containers import VerticalScroll
from textual.widgets import Footer, Static

from awa_tui.screens.base import AwaScreen
from awa_tui.widgets.app_header import AppHeader
from awa_tui.widgets.json_view import JsonView, pretty_json
from awa_tui.widgets.mode_banner import ModeBanner
from storage import JobKindDescriptor


class SchemaScreen(AwaScreen):
    TITLE = "Output schema"
    HELP = "The JSON schema the kind declares for its output; y copies it."

    BINDINGS: ClassVar[list[BindingType]] = [
        Binding("escape", "back", "Back", id="schema.back"),
        Binding("y", "copy", "Copy schema", id="schema.copy"),
    ]

    def __init__(self, kind: str, descriptor: JobKindDescriptor) -> None:
        super().__init__()
        self.kind = kind
        self.descriptor = descriptor

    def compose(self) -> ComposeResult:
        yield AppHeader(icon="≡")
        yield ModeBanner()
        type_name = self.descriptor.output_type_name or "no declared output type"
        yield Static(
            Text.assemble((f"Output schema of {self.kind}", "bold"), f" · type {type_name}"),
            id="schema-head",
        )
        with VerticalScroll(id="schema-body"):
            yield JsonView(id="schema-json", empty="(this kind publishes no schema)")
        yield Footer(compact=True, show_command_palette=False)

    def on_mount(self) -> None:
        super().on_mount()
        self.query_one(JsonView).show_value(self.descriptor.output_schema)
        self.query_one("#schema-body").focus()

    def action_back(self) -> None:
        self.dismiss()

    def action_copy(self) -> None:
        schema = self.descriptor.output_schema
        if schema is not None:
            self.awa.copy_text(pretty_json(schema), f"the {self.kind} schema")
