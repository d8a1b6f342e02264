"""``GET /api/jobs`` searching inside outputs as the console's filter does (``out=TEXT``,
``out.PATH=VALUE``), within a time range, against a real PostgreSQL."""

from __future__ import annotations

import httpx
import pytest

from tests.storage.read.test_output_search import outputs

__all__ = ["outputs"]  # the fixture: the same jobs as the storage tests


async def _ids(api: httpx.AsyncClient, params: dict[str, str]) -> set[int]:
    answer = await api.get("/api/jobs", params=params)
    assert answer.status_code == 200, answer.text
    return {row["id"] for row in answer.json()["jobs"]}


async def test_a_path_value_lists_the_completed_jobs_with_it_in_the_range(
    api: httpx.AsyncClient, outputs: dict[str, int]
) -> None:
    query = {"state": "completed", "since": "1h", "out.status": "partial"}
    assert await _ids(api, query) == {outputs["compact_partial"], outputs["general_partial"]}
    text = {"state": "completed", "since": "1h", "out": "x-1"}
    assert await _ids(api, text) == {outputs["compact_nested"], outputs["general_nested"]}
    assert await _ids(api, {**query, "out": "nothing like it"}) == set()


@pytest.mark.parametrize(
    ("params", "says"),
    [
        ({"out.status": "partial"}, "needs a time range start"),
        ({"since": "1h", "out.status": "partial", "out.rows": "1"}, "One out.PATH=VALUE"),
        ({"since": "1h", "out.a..b": "x"}, "empty step"),
        ({"since": "1h", "out": ""}, "needs the text"),
    ],
)
async def test_an_output_search_it_cannot_run_is_a_400_saying_why(
    api: httpx.AsyncClient, outputs: dict[str, int], params: dict[str, str], says: str
) -> None:
    answer = await api.get("/api/jobs", params=params)
    assert answer.status_code == 400
    assert answer.json()["error"] == "invalid_filter"
    assert says in answer.json()["message"]
