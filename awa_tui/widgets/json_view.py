"""JSON rendered with syntax highlighting: exact text (outputs) or a value pretty-printed."""

from __future__ import annotations

from typing import Any

import orjson
from rich.syntax import Syntax
from rich.text import Text
from textual.widgets import Static


def pretty_json(value: Any) -> str:
    return orjson.dumps(value, option=orjson.OPT_INDENT_2).decode()


def json_syntax(text: str) -> Syntax:
    """Highlighted, wrapped, on the terminal's own background."""
    return Syntax(
        text,
        "json",
        theme="ansi_dark",
        word_wrap=True,
        background_color="default",
    )


class JsonView(Static):
    """A titled JSON value (args, metadata, progress, a schema). Empty values say so."""

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
            self.update(json_syntax(pretty_json(value)))

    def show_text(self, text: str) -> None:
        """Exactly ``text``, highlighted, nothing reformatted."""
        self.value = text
        self.update(json_syntax(text))
