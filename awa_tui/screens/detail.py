"""One job: summary, output (typed, sized, checked), last error, args, metadata, progress."""

from __future__ import annotations

from dataclasses import replace
from datetime import datetime
from typing import ClassVar

from rich.text import Text
from textual import work
from textual.app import ComposeResult
from textual.binding import Binding, BindingType
from textual.containers import VerticalScroll
from textual.widgets import Footer, Label, Static
from textual.worker import Worker, WorkerState

from awa_tui.actions import ACTIONS, JobAction, callback_why_not, why_not
from awa_tui.messages import JobLoaded, JobsChanged
from awa_tui.present import state_label
from awa_tui.resilience import is_connection_error
from awa_tui.screens.audit import JOB_ENTRIES, job_entries
from awa_tui.screens.base import AwaScreen
from awa_tui.screens.callbacks import CallbackFlows
from awa_tui.timefmt import relative
from awa_tui.widgets.app_header import AppHeader
from awa_tui.widgets.job_summary import summary_table
from awa_tui.widgets.json_view import JsonView
from awa_tui.widgets.last_good import LastGoodPanel
from awa_tui.widgets.mode_banner import ModeBanner
from awa_tui.widgets.output_compare import OutputCompare
from awa_tui.widgets.output_panel import OutputPanel, why_absent
from awa_tui.writes import confirm_job_action, edit_and_retry
from storage import JobAccount, JobKindDescriptor, JobRow, JobState

JOB_WRITES = frozenset({"retry", "edit_retry", "cancel", "delete", "purge"})
CALLBACK_WRITES = frozenset({"complete_callback", "fail_callback", "retry_callback"})


def same_facts(a: JobAccount | None, b: JobAccount | None) -> bool:
    """The same facts, whenever they were read (``read_at`` differs on every read)."""
    if a is None or b is None:
        return a is b
    return replace(a.facts, read_at=b.facts.read_at) == b.facts


class JobDetailScreen(CallbackFlows, AwaScreen):
    """Everything about one job. ``e`` opens its error history, ``C`` completes its callback."""

    TITLE = "Job detail"
    HELP = (
        "One job as it is now (refreshed live): its state, output checked against the kind's "
        "schema, which attempt wrote it and when it is pruned (or the one reason there is "
        "none), last error, args, metadata and progress. A completed job whose failed attempt "
        "kept an output shows both: d toggles them stacked and their diff. e opens every "
        "attempt's error, t the attempt timeline; C completes a job waiting for a callback."
    )
    READ_GROUP = "job"
    WRITE_ACTIONS = JOB_WRITES | CALLBACK_WRITES

    BINDINGS: ClassVar[list[BindingType]] = [
        Binding("escape", "back", "Back", id="detail.back"),
        Binding("r", "refresh", "Refresh", id="detail.refresh"),
        Binding("e", "errors", "Errors", id="detail.errors"),
        Binding("t", "timeline", "Timeline", id="detail.timeline"),
        Binding("p", "pretty", "Pretty/exact", show=False, id="detail.pretty"),
        Binding("d", "compare", "Diff/stacked", id="detail.compare"),
        Binding("s", "schema", "Schema", id="detail.schema"),
        Binding("y", "copy", "Copy", id="detail.copy"),
        Binding("ctrl+s", "save", "Save JSON", show=False, id="detail.save"),
        Binding("C", "complete_callback", "Complete", id="detail.complete"),
        Binding("F", "fail_callback", "Fail callback", show=False, id="detail.fail_callback"),
        Binding("T", "retry_callback", "Retry callback", show=False, id="detail.retry_callback"),
        Binding("R", "retry", "Retry", id="detail.retry"),
        Binding("E", "edit_retry", "Edit & retry", show=False, id="detail.edit_retry"),
        Binding("X", "cancel", "Cancel", id="detail.cancel"),
        Binding("D", "delete", "Delete", id="detail.delete"),
        Binding("P", "purge", "Purge", id="detail.purge"),
        Binding("j", "scroll_down", "Down", show=False, id="detail.down"),
        Binding("k", "scroll_up", "Up", show=False, id="detail.up"),
    ]

    def __init__(self, job_id: int) -> None:
        super().__init__()
        self.job_id = job_id
        self.row: JobRow | None = None
        self.descriptor: JobKindDescriptor | None = None
        self.account: JobAccount | None = None
        self.loaded = False
        self.reload_on_resume = False
        self.pending_action: str | None = None
        """A key typed before the job loaded (``⏎e``): run once it has, or refused then."""

    def compose(self) -> ComposeResult:
        yield AppHeader(icon="≡")
        yield ModeBanner()
        with VerticalScroll(id="detail"):
            yield Static(f"Loading job {self.job_id}…", id="summary")
            yield Static("", id="actions-line")
            yield OutputPanel(id="output")
            yield OutputCompare(id="compare")
            yield LastGoodPanel(id="last-good")
            yield Label("Last error", classes="section-title", id="error-title")
            yield Static("", id="last-error")
            yield Label("Args", classes="section-title")
            yield JsonView(id="args")
            yield Label("Metadata", classes="section-title")
            yield JsonView(id="metadata")
            yield Label("Progress", classes="section-title")
            yield JsonView(id="progress", empty="(no progress recorded)")
            yield Label("Actions taken", classes="section-title")
            yield Static("", id="job-audit")
        yield Footer(compact=True, show_command_palette=False)

    def on_mount(self) -> None:
        super().on_mount()
        self.query_one("#detail").focus()
        self.load()
        refresh = self.awa.settings.refresh
        if refresh > 0:  # live like the browser: a job that moves on is shown as it is now
            self.set_interval(refresh, self._tick)
        self.watch(self.app, "tick", self._clock_ticked, init=False)

    def _clock_ticked(self) -> None:
        """Relative times ("15s ago") follow the app's clock, even while the job is unchanged."""
        row = self.row
        if row is None or not self.is_current:
            return
        self.query_one("#summary", Static).update(
            summary_table(row, self.descriptor, self.awa.now())
        )
        self._render_error(row)

    def _tick(self) -> None:
        if self.is_active:
            self.load()

    @work(exclusive=True, exit_on_error=False, group=READ_GROUP)
    async def load(self) -> None:
        client = await self.awa.client()
        # The job's actions come from the job's snapshot: each one that led to the state shown
        # is listed, and none that came after it.
        account = await client.explain_job(self.job_id, actions=JOB_ENTRIES)
        row = account.row
        descriptor = await client.get_descriptor(row.kind) if row is not None else self.descriptor
        self.post_message(JobLoaded(self.job_id, row, descriptor, account))

    def on_job_loaded(self, message: JobLoaded) -> None:
        if message.job_id != self.job_id:
            return
        if message.account is not None:  # every load: its relative times move on
            self.query_one("#job-audit", Static).update(
                job_entries(message.account.actions, self.awa.now())
            )
        same = (message.row, message.descriptor) == (self.row, self.descriptor)
        if self.loaded and same and same_facts(message.account, self.account):
            return  # unchanged: nothing to redraw
        self.loaded = True
        self.row = message.row
        self.descriptor = message.descriptor
        self.account = message.account
        self.render_job()
        self.refresh_bindings()
        if self.pending_action is not None:
            action, self.pending_action = self.pending_action, None
            self.call_later(self.app.run_action, action, self)

    def on_worker_state_changed(self, event: Worker.StateChanged) -> None:
        """A failed load says so where "Loading job…" was; the app reports the error itself."""
        if event.worker.group != self.READ_GROUP or event.state is not WorkerState.ERROR:
            return
        error = event.worker.error
        self.pending_action = None  # the screen says why; a key typed then is not run later
        if self.loaded:
            return  # what is shown stays, marked stale by the banner while the connection is lost
        if error is not None and is_connection_error(error):
            text = (
                f"Could not load job {self.job_id}: the connection to PostgreSQL is lost. "
                "Retrying; it loads by itself when the connection is back."
            )
        else:
            text = f"Could not load job {self.job_id}. Press r to try again."
        self.query_one("#summary", Static).update(Text(text, style="bold red"))

    def stale_changed(self, stale: bool) -> None:
        self.query_one("#detail").set_class(stale, "-stale")

    def on_jobs_changed(self, message: JobsChanged) -> None:
        if not message.job_ids or self.job_id in message.job_ids:
            if self.is_active:
                self.load()
            else:  # under a dialog (still "current" to Textual): reload when it closes
                self.reload_on_resume = True

    def on_screen_resume(self) -> None:
        if self.reload_on_resume:
            self.reload_on_resume = False
            self.load()

    def render_job(self) -> None:
        row, now = self.row, self.awa.now()
        summary = self.query_one("#summary", Static)
        output = self.query_one("#output", OutputPanel)
        account = self.account
        absence = why_absent(account, now) if account is not None else None
        if row is None:
            summary.update(Text(f"Job {self.job_id} does not exist.", style="bold"))
            output.show(None, None, absence=absence)
            self.query_one(OutputCompare).show_pair(None, ("", None), None)
            self.query_one("#actions-line", Static).update("")
            return
        summary.update(summary_table(row, self.descriptor, now))
        self.query_one("#actions-line", Static).update(self.actions_text(row))
        self._render_outputs(row, output, absence, now)
        self._show_last_good(row)
        self._render_error(row)
        self.query_one("#args", JsonView).show_value(row.args)
        self.query_one("#metadata", JsonView).show_value(row.metadata)
        self.query_one("#progress", JsonView).show_value(row.progress)

    def _render_outputs(
        self, row: JobRow, output: OutputPanel, absence: str | None, now: datetime
    ) -> None:
        """The completed output with its provenance; beside it, the kept failed one."""
        account = self.account
        origin = account.provenance(now) if account is not None else None
        kept = account.kept_output() if account is not None else None
        kept_origin = account.kept_provenance(now) if account is not None else None
        note = None
        compared = None
        if kept is not None and row.output_text is not None:
            note = f"A failed attempt's output is also kept in error entry #{kept[0] + 1}: d diff."
            title = f"Kept by entry #{kept[0] + 1}"
            origin_text = None if kept_origin is None else kept_origin.text(now)
            compared = (title, kept[1], origin_text)
        output.show(
            row.output_text,
            self.descriptor,
            absence=absence,
            note=note,
            provenance=None if origin is None else origin.text(now),
        )
        after = ("the completed output", row.output)
        self.query_one(OutputCompare).show_pair(compared, after, self.descriptor)

    def _show_last_good(self, row: JobRow) -> None:
        """A failed attempt's kept output beside the last good output of its kind and queue,
        for a job that did not complete (a completed one's kept output is in the compare)."""
        panel, account = self.query_one(LastGoodPanel), self.account
        kept = account.kept_output() if account is not None else None
        if kept is None or row.output_text is not None:
            panel.hide()
            return
        position, value = kept
        label = f"Kept by the failed attempt of error entry #{position + 1}"
        panel.follow(
            self.awa.client, row.kind, row.queue, self.awa.now(), kept=value, kept_label=label
        )

    def _render_error(self, row: JobRow) -> None:
        box = self.query_one("#last-error", Static)
        if not row.errors:
            box.update(Text("No errors recorded.", style="dim"))
            return
        entry = row.errors[-1]
        head = Text(f"#{len(row.errors)} attempt {entry.get('attempt', '?')}", style="bold")
        from awa_tui.timefmt import parse_timestamp

        head.append(f"  {relative(parse_timestamp(entry.get('at')), self.awa.now())}")
        if entry.get("terminal"):
            head.append("  terminal", style="bold red")
        head.append(f"  ({len(row.errors)} in history: e)", style="dim")
        body = Text(str(entry.get("error", "")), style="red")
        box.update(Text.assemble(head, "\n", body))

    def actions_text(self, row: JobRow) -> Text:
        """Each write with its key, or why it does not apply (the footer only dims it)."""
        text = Text()
        if not self.awa.writable:
            return Text(self.awa.read_only_reason or "", style="dim")
        entries: list[tuple[str, str, str | None]] = [
            ("C", "complete/F fail/T retry callback", callback_why_not(row)),
            ("R", "retry", why_not(self._action_for("retry"), row)),
            ("X", "cancel", why_not(JobAction.CANCEL, row)),
            ("D", "delete", why_not(JobAction.DELETE, row)),
        ]
        if row.dlq is not None:
            entries.append(("P", "purge from DLQ", why_not(JobAction.PURGE_DLQ, row)))
        available = [f"{key} {label}" for key, label, reason in entries if reason is None]
        text.append("Actions: ", style="bold")
        text.append(" · ".join(available) if available else "none apply to this state")
        return text

    # -- bindings -----------------------------------------------------------------------------
    def hides(self, action: str) -> bool:
        """A write this job's state rules out leaves the footer (its key still says why when
        pressed); one that applies in a moment stays dimmed: a callback not parked yet, a job
        not loaded yet (purge only exists for dead-lettered jobs)."""
        row = self.row
        if row is None:
            return action == "purge" or super().hides(action)
        parking = row.state is JobState.RUNNING and row.callback is not None
        if action in JOB_WRITES or (action in CALLBACK_WRITES and not parking):
            return True
        return super().hides(action)

    def binding_reason(self, action: str) -> str | None:
        row = self.row
        if action in ("back", "refresh"):
            return None
        if row is None:
            return "The job is not loaded." if not self.loaded else f"Job {self.job_id} is gone."
        match action:
            case "errors":
                return None if row.errors else f"Job {row.id} has no errors recorded."
            case "compare":
                if not self.query_one(OutputCompare).display:
                    return (
                        f"Job {row.id} has no completed output beside a failed attempt's kept one."
                    )
                return None
            case "pretty":
                if row.output_text is None:
                    return f"Job {row.id} has no output to reformat."
                return None
            case "schema":
                if self.descriptor is None or self.descriptor.output_schema is None:
                    return f"Kind {row.kind} declares no output schema."
                return None
            case "retry" | "cancel" | "delete" | "purge":
                return why_not(self._action_for(action), row)
            case "edit_retry":
                return why_not(self._action_for("retry"), row)
            case "complete_callback" | "fail_callback" | "retry_callback":
                return callback_why_not(row)
        return None

    def typed_ahead(self, action: str) -> bool:
        if self.loaded:
            return False
        self.pending_action = action  # the latest key typed meanwhile
        return True

    def _action_for(self, name: str) -> JobAction:
        dlq = self.row is not None and self.row.dlq is not None
        return {
            "retry": JobAction.RETRY_DLQ if dlq else JobAction.RETRY,
            "cancel": JobAction.CANCEL,
            "delete": JobAction.PURGE_DLQ if dlq else JobAction.DELETE,
            "purge": JobAction.PURGE_DLQ,
        }[name]

    # -- actions ------------------------------------------------------------------------------
    def action_back(self) -> None:
        self.dismiss()

    def action_refresh(self) -> None:
        self.load()

    def action_errors(self) -> None:
        from awa_tui.screens.error_history import ErrorHistoryScreen

        if self.row is not None:
            self.app.push_screen(ErrorHistoryScreen(self.row, self.descriptor, self.account))

    def action_timeline(self) -> None:
        from awa_tui.screens.timeline import TimelineScreen

        if self.row is not None:
            self.app.push_screen(TimelineScreen(self.row))

    def action_compare(self) -> None:
        self.query_one(OutputCompare).toggle()

    def action_pretty(self) -> None:
        panel = self.query_one("#output", OutputPanel)
        panel.pretty = not panel.pretty

    def action_schema(self) -> None:
        from awa_tui.screens.schema import SchemaScreen

        if self.row is not None and self.descriptor is not None:
            self.app.push_screen(SchemaScreen(self.row.kind, self.descriptor))

    def action_copy(self) -> None:
        row = self.row
        if row is None:
            return
        if row.output_text is not None:
            self.awa.copy_text(row.output_text, f"job {row.id}'s output")
        else:
            self.awa.copy_text(str(row.id), f"job id {row.id} (it has no output)")

    def action_save(self) -> None:
        if self.row is not None:
            self.awa.save_job(self.row)

    def action_retry(self) -> None:
        self._confirm(self._action_for("retry"))

    def action_edit_retry(self) -> None:
        if self.row is not None:
            edit_and_retry(self.awa, self.row)

    def action_cancel(self) -> None:
        self._confirm(JobAction.CANCEL)

    def action_delete(self) -> None:
        self._confirm(self._action_for("delete"))

    def action_purge(self) -> None:
        self._confirm(JobAction.PURGE_DLQ)

    def _confirm(self, action: JobAction) -> None:
        row = self.row
        if row is None:
            return
        info = ACTIONS[action]
        confirm_job_action(
            self.awa,
            action,
            [row.id],
            f"{info.label} job {row.id}?",
            f"{row.kind}, {state_label(row)}, attempt {row.attempt} of {row.max_attempts}. "
            f"Jobs that are not {info.allowed} are refused.",
        )
