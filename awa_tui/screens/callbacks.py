"""Answering a waiting job's callback from the detail screen: complete, fail, retry."""

from __future__ import annotations

from textual import work

from awa_tui.messages import JobsChanged
from awa_tui.screens.base import AwaScreen
from awa_tui.screens.confirm import Confirmed, ConfirmModal, PromptModal
from storage import JobKindDescriptor, JobRow


class CallbackFlows(AwaScreen):
    """Mixed into the detail screen, which owns ``row`` and ``descriptor``."""

    row: JobRow | None
    descriptor: JobKindDescriptor | None

    def action_complete_callback(self) -> None:
        from awa_tui.screens.complete import CompleteCallbackModal

        row = self.row
        if row is None or row.callback is None:
            return

        def closed(result: JobRow | None) -> None:
            self.post_message(JobsChanged([row.id]))

        self.app.push_screen(CompleteCallbackModal(row, self.descriptor), closed)

    def action_fail_callback(self) -> None:
        row = self.row
        if row is None or row.callback is None:
            return
        callback_id, run_lease = row.callback.callback_id, row.run_lease

        def answered(error: str | None) -> None:
            if error is not None:
                self.fail_callback(row.id, callback_id, run_lease, error)

        self.app.push_screen(
            PromptModal(
                f"Fail job {row.id}'s callback?",
                f"The job fails terminally with this error in its history (to the DLQ when "
                f"queue {row.queue} has one). Callback {callback_id}.",
                confirm_label="Fail job",
                keep_label="Keep waiting",
                placeholder="error message, e.g. payment provider rejected the card",
            ),
            answered,
        )

    def action_retry_callback(self) -> None:
        row = self.row
        if row is None or row.callback is None:
            return
        callback_id, run_lease = row.callback.callback_id, row.run_lease

        def confirmed(ok: Confirmed | None) -> None:
            if ok:
                self.retry_callback(row.id, callback_id, run_lease, ok.reason)

        self.app.push_screen(
            ConfirmModal(
                f"Retry job {row.id}?",
                f"Give the attempt back and run job {row.id} again now; callback "
                f"{callback_id} stops being accepted.",
                confirm_label="Retry job",
                keep_label="Keep waiting",
            ),
            confirmed,
        )

    @work(exclusive=True, exit_on_error=False, group="callback")
    async def fail_callback(
        self, job_id: int, callback_id: str, run_lease: int, error: str
    ) -> None:
        client = await self.awa.client()
        try:
            await client.fail_external(
                callback_id, error, run_lease=run_lease, actor=self.awa.actor
            )
            self.notify(f"Job {job_id} failed through its callback.", title="Callback failed")
        finally:
            self.awa.broadcast_changed([job_id])

    @work(exclusive=True, exit_on_error=False, group="callback")
    async def retry_callback(
        self, job_id: int, callback_id: str, run_lease: int, reason: str | None = None
    ) -> None:
        client = await self.awa.client()
        try:
            await client.retry_external(
                callback_id, run_lease=run_lease, actor=self.awa.actor, reason=reason
            )
            self.notify(f"Job {job_id} is available to run again.", title="Callback retried")
        finally:
            self.awa.broadcast_changed([job_id])
