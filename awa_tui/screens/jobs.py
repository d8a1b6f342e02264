"""The job browser: state tabs with counts, a filter, newest-first keyset pages, live refresh."""

from __future__ import annotations

from dataclasses import replace
from typing import ClassVar

from textual import on, work
from textual.app import ComposeResult
from textual.binding import BindingType
from textual.reactive import reactive
from textual.timer import Timer
from textual.widgets import DataTable, Footer, Input, Static

from awa_tui.actions import ACTIONS, JobAction, why_not
from awa_tui.messages import ClientConnected, CountsLoaded, JobsChanged, JobsLoaded
from awa_tui.present import plural, state_label
from awa_tui.query import TAB_KEYS, TAB_LABELS, FilterSyntaxError, JobQuery, tab_of
from awa_tui.resilience import clock_time
from awa_tui.screens.base import AwaScreen
from awa_tui.screens.jobs_keys import BINDINGS, DRILLED_ONLY, JOB_KEYS, PLAIN_ONLY, WRITE_ACTIONS
from awa_tui.screens.jobs_status import BrowserStatus, fitted, next_sort
from awa_tui.screens.pickers import BulkActionModal
from awa_tui.widgets.app_header import AppHeader
from awa_tui.widgets.filter_bar import FilterBar
from awa_tui.widgets.job_table import JobTable
from awa_tui.widgets.mode_banner import ModeBanner
from awa_tui.widgets.state_tabs import StateTabs
from awa_tui.writes import confirm_job_action
from storage import JobRow, SortOrder

PAGE_SIZE = 50
MAX_REFRESH_ROWS = 1000
INTERVALS = (1.0, 2.0, 5.0, 10.0, 30.0, 60.0)


def refresh_limit(loaded: int) -> int:
    """How many rows a live refresh reads: the whole pages on screen (``n`` adds one), at least
    one, at most ``MAX_REFRESH_ROWS``. Not the rows on screen plus a page, kept down to the
    last one: each refresh then also kept every job that had arrived since, so a browser left
    open on the demo grew by ~30 rows a minute until it held 1,000 (its memory and every
    refresh's rebuild of the table with it). Arrivals now push the oldest rows out."""
    pages = max(1, -(-loaded // PAGE_SIZE))
    return min(pages * PAGE_SIZE, MAX_REFRESH_ROWS)


class JobsScreen(AwaScreen):
    """Which jobs failed, which are stuck, what just happened. Enter opens a job."""

    TITLE = "Job browser"
    HELP = (
        "Every job by state tab, newest first, refreshed live. Enter opens a job; space marks "
        "jobs for R, X and D; A acts on everything the filter matches.\n"
        "Filter (/): kind:NAME queue:NAME id:42 since:1h before:2026-11-30T10:00 "
        "sort:-when (id, when, attempts; - for descending) and free text (quotes group "
        "words). id:N shows job N on its own state's tab. s cycles the sort, o reverses it.\n"
        "Outputs: out:TEXT (any value in the output) and out.PATH=VALUE (out.status=partial, "
        "out.summary.rows=0, out.items.0.id=x): completed jobs by their output, others by the "
        "output their failed attempt kept; without since: the last hour is searched."
    )
    READ_GROUP = "jobs"
    WRITE_ACTIONS = WRITE_ACTIONS
    AUTO_FOCUS = "#jobs"
    """The rows, not the filter (the first focusable widget): a browser pushed over another
    screen (a drill-down) must not take the keys typed next as filter text."""

    BINDINGS: ClassVar[list[BindingType]] = BINDINGS

    query_state: reactive[JobQuery] = reactive(JobQuery, init=False)
    paused: reactive[bool] = reactive(False)
    interval: reactive[float] = reactive(2.0)

    def __init__(self, query: JobQuery | None = None, *, origin: str | None = None) -> None:
        super().__init__()
        self.origin = origin
        """The title of the screen this browser was opened from (a drill-down), esc's way
        back; None for the console's own browser, at the bottom."""
        self.set_reactive(JobsScreen.query_state, query or JobQuery())
        self.marks: set[int] = set()
        self.has_more = False
        self.dlq_matches = 0
        self.note: str | None = None
        """Why the last filter was refused or the sort changed by itself; shown first."""
        # Not ``loading``: that is Textual's own reactive, which swaps the screen for a spinner.
        self.fetching = False
        self.elsewhere: str | None = None
        """Where an ``id:`` lookup's job is when this tab does not list it."""
        self.follow_id = False
        """An ``id:`` filter was just applied: its first answer switches to the job's tab."""
        self._timer: Timer | None = None
        self.shown_query: JobQuery | None = None
        """The query of the page on screen; another one in ``query_state`` is still loading."""
        self.pending_open = False
        """Enter came while this query's page was loading (``7⏎`` typed at once): the page,
        when it comes, opens its first job, as it would had the person waited for it."""

    def compose(self) -> ComposeResult:
        yield AppHeader(icon="≡")
        yield ModeBanner()
        yield StateTabs(self.query_state.tab, id="tabs")
        yield FilterBar(self.query_state.filter_text, id="filter")
        yield JobTable(id="jobs")
        yield Static("", id="status")
        yield Footer(compact=True, show_command_palette=False)

    def on_mount(self) -> None:
        super().on_mount()
        refresh = self.awa.settings.refresh
        self.set_reactive(JobsScreen.paused, refresh <= 0)
        self.set_reactive(JobsScreen.interval, refresh if refresh > 0 else 2.0)
        self._restart_timer()
        self.table.focus()
        self.reload()

    @property
    def table(self) -> JobTable:
        return self.query_one(JobTable)

    # -- loading ------------------------------------------------------------------------------
    def reload(self, *, refreshed: bool = False) -> None:
        self.load_jobs(self.query_state, append=False, refreshed=refreshed)

    def watch_query_state(self, old: JobQuery, new: JobQuery) -> None:
        self.query_one(StateTabs).active = new.tab
        bar = self.query_one(FilterBar)
        if bar.value != new.filter_text and not bar.has_focus:
            bar.value = new.filter_text
        self.table.mark_sort(new.sort)
        self.table.show_heartbeats(new.tab == "running")
        if old != new:
            self.marks.clear()
            self.table.jobs = []
            self.table.clear()
        self.load_jobs(new, append=False, refreshed=False)

    @work(exclusive=True, exit_on_error=False, group=READ_GROUP)
    async def load_jobs(self, query: JobQuery, *, append: bool, refreshed: bool) -> None:
        client = await self.awa.client()
        self.fetching = True
        try:
            if query.job_id is not None:
                row = await client.get_job(query.job_id)
                rows = [row] if row is not None and query.matches(row) else []
                self.post_message(CountsLoaded(await client.counts()))
                self.post_message(
                    JobsLoaded(query, rows, append, refreshed, has_more=False, found=row)
                )
                return
            loaded = self.table.jobs if query == self.query_state else []
            where = query.where(self.awa.now())
            if append and loaded:
                page = await client.browse(
                    where, sort=query.sort, after=loaded[-1], limit=PAGE_SIZE
                )
                rows = page.rows
                self.post_message(CountsLoaded(page.counts))
                self.post_message(JobsLoaded(query, rows, True, False, len(rows) == PAGE_SIZE))
                return
            limit = refresh_limit(len(loaded)) if refreshed else PAGE_SIZE
            page = await client.browse(where, sort=query.sort, limit=limit)
            rows = page.rows
            dlq_matches = 0
            if query.tab == "all" and query.has_filter:
                dlq_matches = await client.count_matching(replace(where, dlq=True))
            self.post_message(CountsLoaded(page.counts))
            has_more = len(rows) == limit
            self.post_message(JobsLoaded(query, rows, False, refreshed, has_more, dlq_matches))
        finally:
            self.fetching = False

    def _to_own_tab(self, message: JobsLoaded) -> bool:
        """``id:N`` just typed: switch to job N's own tab (and say so) unless it is showing;
        True when switched (the rows of the new tab follow)."""
        self.follow_id = False
        query, job = message.query, message.found
        if job is None or job.id != query.job_id or tab_of(job) == query.tab:
            return False
        moved = query.with_tab(tab_of(job))
        if not moved.matches(job):  # another kind or queue: no tab shows it
            return False
        label = TAB_LABELS[moved.tab]
        self.show_query(moved)
        self.note = f"Job {job.id} is {state_label(job)}: shown on its tab, {label}"
        self.update_status()
        return True

    def on_counts_loaded(self, message: CountsLoaded) -> None:
        self.query_one(StateTabs).counts = message.counts

    def on_jobs_loaded(self, message: JobsLoaded) -> None:
        if message.query != self.query_state:
            return  # the person moved on; a late page for an old view is dropped
        if self.follow_id and self._to_own_tab(message):
            return
        self.elsewhere = None
        job = message.found
        if (
            job is not None
            and not message.rows
            and message.query.with_tab(tab_of(job)).matches(job)
        ):
            tab = tab_of(job)
            self.elsewhere = (
                f"job {job.id} is {state_label(job)}: on the {TAB_LABELS[tab]} tab "
                f"({TAB_KEYS[tab]})"
            )
        table = self.table
        table.show(
            message.rows, self.awa.now(), self.awa.describe_kind, self.marks, append=message.append
        )
        self.has_more = message.has_more
        self.shown_query = message.query
        if not message.append:
            self.dlq_matches = message.dlq_matches
            self.marks &= {job.id for job in table.jobs}
        self.update_status()
        self.refresh_bindings()
        if self.pending_open:
            self.pending_open = False
            self.call_later(self.app.run_action, "open_job", self)

    def on_client_connected(self, message: ClientConnected) -> None:
        super().on_client_connected(message)
        self.table.refresh()

    def stale_changed(self, stale: bool) -> None:
        self.table.set_class(stale, "-stale")
        self.update_status()

    def on_jobs_changed(self, message: JobsChanged) -> None:
        self.marks.difference_update(message.job_ids)
        self.reload(refreshed=True)

    # -- live refresh -------------------------------------------------------------------------
    def _restart_timer(self) -> None:
        if self._timer is not None:
            self._timer.stop()
        self._timer = self.set_interval(self.interval, self._tick, pause=self.paused)

    def _tick(self) -> None:
        if self.is_current and not self.fetching:
            self.reload(refreshed=True)

    def watch_paused(self, paused: bool) -> None:
        if self._timer is not None:
            if paused:
                self._timer.pause()
            else:
                self._timer.resume()
        self.update_status()

    def watch_interval(self) -> None:
        if self.is_mounted:
            self._restart_timer()
            self.update_status()

    def update_status(self) -> None:
        if not self.is_mounted:
            return
        connection = self.awa.connection
        refreshed = connection.refreshed_at if connection.lost else None
        status = BrowserStatus(
            query=self.query_state,
            shown=len(self.table.jobs),
            has_more=self.has_more,
            dlq_matches=self.dlq_matches,
            marked=len(self.marks),
            stale_since=clock_time(refreshed) if refreshed is not None else None,
            paused=self.paused,
            interval=self.interval,
            note=self.note,
            loading=self.shown_query != self.query_state,
            origin=self.origin,
            elsewhere=self.elsewhere,
        )
        self.query_one("#status", Static).update(status.text())

    def show_query(self, query: JobQuery) -> None:
        """Switch to ``query``; on a tab that cannot be read in its order, newest first."""
        self.query_state, self.note = fitted(query)
        self.pending_open = False
        self.update_status()

    # -- events -------------------------------------------------------------------------------
    @on(StateTabs.TabSelected)
    def _tab_selected(self, event: StateTabs.TabSelected) -> None:
        self.show_query(self.query_state.with_tab(event.tab))

    @on(Input.Submitted, "#filter")
    def _filter_submitted(self, event: Input.Submitted) -> None:
        try:
            query = self.query_state.with_filter(event.value, self.awa.now())
        except FilterSyntaxError as exc:  # the previous filter stays, and says why
            self.note = f"{exc} The previous filter stays."
            self.update_status()
            self.notify(str(exc), title="Filter", severity="warning")
            return
        self.follow_id = query.job_id is not None
        self.show_query(query)
        self.set_focus(self.table)

    @on(DataTable.RowSelected, "#jobs")
    def _row_selected(self, event: DataTable.RowSelected) -> None:
        self.action_open_job()

    @on(DataTable.RowHighlighted, "#jobs")
    def _row_highlighted(self, event: DataTable.RowHighlighted) -> None:
        """A person reaching the last row loads the next page. A refresh that keeps the cursor
        on its job while new jobs push it down does not: the table grew a page every time the
        job reached the bottom, to 1,000 rows over an hour (``console_soak``)."""
        self.refresh_bindings()
        if event.cursor_row == self.table.placed:
            self.table.placed = None
            return
        at_end = event.cursor_row >= self.table.row_count - 1
        if self.has_more and at_end and not self.fetching:
            self.action_next_page()

    # -- actions ------------------------------------------------------------------------------
    def check_action(self, action: str, parameters: tuple[object, ...]) -> bool | None:
        """A drill-down's esc goes back and its R, X, D are labelled as the jobs' own; the
        bottom browser's esc clears. Each key has one binding at a time (the other is off)."""
        if action in (PLAIN_ONLY if self.origin is not None else DRILLED_ONLY):
            return False
        return super().check_action(action, parameters)

    def binding_reason(self, action: str) -> str | None:
        if action in (PLAIN_ONLY if self.origin is not None else DRILLED_ONLY):
            return None  # off here: the key's other binding answers (and says why, if need be)
        action = JOB_KEYS.get(action, action)
        job = self.table.current_job if self.is_mounted else None
        if action in ("open_job", "copy", "save", "toggle_mark") and job is None:
            return "No job is selected."
        if action == "next_page" and not self.has_more:
            return "This is the last page."
        if action in ("retry", "cancel", "delete"):
            if self.marks:
                return None
            if job is None:
                return "No job is selected."
            return why_not(self._job_action(action, job), job)
        return None

    def typed_ahead(self, action: str) -> bool:
        if action != "open_job" or self.shown_query == self.query_state:
            return False  # the page is shown: an Enter with no row says "No job is selected."
        self.pending_open = True
        return True

    def _job_action(self, action: str, job: JobRow | None) -> JobAction:
        dlq = job.dlq is not None if job is not None else self.query_state.dlq
        if action == "retry":
            return JobAction.RETRY_DLQ if dlq else JobAction.RETRY
        if action == "delete":
            return JobAction.PURGE_DLQ if dlq else JobAction.DELETE
        return JobAction.CANCEL

    def action_open_job(self) -> None:
        job = self.table.current_job
        if job is not None:
            self.awa.open_job(job.id)

    def action_focus_filter(self) -> None:
        # At once, not ``focus()`` (which waits for the app's queue): the keys typed right
        # after ``/`` must find the filter focused (``AwaApp._on_key`` sends them on to it).
        self.set_focus(self.query_one(FilterBar))

    def action_tab(self, delta: int) -> None:
        self.show_query(self.query_state.with_tab(self.query_one(StateTabs).step(delta)))

    def action_select_tab(self, tab: str) -> None:
        self.show_query(self.query_state.with_tab(tab))

    def action_sort(self) -> None:
        self.show_query(next_sort(self.query_state))

    def action_reverse(self) -> None:
        order = self.query_state.sort
        query = self.query_state.with_sort(SortOrder(order.column, not order.descending))
        refusal = query.sort_refusal()
        if refusal is not None:
            self.note = refusal
            self.update_status()
            self.notify(refusal, title="Sort", severity="warning")
            return
        self.show_query(query)

    def action_toggle_mark(self) -> None:
        job = self.table.current_job
        if job is None:
            return
        marked = job.id not in self.marks
        (self.marks.add if marked else self.marks.discard)(job.id)
        self.table.set_marked(job.id, marked)
        self.table.action_cursor_down()
        self.update_status()
        self.refresh_bindings()

    def action_next_page(self) -> None:
        if self.has_more:
            self.load_jobs(self.query_state, append=True, refreshed=False)

    def action_refresh(self) -> None:
        self.reload(refreshed=True)

    def action_toggle_pause(self) -> None:
        self.paused = not self.paused

    def action_interval(self, step: int) -> None:
        current = min(range(len(INTERVALS)), key=lambda i: abs(INTERVALS[i] - self.interval))
        self.interval = INTERVALS[max(0, min(len(INTERVALS) - 1, current + step))]

    def action_back(self) -> None:
        """Back to the screen this browser was opened from (its row still selected)."""
        if self.query_one(FilterBar).has_focus:
            self.table.focus()
        elif self.marks:
            self.action_clear()
        else:
            self.dismiss()

    def action_clear(self) -> None:
        if self.query_one(FilterBar).has_focus:
            self.table.focus()
        elif self.marks:
            for job_id in list(self.marks):
                self.table.set_marked(job_id, False)
            self.marks.clear()
            self.update_status()
            self.refresh_bindings()
        elif self.query_state.filter_text:
            self.show_query(self.query_state.with_filter("", self.awa.now()))

    def action_copy(self) -> None:
        job = self.table.current_job
        if job is not None:
            self.awa.copy_text(str(job.id), f"job id {job.id}")

    def action_save(self) -> None:
        job = self.table.current_job
        if job is not None:
            self.save_current(job.id)

    @work(exclusive=True, exit_on_error=False, group="save")
    async def save_current(self, job_id: int) -> None:
        client = await self.awa.client()
        row = await client.get_job(job_id)  # list rows carry no output; save the full row
        if row is None:
            self.notify(f"Job {job_id} no longer exists.", severity="warning")
            return
        self.awa.save_job(row)

    def action_retry(self) -> None:
        self._confirm_write("retry")

    def action_cancel(self) -> None:
        self._confirm_write("cancel")

    def action_delete(self) -> None:
        self._confirm_write("delete")

    action_retry_job = action_retry
    action_cancel_job = action_cancel
    action_delete_job = action_delete

    def _confirm_write(self, name: str) -> None:
        job = self.table.current_job
        if self.marks:
            ids = sorted(self.marks, reverse=True)
            action = self._job_action(name, None)
            subject = f"the {plural(len(ids), 'marked job')}"
        elif job is not None:
            ids = [job.id]
            action = self._job_action(name, job)
            subject = f"job {job.id} ({job.kind}, {state_label(job)})"
        else:
            return
        question = f"{ACTIONS[action].label} {subject}?"
        body = f"Jobs that are not {ACTIONS[action].allowed} are refused."
        confirm_job_action(self.awa, action, ids, question, body)

    def action_bulk_matching(self) -> None:
        query = self.query_state

        def chosen(action: JobAction | None) -> None:
            if action is not None:
                self.awa.run_bulk_matching(action, query)

        self.app.push_screen(BulkActionModal(query), chosen)
