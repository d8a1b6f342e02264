"""JSON rendered with syntax highlighting: exact text (outputs) or a value pretty-printed.

Highlighting uses Textual's own highlighter, so colours follow the theme (and NO_COLOR).
"""

from __future__ import annotations

from typing import Any

import orjson
from rich.text import Text
from textual.content import Content
from textual.highlight import highlight
from textual.widgets import Static

from awa_tui.resilience import Guarded


def pretty_json(value: Any) -> str:
    return orjson.dumps(value, option=orjson.OPT_INDENT_2).decode()


def json_content(text: str) -> Content:
    """``text`` highlighted as JSON, character for character."""
    return highlight(text, language="json")


class JsonView(Guarded, Static):
    """A JSON value (args, metadata, progress, a schema). Empty values say so."""

    DEFAULT_CSS = """
    JsonView { height: auto; }
    """

    def __init__(self, *, empty: str = "(none)", id: str | None = None) -> None:
        super().__init__(id=id)
        self.empty = empty
        self.value: Any = None

    def show_value(self, value: Any) -> None:
        self.value = value
        if value is None or value == {} or value == []:
            self.update(Text(self.empty, style="dim"))
        else:
            self.update(json_content(pretty_json(value)))

    def show_text(self, text: str) -> None:
        """Exactly ``text``, highlighted, nothing reformatted."""
        self.value = text
        self.update(json_content(text))
