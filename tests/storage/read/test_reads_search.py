"""Search text matches what a person sees in a job, never JSON syntax; unusable text is refused."""

from __future__ import annotations

from typing import Any

import pytest

from storage import Client, InvalidFilter, Job


async def _noop(job: Job[dict[str, Any]]) -> None:
    return None


@pytest.fixture
async def jobs(client: Client) -> dict[str, int]:
    client.task(kind="probe")(_noop)
    made: dict[str, int] = {}
    for name, args in {
        "quote": {"note": 'say "hi"'},
        "backslash": {"path": "C:\\back\\slash"},
        "tab": {"cols": "a\tb"},
        "percent": {"rate": "50% off"},
        "underscore": {"key": "a_b"},
        "number": {"n": 4217},
        "plain": {"note": "nothing special"},
    }.items():
        made[name] = (await client.insert(args, kind="probe")).id
    return made


async def _found(client: Client, text: str) -> set[int]:
    return {row.id for row in await client.list_jobs(search=text, limit=100)}


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        ('"', {"quote"}),
        ('"hi"', {"quote"}),
        ("back\\slash", {"backslash"}),
        ("\\", {"backslash"}),
        ("\t", {"tab"}),
        ("a\tb", {"tab"}),
        ("%", {"percent"}),
        ("_", {"underscore"}),
        ("4217", {"number"}),
        ("SPECIAL", {"plain"}),
        ('{"', set()),  # JSON syntax matches nothing
        ("note", set()),  # keys are not searched
    ],
)
async def test_search_matches_the_values_a_person_sees(
    client: Client, jobs: dict[str, int], text: str, expected: set[str]
) -> None:
    assert await _found(client, text) == {jobs[name] for name in expected}


@pytest.mark.parametrize("field", ["search", "kind", "queue"])
@pytest.mark.parametrize(("bad", "says"), [("a\x00b", "NUL"), ("a\ud800b", "lone surrogate")])
async def test_text_postgres_cannot_take_is_refused_clearly(
    client: Client, jobs: dict[str, int], field: str, bad: str, says: str
) -> None:
    where: dict[str, Any] = {field: bad}
    with pytest.raises(InvalidFilter, match=f"The {field} filter contains a {says}"):
        await client.list_jobs(**where)
    with pytest.raises(InvalidFilter, match=says):
        await client.browse(**where)
    with pytest.raises(InvalidFilter, match=says):
        await client.count_matching(**where)


async def test_error_text_is_searched(client: Client, jobs: dict[str, int]) -> None:
    await client.cancel_job(jobs["plain"])
    assert await _found(client, "cancelled by operator") == {jobs["plain"]}
