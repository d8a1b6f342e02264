"""A completed output beside the failed attempt's kept one: both stacked, or their diff.

Shown by the job detail for a completed job whose error history kept a failed attempt's output
(``storage.JobAccount.kept_output``). ``view`` toggles between the kept output under the
completed one ("stacked") and a structural diff from kept to completed ("diff",
``storage.json_diff``: paths added, removed, changed, values cut short, at most 4 KiB).
Reusable for any two outputs: ``show_pair`` takes the values and their titles.
"""

from __future__ import annotations

from typing import Any, Literal

import orjson
from rich.text import Text
from textual.app import ComposeResult
from textual.containers import Vertical
from textual.reactive import reactive
from textual.widgets import Static

from awa_tui.resilience import Guarded
from awa_tui.widgets.output_panel import JSONB_NOTE, OutputPanel
from storage import JobKindDescriptor, JsonDiff, json_diff

View = Literal["stacked", "diff"]
MARKS = {"added": ("+", "green"), "removed": ("-", "red"), "changed": ("~", "yellow")}
MARKS["retyped"] = ("~", "bold yellow")


def diff_text(diff: JsonDiff, before: str, after: str) -> Text:
    """The diff as lines: a head counting each kind of change, then ``~ $.path  old → new``."""
    text = Text()
    text.append(f"Diff from {before} to {after}", style="bold")
    if diff.equal:
        text.append("\nThe two outputs are equal.", style="dim")
        return text
    counts = " · ".join(f"{n} {change}" for change, n in diff.counts.items())
    text.append(f"  {counts}", style="dim")
    width = max(len(change.path) for change in diff.changes) if diff.changes else 0
    for change in diff.changes:
        mark, style = MARKS[change.change]
        text.append(f"\n{mark} ", style=style)
        text.append(change.path.ljust(width), style="bold")
        if change.change == "added":
            text.append(f"  {change.after}", style="green")
        elif change.change == "removed":
            text.append(f"  {change.before}", style="red")
        else:
            text.append(f"  {change.before}", style="red")
            text.append(" → ")
            text.append(str(change.after), style="green")
            if change.change == "retyped":
                text.append("  (type changed)", style="dim")
    if diff.omitted:
        text.append(
            f"\n… {diff.omitted} more changes not shown (the diff stops at 4 KiB)", style="dim"
        )
    return text


class OutputCompare(Guarded, Vertical):
    """The kept failed output, stacked under the completed one, or the diff between them."""

    DEFAULT_CSS = """
    OutputCompare { height: auto; }
    OutputCompare > .compare-diff {
        height: auto; border: round $primary; padding: 0 1; margin: 1 0 0 0;
    }
    """

    view: reactive[View] = reactive("stacked")

    def __init__(self, *, id: str | None = None) -> None:
        super().__init__(id=id)
        self.diff: Text | None = None

    def compose(self) -> ComposeResult:
        yield OutputPanel(title="Kept failed output", id="kept-output")
        yield Static(classes="compare-diff")

    def show_pair(
        self,
        before: tuple[str, Any, str | None] | None,
        after: tuple[str, Any],
        descriptor: JobKindDescriptor | None,
    ) -> None:
        """``before``: (title, value, provenance) of the output compared, None to hide the
        comparison; ``after``: (title, value) of the one it is compared with."""
        self.display = before is not None
        if before is None:
            self.diff = None
            return
        title, value, provenance = before
        panel = self.query_one(OutputPanel)
        panel.title = title
        panel.show(
            orjson.dumps(value).decode(),
            descriptor,
            provenance=provenance,
            note=JSONB_NOTE,
        )
        self.diff = diff_text(json_diff(value, after[1]), title.lower(), after[0].lower())
        self.query_one(".compare-diff", Static).update(self.diff)
        self.watch_view()

    def watch_view(self) -> None:
        if not self.is_mounted:
            return
        self.query_one(OutputPanel).display = self.view == "stacked"
        self.query_one(".compare-diff", Static).display = self.view == "diff"

    def toggle(self) -> None:
        self.view = "diff" if self.view == "stacked" else "stacked"
