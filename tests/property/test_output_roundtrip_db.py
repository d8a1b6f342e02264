"""Property: any value either fails ``set_output`` or reads back equal through both terminal
paths (compact batch array and general-path column), and the stand-in ``HandlerJob`` agrees
with the runtime on every value.
"""

from __future__ import annotations

import math
from typing import Any

import orjson
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from storage import Client, Job, OutputError
from storage.finalize.attempt_writes import complete_general
from storage.finalize.compact_writes import complete_compact
from storage.finalize.types import AttemptRecord, AttemptRef, CompactCompletion
from storage.runtime.claim import claim_batch
from storage.testing import HandlerJob

scalars = (
    st.none()
    | st.booleans()
    | st.integers(min_value=-(2**70), max_value=2**70)
    | st.floats(allow_nan=True, allow_infinity=True)
    | st.text(max_size=40)
)
values = st.recursive(
    scalars,
    lambda children: (
        st.lists(children, max_size=6)
        | st.tuples(children, children)
        | st.dictionaries(st.text(max_size=10), children, max_size=6)
        | st.frozensets(st.integers(), max_size=2)
    ),
    max_leaves=40,
)


def expected_json(value: Any) -> Any:
    """The documented conversion: tuples become lists; everything else is kept."""
    if isinstance(value, tuple | list):
        return [expected_json(v) for v in value]
    if isinstance(value, dict):
        return {k: expected_json(v) for k, v in value.items()}
    return value


def same(left: Any, right: Any) -> bool:
    """Equality that tells 1 from 1.0 and -0.0 from 0.0."""
    if isinstance(left, float) or isinstance(right, float):
        return (
            type(left) is type(right)
            and math.copysign(1, left) == math.copysign(1, right)
            and left == right
        )
    if isinstance(left, list) and isinstance(right, list):
        return len(left) == len(right) and all(same(a, b) for a, b in zip(left, right, strict=True))
    if isinstance(left, dict) and isinstance(right, dict):
        return list(left) == list(right) and all(same(left[k], right[k]) for k in left)
    return type(left) is type(right) and left == right


@settings(
    max_examples=60,
    deadline=None,
    suppress_health_check=[HealthCheck.function_scoped_fixture, HealthCheck.too_slow],
)
@given(value=values)
async def test_any_value_fails_set_output_or_reads_back_equal_on_both_paths(
    client: Client, value: Any
) -> None:
    stand_in = HandlerJob({}, kind="prop")
    try:
        stand_in.set_output(value)
    except OutputError:
        return  # refused before anything could be written; the runtime slot agrees below
    text = stand_in.seal()
    if text is None:
        return  # JSON null clears
    assert same(orjson.loads(text), expected_json(value))

    client.task(kind="prop_kind")(_prop_handler)
    compact = await client.insert({"p": 1}, kind="prop_kind")
    general = await client.insert({"p": 2}, kind="prop_kind", tags=["general"])
    async with client.pool.acquire() as conn:
        claimed = await claim_batch(conn, ["default"], 2, 60)
        first = next(c for c in claimed if c.job_id == compact.id)
        second = next(c for c in claimed if c.job_id == general.id)
        await complete_compact(
            conn,
            [
                CompactCompletion(
                    first.job_id, first.run_lease, first.claim_id, first.lane_seq, text, False
                )
            ],
            outputs_supported=True,
        )
        await complete_general(
            conn,
            AttemptRecord(
                AttemptRef(second.job_id, second.run_lease, second.claim_id),
                1,
                25,
                None,
                output_text=text,
            ),
            keyed=False,
            outputs_supported=True,
        )
    for job_id in (compact.id, general.id):
        row = await client.get_job(job_id)
        assert row is not None
        assert row.output_text == text
        assert same(row.output, expected_json(value))


@settings(max_examples=300, deadline=None)
@given(value=values)
def test_handler_job_and_runtime_slot_agree(value: Any) -> None:
    """The stand-in validates through the same converter as the runtime's slot."""
    from storage.values.output import OutputSlot

    stand_in, slot = HandlerJob({}), OutputSlot()
    outcomes: list[tuple[str, str | None]] = []
    for target in (stand_in.set_output, slot.set):
        try:
            target(value)
            outcomes.append(("ok", None))
        except OutputError as exc:
            outcomes.append(("error", exc.reason))
    assert outcomes[0] == outcomes[1]
    assert stand_in.seal() == slot.seal()


async def _prop_handler(job: Job[dict[str, int]]) -> None:
    return None
