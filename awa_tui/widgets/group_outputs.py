"""Under a failure group, what its members' failed attempts kept (``Client.failure_group_outputs``):
the distinct shapes (top-level key sets, or a JSON type) with counts and the newest one's
sample, and, split by a field the kind's schema declares, one row per value of it, so "failed
after 0 rows" and "failed after 400 rows" read as two rows. Read when the group, the field or
the group's size changes; the window read is said above the rows."""

from __future__ import annotations

from rich.console import Group, RenderableType
from rich.text import Text

from awa_tui.present import plural
from awa_tui.widgets.following import Connect, FollowingPanel, rows_grid
from awa_tui.widgets.json_view import json_content
from awa_tui.widgets.widths import cut
from storage import Client, FailureGroup, GroupOutputs, JobKindDescriptor

SAMPLE_CELLS = 60
"""A shape's sample on its row is cut at this many cells; the largest shape's, when cut, is
shown whole below."""


def declared_fields(descriptor: JobKindDescriptor | None) -> list[str]:
    """The top-level keys the kind's output schema declares (``properties``), sorted: the
    stored schema (jsonb) keeps no declaration order."""
    schema = descriptor.output_schema if descriptor is not None else None
    properties = schema.get("properties") if isinstance(schema, dict) else None
    return sorted(str(key) for key in properties) if isinstance(properties, dict) else []


def next_field(fields: list[str], current: str | None) -> str | None:
    """The field after ``current`` (None: not split), back to None after the last one."""
    if not fields:
        return None
    if current not in fields:
        return fields[0]
    position = fields.index(current)
    return fields[position + 1] if position + 1 < len(fields) else None


def outputs_renderable(found: GroupOutputs) -> RenderableType:
    """The shapes, the split and the largest shape's sample, with the window read."""
    bound = " (at least: the window was full)" if found.capped else ""
    head = Text.assemble(
        ("Kept outputs: ", "bold"),
        f"{found.kept:,} of {plural(found.members, 'member')} kept one{bound}",
        (f" · members among {found.window}", "dim"),
    )
    if not found.shapes:
        return Group(head, Text("No member's failed attempt kept an output.", style="dim"))
    shapes = rows_grid(3)
    for shape in found.shapes:
        shapes.add_row(
            Text(f"{shape.count:,}", justify="right", style="bold"),
            Text(shape.label, style="cyan"),
            Text(f"job {shape.sample_job_id}", style="dim"),
            cut(shape.sample, SAMPLE_CELLS),
        )
    if found.other_shapes:
        shapes.add_row(
            Text(f"{found.other_shapes:,}", justify="right"), Text("other shapes", style="dim")
        )
    parts: list[RenderableType] = [head, shapes]
    if found.field is not None:
        parts.append(split_renderable(found))
    largest = found.shapes[0]
    if len(largest.sample) > SAMPLE_CELLS:  # cut on its row: shown whole below
        parts.append(
            Text.assemble(
                ("Sample ", "bold"), (f"(job {largest.sample_job_id}, {largest.label})", "dim")
            )
        )
        parts.append(json_content(largest.sample))
    return Group(*parts)


def split_renderable(found: GroupOutputs) -> RenderableType:
    """One row per value of the split field, most frequent first, then the rest together."""
    grid = rows_grid(2)
    for value in found.values:
        shown = Text("(no such key)", style="dim") if value.value is None else Text(value.value)
        grid.add_row(
            Text(f"{value.count:,}", justify="right", style="bold"),
            shown,
            Text(f"job {value.sample_job_id}", style="dim"),
        )
    if found.other_values:
        grid.add_row(
            Text(f"{found.other_values:,}", justify="right"), Text("other values", style="dim")
        )
    title = Text.assemble(
        ("Split by ", "bold"), (str(found.field), "bold cyan"), " (f: next field)"
    )
    return Group(title, grid)


GroupKey = tuple[str, str, str | None, int]
"""What the panel follows: kind, signature, split field, and the group's size."""


class GroupOutputsPanel(FollowingPanel[GroupKey, GroupOutputs]):
    """The kept outputs of the failure group it follows, split by a field when one is set."""

    READING = "Kept outputs: reading…"
    FAILED = "Could not read the outputs this group kept."

    def follow(self, client: Connect, group: FailureGroup, field: str | None) -> None:
        """Show ``group``'s kept outputs split by ``field``; read again only when the group, the
        field or the group's size changed (a live refresh that changed nothing reads nothing)."""
        key = (group.kind, group.signature, field, group.count)
        same = self.following is not None and self.following[:3] == key[:3]
        self.follow_key(client, key, keep=same)

    async def fetch(self, client: Client, key: GroupKey) -> GroupOutputs:
        kind, signature, field, _count = key
        return await client.failure_group_outputs(kind, signature, field=field)

    def render_found(self, found: GroupOutputs) -> RenderableType:
        return outputs_renderable(found)
