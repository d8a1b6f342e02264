"""Actions on many jobs: ``POST /api/jobs/bulk`` (by ids or by a filter, as the console's
marks and its act-on-the-filter) and a failure group's retry or cancel
(``/api/failure-groups``, as the console's ``G`` screen).

Each answers first with the count (``dry_run``, the default, writes nothing), then acts on
``dry_run=false``: the console's confirmation with the count, as two calls. The actions are
``Client.bulk_action``'s, so a job that no longer admits one is skipped, not an error.
"""

from __future__ import annotations

from typing import Annotated, Any

from fastapi import APIRouter, Depends, Query, Request
from starlette.responses import Response

from awa_tui.actions import JobAction, group_plan
from awa_tui.http.admin_bodies import (
    BulkBody,
    BulkOut,
    FailureGroupsOut,
    GroupBody,
    GroupMembersOut,
    model_json,
)
from awa_tui.http.auth import actor_of, writable
from awa_tui.http.bodies import ErrorOut, client_of, json_response
from awa_tui.http.paging import time_bound
from awa_tui.http.search import job_filter
from storage import MAX_SHAPES, MAX_VALUES, Client, GroupOutputs, InvalidFilter

BAD_FILTER: dict[int | str, dict[str, Any]] = {
    400: {"model": ErrorOut, "description": "A filter refused (the reason says why)."}
}
jobs = APIRouter(prefix="/api/jobs", tags=["jobs"])
groups = APIRouter(prefix="/api/failure-groups", tags=["failure groups"], responses=BAD_FILTER)


async def run_plan(
    client: Client,
    plan: list[tuple[JobAction, list[int]]],
    *,
    dry_run: bool,
    actor: str,
    reason: str | None,
) -> int:
    """The count of ``plan``'s jobs (``dry_run``), or how many its bulk actions acted on."""
    if dry_run:
        return sum(len(ids) for _action, ids in plan)
    done = 0
    for action, ids in plan:
        if ids:
            done += await client.bulk_action(action.value, ids=ids, actor=actor, reason=reason)
    return done


@jobs.post(
    "/bulk",
    response_model=BulkOut,
    responses=BAD_FILTER,
    dependencies=[Depends(writable)],
    summary="Count, then act on, the jobs of a filter or a list of ids",
)
async def bulk(body: BulkBody, request: Request) -> Response:
    client = client_of(request)
    filtered = any(
        v is not None for v in (body.state, body.kind, body.queue, body.since, body.before, body.q)
    )
    if body.ids is not None:
        if filtered:
            raise InvalidFilter("Give ids or a filter (state, kind, queue, since, before, q).")
        count = await run_plan(
            client,
            [(body.action, body.ids)],
            dry_run=body.dry_run,
            actor=actor_of(request),
            reason=body.reason,
        )
    else:
        found = job_filter(
            state=body.state,
            kind=body.kind,
            queue=body.queue,
            since=body.since,
            before=body.before,
            q=body.q,
        )
        if found.job_id is not None:
            raise InvalidFilter(f"id:{found.job_id} names one job: pass ids [{found.job_id}].")
        count = await client.bulk_action(
            body.action.value,
            found.where,
            dry_run=body.dry_run,
            actor=actor_of(request),
            reason=body.reason,
        )
    return json_response({"action": body.action.value, "dry_run": body.dry_run, "count": count})


@groups.get("", response_model=FailureGroupsOut, summary="Failures grouped by kind and error")
async def list_groups(
    request: Request,
    since: str | None = None,
    kind: str | None = None,
    queue: str | None = None,
    limit: Annotated[int, Query(ge=1, le=500)] = 50,
) -> Response:
    found = await client_of(request).failure_groups(
        time_bound("since", since), kind=kind, queue=queue, limit=limit
    )
    return json_response({"groups": [model_json(g) for g in found]})


@groups.get("/members", response_model=GroupMembersOut, summary="A group's job ids")
async def group_members(
    request: Request,
    kind: Annotated[str, Query(min_length=1, max_length=255)],
    signature: Annotated[str, Query(min_length=1, max_length=4096)],
    since: str | None = None,
    queue: str | None = None,
) -> Response:
    members = await client_of(request).failure_group_jobs(
        kind, signature, since=time_bound("since", since), queue=queue
    )
    return json_response(
        {
            "kind": kind,
            "signature": signature,
            "failed": members.failed,
            "retryable": members.retryable,
            "dead_lettered": members.dead_lettered,
        }
    )


@groups.get(
    "/outputs",
    response_model=GroupOutputs,
    summary="What a group's members kept: output shapes, a sample, a field's values",
    description="As the console's G screen shows under a group: the distinct shapes (sorted "
    "top-level keys, or the JSON type) of the outputs its members' failed attempts kept, with "
    f"counts and the newest one's sample (at most 4 KiB), at most {MAX_SHAPES} shapes listed "
    "(``other_shapes`` counts the rest). Read within the groups' own window (``window``).",
)
async def group_outputs(
    request: Request,
    kind: Annotated[str, Query(min_length=1, max_length=255)],
    signature: Annotated[str, Query(min_length=1, max_length=4096)],
    field: Annotated[
        str | None,
        Query(
            min_length=1,
            max_length=255,
            description="Split the outputs by this top-level key, one row per value (e.g. a "
            f"field the kind's output schema declares); at most {MAX_VALUES} values listed.",
        ),
    ] = None,
    since: str | None = None,
    queue: str | None = None,
) -> Response:
    found = await client_of(request).failure_group_outputs(
        kind, signature, field=field, since=time_bound("since", since), queue=queue
    )
    return json_response(model_json(found))


async def _act_on_group(request: Request, body: GroupBody, *, retry: bool) -> Response:
    client = client_of(request)
    members = await client.failure_group_jobs(
        body.kind, body.signature, since=time_bound("since", body.since), queue=body.queue
    )
    plan = group_plan(members, retry=retry)
    count = await run_plan(
        client, plan, dry_run=body.dry_run, actor=actor_of(request), reason=body.reason
    )
    action = "retry" if retry else "cancel"
    return json_response({"action": action, "dry_run": body.dry_run, "count": count})


@groups.post(
    "/retry",
    response_model=BulkOut,
    dependencies=[Depends(writable)],
    summary="Retry a group's failed and dead-lettered jobs",
)
async def retry_group(body: GroupBody, request: Request) -> Response:
    return await _act_on_group(request, body, retry=True)


@groups.post(
    "/cancel",
    response_model=BulkOut,
    dependencies=[Depends(writable)],
    summary="Cancel a group's retryable jobs",
)
async def cancel_group(body: GroupBody, request: Request) -> Response:
    return await _act_on_group(request, body, retry=False)
