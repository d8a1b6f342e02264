"""Under a kind, its schema drift (``Client.schema_drift``): how many of its recent stored
outputs (completed, and kept by failed attempts) no longer fit its current declared schema, and
the newest of them by job, with the path and keyword each breaks (never the value). The window
read is said with the count. Read when the kind or its descriptor changes, and on refresh."""

from __future__ import annotations

from datetime import datetime

from rich.console import Group, RenderableType
from rich.text import Text

from awa_tui.present import plural
from awa_tui.timefmt import relative
from awa_tui.widgets.following import Connect, FollowingPanel, rows_grid
from storage import Client, DriftedOutput, KindSummary, SchemaDrift


def drift_renderable(found: SchemaDrift, now: datetime) -> RenderableType:
    """The count within its window, then one row per listed output, newest first."""
    if not found.schema_declared:
        return Text("Schema drift: no output schema is declared, so nothing to check.", style="dim")
    window = Text(f" · read from {found.window}", style="dim")
    if not found.checked:
        return Text.assemble(
            ("Schema drift: ", "bold"), f"no output of {found.kind} to check", window
        )
    if not found.drifted:
        return Text.assemble(
            ("Schema drift: ", "bold"),
            (f"all {plural(found.checked, 'output')} fit the current schema", "green"),
            window,
        )
    kept = f" ({found.kept_drifted:,} kept by failed attempts)" if found.kept_drifted else ""
    head = Text.assemble(
        ("Schema drift: ", "bold"),
        (f"{found.drifted:,} of {plural(found.checked, 'output')}", "bold yellow"),
        f" do not fit the current schema{kept}",
        window,
    )
    rows = rows_grid(3)
    for output in found.outputs:
        rows.add_row(
            Text(f"job {output.job_id}", style="bold"),
            Text(where(output), style="dim"),
            relative(output.finalized_at, now),
            violations_text(output),
        )
    parts: list[RenderableType] = [head, rows]
    unlisted = found.drifted - len(found.outputs)
    if unlisted:
        parts.append(Text(f"… and {unlisted:,} older ones, not listed.", style="dim"))
    return Group(*parts)


def where(output: DriftedOutput) -> str:
    """``compact``, ``general``, or ``kept: failed`` (a failed attempt's output, where its job
    is now: failed, retryable, dead_lettered)."""
    return output.storage_path if output.kept_by is None else f"kept: {output.kept_by}"


def violations_text(output: DriftedOutput) -> Text:
    """``$.rows type: expected integer, got string; $ required ...`` (+ how many more)."""
    text = Text()
    for n, violation in enumerate(output.violations):
        if n:
            text.append("; ")
        text.append(violation.path, style="bold")
        text.append(f" {violation.keyword}", style="cyan")
        text.append(f": {violation.message}", style="dim")
    if output.more:
        text.append(f" (+{output.more} more)", style="dim")
    return text


DriftKey = tuple[str, str | None, datetime]
"""What the panel follows: the kind, its descriptor's hash (the schema checked), and the clock
(``now``) its times are shown against."""


class DriftPanel(FollowingPanel[DriftKey, SchemaDrift]):
    """The schema drift of the kind it follows."""

    READING = "Schema drift: reading…"
    FAILED = "Could not read this kind's schema drift."

    def follow(self, client: Connect, summary: KindSummary, now: datetime) -> None:
        """Show the drift of ``summary``'s kind; read again only when the kind or its
        descriptor (the schema checked against) changed, or after ``forget``."""
        d = summary.descriptor
        key = (summary.kind, d.descriptor_hash if d is not None else None, now)
        if self.following is not None and self.following[:2] == key[:2]:
            return
        self.follow_key(client, key)

    async def fetch(self, client: Client, key: DriftKey) -> SchemaDrift:
        return await client.schema_drift(key[0])

    def render_found(self, found: SchemaDrift) -> RenderableType:
        assert self.following is not None
        return drift_renderable(found, self.following[2])
