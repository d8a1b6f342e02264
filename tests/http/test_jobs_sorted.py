"""``GET /api/jobs`` with the browser's time range and orders against a real PostgreSQL: every
order pages by ``cursor`` through exactly the rows the Python API lists, ties included; a time
range reads as the console's filter does; what the engine refuses (an order no index serves,
an empty range) and what cannot be read (a time, a sort, a cursor) is a 400 whose message says
why."""

from __future__ import annotations

import base64
from datetime import UTC, datetime, timedelta
from typing import Any

import asyncpg
import httpx
import orjson
import pytest

from storage import Client, JobState, SortOrder
from tests.storage.read.test_browse_time_sort import BASE, ORDERS, TABS, _history


def _tab_params(state: JobState | None, dlq: bool) -> dict[str, str]:
    if dlq:
        return {"state": "dlq"}
    return {} if state is None else {"state": state.value}


async def _all_pages(api: httpx.AsyncClient, params: dict[str, Any]) -> list[int]:
    """Every page of ``params`` by ``next_cursor``: the ids in order."""
    ids: list[int] = []
    cursor: str | None = None
    while True:
        answer = await api.get(
            "/api/jobs", params={**params, **({"cursor": cursor} if cursor else {})}
        )
        assert answer.status_code == 200, answer.text
        page = answer.json()
        ids += [row["id"] for row in page["jobs"]]
        assert page["sort"] == SortOrder.parse(params.get("sort", "-id")).text
        if page["sort"] != "-id":
            assert page["next_before_id"] is None
        if not page["has_more"]:
            assert page["next_cursor"] is None
            return ids
        cursor = page["next_cursor"]
        assert cursor


async def test_every_order_pages_by_cursor_as_the_python_api_lists_it(
    api: httpx.AsyncClient, client: Client, conn: asyncpg.Connection
) -> None:
    await _history(client, conn)
    served = 0
    for state, dlq in TABS:
        for order in ORDERS:
            params: dict[str, str | int] = {
                **_tab_params(state, dlq),
                "sort": order.text,
                "limit": 7,
            }
            refusal = order.refusal(state, dlq)
            if refusal is not None:
                answer = await api.get("/api/jobs", params=params)
                assert answer.status_code == 400
                assert answer.json() == {"error": "invalid_filter", "message": refusal}
                continue
            served += 1
            for since, since_text in ((None, None), (BASE + timedelta(minutes=1), "10:01")):
                whole = await client.list_jobs(
                    state=state, dlq=dlq, sort=order, since=since, limit=1000
                )
                query = params if since is None else {**params, "since": f"2026-11-30T{since_text}"}
                assert await _all_pages(api, query) == [r.id for r in whole], (state, dlq, order)
    assert served >= 30


async def test_since_and_before_read_durations_and_iso_times(
    api: httpx.AsyncClient, client: Client, conn: asyncpg.Connection
) -> None:
    await _history(client, conn)

    async def ids(**params: str) -> list[int]:
        answer = await api.get("/api/jobs", params={**params, "limit": 500})
        assert answer.status_code == 200, answer.text
        return [row["id"] for row in answer.json()["jobs"]]

    async def listed(**bounds: datetime) -> list[int]:
        return [r.id for r in await client.list_jobs(limit=500, **bounds)]  # type: ignore[arg-type]

    at = BASE + timedelta(minutes=1)
    assert await ids(since="2026-11-30T10:01") == await listed(since=at)  # no zone: UTC
    assert await ids(since="2026-11-30T11:01+01:00") == await listed(since=at)
    assert await ids(since="2026-11-30T10:01:00Z") == await listed(since=at)
    assert await ids(before="2026-11-30T10:01") == await listed(before=at)
    assert await ids(since="2026-11-30", before="2026-11-30T10:01") == await listed(
        since=BASE - timedelta(hours=10), before=at
    )
    # Durations count back from the server's clock: the history is pinned in the past.
    later = await client.insert({"n": 1}, kind="t_done", run_at=datetime.now(UTC) + timedelta(1))
    future = [later.id]
    assert await ids(since="1h") == future
    assert set(await ids(before="1h")) == set(await listed()) - set(future)
    range_only: dict[str, str | int] = {"since": "2026-11-30T10:02", "limit": 500}
    page = (await api.get("/api/jobs", params=range_only)).json()
    expected = {state.value: 0 for state in JobState}
    for row in page["jobs"]:
        expected[row["state"]] += 1
    assert page["counts"]["by_state"] == expected  # the counts follow the range


async def test_a_cursor_keeps_its_place_as_new_jobs_arrive(
    api: httpx.AsyncClient, client: Client, conn: asyncpg.Connection
) -> None:
    """Keyset paging: rows inserted between two pages shift nothing."""
    await _history(client, conn)
    params: dict[str, str | int] = {"state": "available", "sort": "when", "limit": 2}
    first = (await api.get("/api/jobs", params=params)).json()
    expected = [r.id for r in await client.list_jobs(state="available", sort="when")]
    await client.insert({"n": 99}, kind="t_run", run_at=BASE - timedelta(days=1))
    second = await api.get("/api/jobs", params={**params, "cursor": first["next_cursor"]})
    assert [row["id"] for row in first["jobs"] + second.json()["jobs"]] == expected[:4]


def _cursor(*parts: object) -> str:
    return _raw_cursor(orjson.dumps(list(parts)))


def _raw_cursor(text: bytes) -> str:
    return base64.urlsafe_b64encode(text).rstrip(b"=").decode()


OUT_OF_RANGE = f'["-id",{2**63},{2**63}]'.encode()  # one past bigint
AN_OBJECT = orjson.dumps({"-id": 1, "b": 2, "c": 3})  # three keys unpack like three items


@pytest.mark.parametrize(
    ("query", "code", "message"),
    [
        ("sort=size", "invalid_filter", "Cannot sort by 'size'; use one of id, when, attempts"),
        ("state=completed&sort=-attempts", "invalid_filter", "Completed jobs cannot be sorted"),
        ("sort=id", "invalid_filter", "All jobs cannot be listed oldest id first"),
        ("state=dlq&sort=attempts", "invalid_filter", "Dead-lettered jobs cannot be sorted"),
        ("since=banana", "invalid_filter", "since=banana is not a duration (30s, 15m, 1h, 2d,"),
        ("before=2026-13-01", "invalid_filter", "before=2026-13-01 is not a duration"),
        ("since=99999999999w", "invalid_filter", "since=99999999999w reaches back too far."),
        ("since=2026-11-30T10:00+02:00", "invalid_filter", "write it %2B, or use Z for UTC"),
        ("since=2026-11-30&before=2026-11-30", "invalid_filter", "The time range is empty"),
        ("sort=-when&before_id=5", "invalid_request", "before_id pages the default order"),
        (f"before_id=5&cursor={_cursor('-id', 9, 9)}", "invalid_request", "pass cursor"),
        ("cursor=not-a-cursor", "invalid_cursor", "cursor is not one this API handed out"),
        (f"cursor={_cursor('-when', 9, 9)}", "invalid_cursor", "continues a list sorted by -when"),
        (f"sort=-when&cursor={_cursor('-when', 9, 9)}", "invalid_cursor", "not one this API"),
        (f"cursor={_raw_cursor(OUT_OF_RANGE)}", "invalid_cursor", "not one this API"),
        (f"cursor={_cursor('-id', True, 3)}", "invalid_cursor", "not one this API"),
        (f"cursor={_cursor(5, 3, 3)}", "invalid_cursor", "not one this API"),
        ("cursor=" + _raw_cursor(AN_OBJECT), "invalid_cursor", "not one this API"),
        (f"sort=when&cursor={_cursor('when', '2026-11-30T10:00', 3)}", "invalid_cursor", "not"),
        ("cursor=" + "A" * 600, "invalid_request", "cursor: String should have at most 512"),
    ],
)
async def test_a_refused_list_query_is_a_400_that_says_why(
    api: httpx.AsyncClient, query: str, code: str, message: str
) -> None:
    answer = await api.get(f"/api/jobs?{query}")  # sent as written: "+" stays unescaped
    assert answer.status_code == 400, answer.text
    body = answer.json()
    assert body["error"] == code
    assert message in body["message"]
    assert "Traceback" not in answer.text


async def test_the_openapi_description_has_the_new_parameters(api: httpx.AsyncClient) -> None:
    description = (await api.get("/openapi.json")).json()
    listing = description["paths"]["/api/jobs"]["get"]
    params = {p["name"]: p for p in listing["parameters"]}
    assert {"since", "before", "sort", "cursor", "before_id"} <= set(params)
    assert "2026-11-30T10:00" in params["since"]["description"]
    assert "attempts only for the live states" in params["sort"]["description"]
    assert params["sort"]["schema"]["default"] == "-id"
    assert "400" in listing["responses"]
    page = description["components"]["schemas"]["JobListOut"]["properties"]
    assert {"next_cursor", "sort", "next_before_id"} <= set(page)
