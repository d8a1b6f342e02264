"""Every write the console offers has its HTTP twin in ``/openapi.json``: each screen's
``WRITE_ACTIONS`` (the browser's retry, cancel, delete and act-on-the-filter, the detail's job
and callback writes, the DLQ's, the queues' pause and resume, the failure groups' retry and
cancel, the schedules' trigger, the kinds' enqueue) and every ``JobAction``. A new console
write without a row here fails, and so does a row whose route is gone; the guard of each route
is the same ``Client`` call the console makes, checked route by route in ``test_admin``,
``test_jobs`` and ``test_callbacks``."""

from __future__ import annotations

from awa_tui.actions import JobAction
from awa_tui.http.app import create_app
from storage import Client
from tests.tui.test_screens_register import all_screens

Route = tuple[str, str]
JOB_ACTIONS: dict[JobAction, list[Route]] = {
    JobAction.RETRY: [("POST", "/api/jobs/{job_id}/retry")],
    JobAction.CANCEL: [("POST", "/api/jobs/{job_id}/cancel")],
    JobAction.DELETE: [("DELETE", "/api/jobs/{job_id}")],
    JobAction.RETRY_DLQ: [("POST", "/api/dlq/{job_id}/retry")],
    JobAction.PURGE_DLQ: [("POST", "/api/dlq/{job_id}/purge")],
}
BULK: Route = ("POST", "/api/jobs/bulk")
"""Marked jobs and the act-on-the-filter: by ids or by filter, any ``JobAction``."""
SCREEN_ACTIONS: dict[tuple[str, str], list[Route]] = {
    ("JobsScreen", "retry"): [*JOB_ACTIONS[JobAction.RETRY], BULK],
    ("JobsScreen", "cancel"): [*JOB_ACTIONS[JobAction.CANCEL], BULK],
    ("JobsScreen", "delete"): [*JOB_ACTIONS[JobAction.DELETE], BULK],
    ("JobsScreen", "retry_job"): JOB_ACTIONS[JobAction.RETRY],
    ("JobsScreen", "cancel_job"): JOB_ACTIONS[JobAction.CANCEL],
    ("JobsScreen", "delete_job"): JOB_ACTIONS[JobAction.DELETE],
    ("JobsScreen", "bulk_matching"): [BULK],
    ("JobDetailScreen", "retry"): JOB_ACTIONS[JobAction.RETRY],
    ("JobDetailScreen", "cancel"): JOB_ACTIONS[JobAction.CANCEL],
    ("JobDetailScreen", "delete"): JOB_ACTIONS[JobAction.DELETE],
    ("JobDetailScreen", "purge"): JOB_ACTIONS[JobAction.PURGE_DLQ],
    ("JobDetailScreen", "edit_retry"): JOB_ACTIONS[JobAction.RETRY],  # with args in the body
    ("JobDetailScreen", "complete_callback"): [("POST", "/api/callbacks/{callback_id}/complete")],
    ("JobDetailScreen", "fail_callback"): [("POST", "/api/callbacks/{callback_id}/fail")],
    ("JobDetailScreen", "retry_callback"): [("POST", "/api/callbacks/{callback_id}/retry")],
    ("DlqScreen", "retry"): [*JOB_ACTIONS[JobAction.RETRY_DLQ], BULK],
    ("DlqScreen", "purge"): [*JOB_ACTIONS[JobAction.PURGE_DLQ], BULK],
    ("DlqScreen", "bulk_retry"): [BULK],
    ("DlqScreen", "bulk_purge"): [BULK],
    ("QueuesScreen", "toggle_pause"): [
        ("POST", "/api/queues/{queue}/pause"),
        ("POST", "/api/queues/{queue}/resume"),
    ],
    ("FailureGroupsScreen", "retry_group"): [("POST", "/api/failure-groups/retry")],
    ("FailureGroupsScreen", "cancel_group"): [("POST", "/api/failure-groups/cancel")],
    ("SchedulesScreen", "trigger"): [("POST", "/api/schedules/{name}/trigger")],
    ("KindsScreen", "enqueue"): [("POST", "/api/jobs")],
}


def _routes(client: Client) -> set[Route]:
    spec = create_app(client, token="t").openapi()
    return {(method.upper(), path) for path, ops in spec["paths"].items() for method in ops}


def test_every_console_write_is_in_the_table() -> None:
    offered = {(s.__name__, action) for s in all_screens() for action in s.WRITE_ACTIONS}
    assert offered == set(SCREEN_ACTIONS), "a console write without its HTTP route here"
    assert set(JobAction) == set(JOB_ACTIONS)


async def test_every_console_write_has_its_route_in_openapi(server_client: Client) -> None:
    routes = _routes(server_client)
    for write, twins in [*SCREEN_ACTIONS.items(), *JOB_ACTIONS.items()]:
        missing = [route for route in twins if route not in routes]
        assert missing == [], f"{write} has no HTTP twin at {missing}"


async def test_the_bulk_route_takes_every_job_action(server_client: Client) -> None:
    spec = create_app(server_client, token="t").openapi()
    action = spec["components"]["schemas"]["JobAction"]
    assert set(action["enum"]) == {a.value for a in JobAction}
