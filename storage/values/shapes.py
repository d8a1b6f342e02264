"""What kept and stored outputs look like in bulk: a failure group's output shapes and a field's
values (``storage.read.group_outputs``), and a kind's schema drift (``storage.read.drift``).

Values travel only as short previews (a sample, a field's value, cut like the diff's values);
drift names where and which keyword an output breaks, never the output.
"""

from __future__ import annotations

from datetime import datetime

from pydantic import BaseModel, ConfigDict, Field

from storage.values.output import MAX_OUTPUT_BYTES
from storage.values.schema import Violation

SAMPLE_CHARS = MAX_OUTPUT_BYTES // 4 - 1
"""A sample is cut at this many characters (``json_diff.shown``): with its ellipsis never over
4 KiB of UTF-8. A field's value is cut like the diff's values (``json_diff.VALUE_CHARS``)."""


class OutputShape(BaseModel):
    """Kept outputs of one shape: an object's sorted top-level keys (``keys``), or for any other
    value its JSON type (``type``, ``keys`` None). ``sample``: the newest one's preview."""

    model_config = ConfigDict(frozen=True)

    type: str = Field(description="The JSON type: object, array, string, number, boolean.")
    keys: list[str] | None = Field(description="An object's top-level keys, sorted.")
    count: int
    sample_job_id: int
    sample: str = Field(description="The newest such output, compact JSON, at most 4 KiB.")

    @property
    def label(self) -> str:
        """``{a, b}`` for an object's keys, ``{}`` for an empty one, else the type."""
        if self.keys is None:
            return self.type
        return "{" + ", ".join(self.keys) + "}"


class FieldValue(BaseModel):
    """Kept outputs whose ``field`` has one value (``value``, compact JSON cut short; None: the
    output has no such key or is no object)."""

    model_config = ConfigDict(frozen=True)

    value: str | None
    count: int
    sample_job_id: int


class GroupOutputs(BaseModel):
    """The outputs a failure group's members kept: their shapes, largest first, at most
    ``MAX_SHAPES`` (``other_shapes`` counts the rest), and with ``field`` one row per value of
    it, at most ``MAX_VALUES`` (``other_values`` the rest). ``members`` is the group's size in
    the read's window (``capped``: the window was full, counts are lower bounds), ``kept`` how
    many of them kept an output."""

    model_config = ConfigDict(frozen=True)

    kind: str
    signature: str
    members: int
    kept: int
    shapes: list[OutputShape]
    other_shapes: int = 0
    field: str | None = None
    values: list[FieldValue] = []
    other_values: int = 0
    capped: bool = False
    window: str = Field(description="What was read, in words.")


class DriftedOutput(BaseModel):
    """A stored output that does not fit its kind's current schema: where it is and what it
    breaks (path and keyword, at most ``DRIFT_VIOLATIONS`` of them; ``more`` the rest)."""

    model_config = ConfigDict(frozen=True)

    job_id: int
    finalized_at: datetime = Field(
        description="When it was stored: the completion, or the failure that kept it."
    )
    storage_path: str = Field(
        description="compact or general (a completed output), or error entry (a failed "
        "attempt's kept output)"
    )
    violations: list[Violation]
    more: int = 0
    kept_by: str | None = Field(
        None,
        description="For a kept output, where its job is now: failed, retryable or "
        "dead_lettered; null for a completed output.",
    )


class SchemaDrift(BaseModel):
    """A kind's recent stored outputs (completed, and those its failed attempts kept) checked
    against its current declared schema: ``checked`` read within ``window``, ``drifted`` of
    them do not fit, the newest of those listed (at most ``MAX_DRIFT_LISTED``); ``kept_checked``
    and ``kept_drifted`` count the kept ones among them. ``schema_declared`` False: nothing to
    check."""

    model_config = ConfigDict(frozen=True)

    kind: str
    schema_declared: bool
    checked: int
    drifted: int
    outputs: list[DriftedOutput]
    window: str = Field(description="What was read, in words.")
    kept_checked: int = Field(0, description="Of checked, failed attempts' kept outputs.")
    kept_drifted: int = Field(0, description="Of drifted, failed attempts' kept outputs.")
