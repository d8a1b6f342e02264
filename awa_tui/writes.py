"""The console's job writes: one confirmation, then one call per job or one bulk call.

Every screen that retries, cancels, deletes or purges jobs (the browser, the detail, the DLQ)
asks through ``confirm_job_action``, the enqueue form on Kinds through ``confirm_enqueue``,
and every write runs in the app's ``write`` worker group
(``AwaApp.run_job_action``, ``AwaApp.run_bulk_matching``), so a write outlives the screen
that asked for it and every screen hears that the jobs changed.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from datetime import datetime
from typing import TYPE_CHECKING, Any

import orjson

from awa_tui.actions import ACTIONS, JobAction, confirm_labels
from awa_tui.present import plural
from awa_tui.query import JobQuery
from awa_tui.screens.confirm import Confirmed, ConfirmModal, PromptModal
from storage import JobRow

if TYPE_CHECKING:
    from awa_tui.app import AwaApp


def confirm_job_action(
    app: AwaApp,
    action: JobAction,
    ids: list[int],
    question: str,
    body: str,
    *,
    confirmed: Callable[[], None] | None = None,
) -> None:
    """Ask ``question`` (with ``body`` below it); on yes, run ``action`` on ``ids``."""
    confirm_label, keep_label = confirm_labels(action, len(ids))

    def done(yes: Confirmed | None) -> None:
        if yes:
            if confirmed is not None:
                confirmed()
            app.run_job_action(action, ids, yes.reason)

    app.push_screen(
        ConfirmModal(
            question,
            body,
            confirm_label=confirm_label,
            keep_label=keep_label,
            danger=ACTIONS[action].danger,
        ),
        done,
    )


async def act_on_jobs(
    app: AwaApp, action: JobAction, job_ids: list[int], reason: str | None = None
) -> None:
    """One job through its own call, several through ``bulk_action``; audited as the
    console's actor with the reason typed in the confirmation."""
    if app.refuse_write():
        return
    client = await app.client()
    info, who = ACTIONS[action], {"actor": app.actor, "reason": reason}
    try:
        if len(job_ids) == 1:
            (job_id,) = job_ids
            match action:
                case JobAction.RETRY:
                    await client.retry_job(job_id, **who)
                case JobAction.CANCEL:
                    await client.cancel_job(job_id, **who)
                case JobAction.DELETE:
                    await client.delete_job(job_id, **who)
                case JobAction.RETRY_DLQ:
                    await client.retry_dlq(job_id, **who)
                case JobAction.PURGE_DLQ:
                    await client.purge_dlq(job_id, **who)
            app.notify(f"Job {job_id} {info.verb}.", title=info.label)
        else:
            count = await client.bulk_action(
                action.value, ids=job_ids, actor=app.actor, reason=reason
            )
            done = f"{count:,} of {plural(len(job_ids), 'marked job')} {info.verb}."
            app.notify(done, title=info.label)
    finally:
        app.broadcast_changed(job_ids)


async def act_on_matching(app: AwaApp, action: JobAction, query: JobQuery) -> None:
    """Count what the filter matches, confirm with that count, then act on all of it."""
    if app.refuse_write():
        return
    client, info, where = await app.client(), ACTIONS[action], query.where(app.now())
    if query.job_id is not None:
        ids: list[int] | None = [query.job_id]
        count = 1 if await client.get_job(query.job_id) is not None else 0
    else:
        ids = None
        count = await client.count_matching(where)
    if count == 0:
        app.notify(f"No {query.describe()} to act on.", title=info.label, severity="warning")
        return
    confirmed = await app.push_screen_wait(
        ConfirmModal(
            f"{info.label} {query.describe(count)}?",
            "Counted just now. Jobs that no longer match when the action runs are skipped.",
            confirm_label=confirm_labels(action, count)[0],
            keep_label=info.keep,
            danger=info.danger,
        )
    )
    if not confirmed:
        return
    try:
        done = await client.bulk_action(
            action.value, where, ids=ids, actor=app.actor, reason=confirmed.reason
        )
        app.notify(f"{query.describe(done)} {info.verb}.", title=info.label)
    finally:
        app.broadcast_changed([])


def edit_and_retry(app: AwaApp, row: JobRow) -> None:
    """Retry ``row`` with args typed as JSON (an edit-and-retry): the engine checks them as an
    insert would, and the audit entry keeps the original args."""

    def typed(text: str | None) -> None:
        if text is None:
            return
        try:
            args = orjson.loads(text)
        except orjson.JSONDecodeError as exc:  # the message names a position, not the text
            app.notify(f"The args are not JSON: {exc}.", title="Edit & retry", severity="warning")
            return

        def done(yes: Confirmed | None) -> None:
            if yes:
                app.run_worker(
                    retry_edited(app, row.id, args, yes.reason),
                    group="write",
                    exclusive=True,
                    exit_on_error=False,
                )

        app.push_screen(
            ConfirmModal(
                f"Retry job {row.id} with the new args?",
                f"{row.kind} runs again from attempt 0 with the args you typed; the audit trail "
                "keeps the original ones.",
                confirm_label="Retry with new args",
                keep_label="Keep",
            ),
            done,
        )

    app.push_screen(
        PromptModal(
            f"Edit job {row.id}'s args",
            "The args as JSON; the job is retried with them after you confirm.",
            confirm_label="Next",
            keep_label="Back",
            value=orjson.dumps(row.args).decode(),
        ),
        typed,
    )


async def retry_edited(app: AwaApp, job_id: int, args: Any, reason: str | None) -> None:
    if app.refuse_write():
        return
    client = await app.client()
    try:
        await client.retry_job(job_id, args=args, actor=app.actor, reason=reason)
        app.notify(f"Job {job_id} retried with new args.", title="Edit & retry")
    finally:
        app.broadcast_changed([job_id])


@dataclass(frozen=True)
class NewJob:
    """What the enqueue form asks for: one job of ``kind`` (its args checked as typed)."""

    kind: str
    args: Any
    size: int
    queue: str
    priority: int
    run_at: datetime | None


def confirm_enqueue(app: AwaApp, job: NewJob, enqueued: Callable[[JobRow], None]) -> None:
    """Ask, then enqueue ``job`` in the app's ``write`` group (audited as the console's actor
    with the reason typed here); ``enqueued`` gets the new job once it committed."""
    when = "now" if job.run_at is None else f"at {job.run_at.isoformat(timespec='seconds')}"

    def done(yes: Confirmed | None) -> None:
        if yes:
            app.run_worker(
                enqueue_new(app, job, yes.reason, enqueued),
                group="write",
                exclusive=True,
                exit_on_error=False,
            )

    app.push_screen(
        ConfirmModal(
            f"Enqueue a {job.kind} job?",
            f"One job with {job.size:,} bytes of args on queue {job.queue}, priority "
            f"{job.priority}, to run {when}. The audit trail keeps the args' size and hash, "
            "not the args.",
            confirm_label="Enqueue job",
            keep_label="Back to the form",
        ),
        done,
    )


async def enqueue_new(
    app: AwaApp, job: NewJob, reason: str | None, enqueued: Callable[[JobRow], None]
) -> None:
    if app.refuse_write():
        return
    client = await app.client()
    try:
        row = await client.enqueue_job(
            job.kind,
            job.args,
            queue=job.queue,
            priority=job.priority,
            run_at=job.run_at,
            actor=app.actor,
            reason=reason,
        )
    finally:
        app.broadcast_changed([])
    app.notify(f"Job {row.id} enqueued on queue {row.queue}.", title="Enqueue")
    enqueued(row)
