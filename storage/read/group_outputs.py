"""The outputs a failure group's members kept: their shapes, and one field's values.

A member's kept output is the one its error entries hold (only the latest entry to record one
keeps it, ``storage.finalize``). Its shape is its sorted top-level keys, or for a value that is
no object its JSON type, so "failed after 0 rows" and "failed after a timeout" with other keys
read apart. With a field (a key the kind's schema declares, e.g. ``status``) the outputs split
by its value, so ``{"rows": 0}`` and ``{"rows": 400}`` are two rows.

Bounded like the groups (``storage.read.failure_groups``): members are found within the same
newest ``SCAN_CAP`` jobs per source, by the same signature expression, so the group here is the
group listed there. Shapes and values are counted in PostgreSQL and only the newest sample of a
listed shape travels (cut to 4 KiB); at most ``MAX_SHAPES`` shapes and ``MAX_VALUES`` values
are listed, the rest counted together. One statement: one snapshot.
"""

from __future__ import annotations

from datetime import datetime

import orjson

from storage.db.pool import Conn
from storage.read.failure_groups import CAPPED, SCAN_CAP, SIGNED, kept_output_of
from storage.values.json_diff import VALUE_CHARS, cut_text, shown
from storage.values.shapes import SAMPLE_CHARS, FieldValue, GroupOutputs, OutputShape

MAX_SHAPES = 12
"""Shapes listed at most (largest first); the others are counted together."""
MAX_VALUES = 12
"""A field's values listed at most (most frequent first); the others are counted together."""

GROUP_WINDOW = (
    f"the newest {SCAN_CAP:,} failed, {SCAN_CAP:,} retryable and {SCAN_CAP:,} dead-lettered jobs"
)
"""What a group's outputs were read from, for a person."""

# $1 since, $2 kind, $3 queue, $4 rows per source, as the groups; $5 kind, $6 signature of the
# group; $7 the field to split by (NULL: none); $8 shapes and $9 values listed at most.
# ``flag``: a value row's field is present (JSON null is a value); the members row's counts
# are lower bounds (``CAPPED``).
OUTPUTS = f"""
WITH {SIGNED}, members AS (
    SELECT job_id, {kept_output_of("errors")} AS output
      FROM signed WHERE kind = $5 AND signature = $6
), kept AS (
    SELECT job_id, output, jsonb_typeof(output) AS type,
           CASE WHEN jsonb_typeof(output) = 'object'
                THEN ARRAY(SELECT k FROM jsonb_object_keys(output) k ORDER BY k) END AS keys
      FROM members WHERE output IS NOT NULL
), shapes AS (
    SELECT type, keys, count(*) AS n, max(job_id) AS sample_job_id,
           row_number() OVER (ORDER BY count(*) DESC, max(job_id) DESC) AS rank
      FROM kept GROUP BY type, keys
), field_values AS (
    SELECT output -> $7::text AS value, count(*) AS n, max(job_id) AS sample_job_id,
           row_number() OVER (ORDER BY count(*) DESC, max(job_id) DESC) AS rank
      FROM kept WHERE $7::text IS NOT NULL GROUP BY 1
)
SELECT 'shape' AS part, s.type, s.keys, s.n, s.sample_job_id,
       (SELECT k.output::text FROM kept k WHERE k.job_id = s.sample_job_id LIMIT 1) AS value,
       NULL::boolean AS flag
  FROM shapes s WHERE s.rank <= $8
UNION ALL
SELECT 'value', NULL, NULL, v.n, v.sample_job_id, v.value::text, v.value IS NOT NULL
  FROM field_values v WHERE v.rank <= $9
UNION ALL
SELECT 'other_shapes', NULL, NULL, COALESCE(sum(n), 0)::bigint, NULL, NULL, NULL
  FROM shapes WHERE rank > $8
UNION ALL
SELECT 'other_values', NULL, NULL, COALESCE(sum(n), 0)::bigint, NULL, NULL, NULL
  FROM field_values WHERE rank > $9
UNION ALL
SELECT 'members', NULL, NULL, (SELECT count(*) FROM members), NULL, NULL, {CAPPED}
"""


async def group_outputs(
    conn: Conn,
    kind: str,
    signature: str,
    *,
    since: datetime | None,
    queue: str | None,
    field: str | None,
    caps: tuple[int, int] = (MAX_SHAPES, MAX_VALUES),
    scan: int = SCAN_CAP,
) -> GroupOutputs:
    """The kept outputs of the group ``(kind, signature)``, split by ``field`` when given.
    ``caps`` (shapes, values listed) and ``scan`` (rows per source) are for tests of the
    bounds."""
    rows = await conn.fetch(OUTPUTS, since, kind, queue, scan, kind, signature, field, *caps)
    shapes: list[OutputShape] = []
    values: list[FieldValue] = []
    totals: dict[str, int] = {}
    capped = False
    for r in sorted(rows, key=lambda r: (-r["n"], -(r["sample_job_id"] or 0))):
        match r["part"]:
            case "shape":
                shapes.append(
                    OutputShape(
                        type=r["type"],
                        keys=r["keys"],
                        count=r["n"],
                        sample_job_id=r["sample_job_id"],
                        sample=_shown(r["value"], SAMPLE_CHARS),
                    )
                )
            case "value":
                value = _shown(r["value"], VALUE_CHARS) if r["flag"] else None
                values.append(
                    FieldValue(value=value, count=r["n"], sample_job_id=r["sample_job_id"])
                )
            case "members":
                totals["members"] = r["n"]
                capped = bool(r["flag"])
            case other:
                totals[other] = r["n"]
    return GroupOutputs(
        kind=kind,
        signature=signature,
        members=totals.get("members", 0),
        kept=sum(s.count for s in shapes) + totals.get("other_shapes", 0),
        shapes=shapes,
        other_shapes=totals.get("other_shapes", 0),
        field=field,
        values=values,
        other_values=totals.get("other_values", 0),
        capped=capped,
        window=GROUP_WINDOW,
    )


def _shown(text: str, chars: int) -> str:
    """jsonb's text (spaced) as compact JSON, cut to ``chars``; as it is (cut) when this reader
    cannot decode it (a number past 64 bits), never refused."""
    try:
        return shown(orjson.loads(text), chars)
    except orjson.JSONDecodeError:
        return cut_text(text, chars)
