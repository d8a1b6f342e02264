"""The declared fields of a schema, kept beside an editor: name, type, required, choices, note."""

from __future__ import annotations

from rich.text import Text
from textual.app import ComposeResult
from textual.containers import VerticalScroll
from textual.widgets import Label, Static

from awa_tui.skeleton import MAX_FIELDS, FieldRule, field_rules


def rules_text(rules: list[FieldRule]) -> Text:
    """One line per field, then its choices and its description, indented, when it has them."""
    if not rules:
        return Text("The schema declares no fields the form can list.", style="dim")
    lines: list[Text] = []
    for rule in rules:
        need = ("required", "bold") if rule.required else ("optional", "dim")
        lines.append(Text.assemble((rule.name, "bold"), " ", (rule.type, "cyan"), " · ", need))
        if rule.choices:
            first, *others = rule.choices
            choices = Text.assemble("  one of ", (first, "green"))
            if others:
                choices.append(", " + ", ".join(others))
            lines.append(choices)
        if rule.description:
            lines.append(Text("  " + rule.description, style="dim italic"))
    if len(rules) >= MAX_FIELDS:
        lines.append(Text(f"(the first {MAX_FIELDS} fields; the schema below has all)", "dim"))
    return Text("\n").join(lines)


class FieldList(VerticalScroll):
    """The declared schema's fields, as a list that fits a narrow column."""

    DEFAULT_CSS = """
    FieldList { height: auto; }
    """

    def __init__(self, schema: dict[str, object], type_name: str, *, id: str | None = None) -> None:
        super().__init__(id=id, can_focus=False)
        self.rules = field_rules(schema)
        self.type_name = type_name

    def compose(self) -> ComposeResult:
        yield Label(f"Fields of {self.type_name}", classes="field-label")
        yield Static(rules_text(self.rules), id="field-rules")
