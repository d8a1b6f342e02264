"""The composition root: settings, the client's lifecycle, screens, global keys, errors.

``make_app`` is the one factory used by the CLI, the demo and the tests. The client (and its
asyncpg pool) is created inside the app's own event loop, in ``on_mount``.
"""

from __future__ import annotations

import asyncio
import os
import time
from collections.abc import Awaitable, Callable, Iterable, Mapping
from datetime import datetime
from functools import partial
from pathlib import Path
from typing import Any, ClassVar

import orjson
from textual import events, work
from textual.actions import ActionParseResult
from textual.actions import parse as parse_action
from textual.app import App, SystemCommand
from textual.binding import Binding, BindingType
from textual.dom import DOMNode
from textual.reactive import reactive
from textual.screen import Screen
from textual.worker import Worker, WorkerFailed, WorkerState

from awa_tui import writes
from awa_tui.actions import JobAction
from awa_tui.errors import EXIT_INTERNAL, describe, exit_code
from awa_tui.key_line import KeyLine
from awa_tui.messages import ClientConnected, JobsChanged
from awa_tui.query import TABS, JobQuery
from awa_tui.resilience import (
    ConnectionState,
    Guarded,
    is_connection_error,
    report_unexpected,
    unexpected_summary,
)
from awa_tui.screens.audit import AuditScreen
from awa_tui.screens.base import AwaScreen
from awa_tui.screens.confirm import PromptModal
from awa_tui.screens.detail import JobDetailScreen
from awa_tui.screens.dlq import DlqScreen
from awa_tui.screens.failure_groups import FailureGroupsScreen
from awa_tui.screens.help import HelpScreen
from awa_tui.screens.jobs import JobsScreen
from awa_tui.screens.kinds import KindsScreen
from awa_tui.screens.queues import QueuesScreen
from awa_tui.screens.schedules import SchedulesScreen
from awa_tui.screens.schema_picker import SchemaPickerModal
from awa_tui.settings import AppSettings
from awa_tui.timefmt import Clock, system_clock
from awa_tui.watchers import sweep
from storage import (
    AwaError,
    Client,
    JobKindDescriptor,
    JobRow,
    default_actor,
    redact_dsn,
    redact_secrets,
)

ClientFactory = Callable[[], Awaitable[Client]]
LoopHandler = Callable[[asyncio.AbstractEventLoop, dict[str, Any]], object]

JUMPS: tuple[type[AwaScreen], ...] = (
    KindsScreen,
    DlqScreen,
    QueuesScreen,
    FailureGroupsScreen,
    SchedulesScreen,
    AuditScreen,
)
"""The screens a key opens from anywhere; each declares its key (``JUMP``). One line adds one."""

PROBE = "probe"
"""The app's own read: the connection check when nothing else read."""


def is_read(worker: Worker[object]) -> bool:
    """Whether ``worker`` only reads (its success means the database answered): the probe, or
    a screen's worker in the read group the screen declares."""
    node = worker.node
    if isinstance(node, AwaScreen):
        return node.READ_GROUP is not None and worker.group == node.READ_GROUP
    return worker.group == PROBE


QUIT_BOUND = 0.6  # seconds the quit waits for the client to close before terminating its pool
CANCELLED_READ_NOTE = "Resetting connection with an active transaction"
QUIET_AFTER_QUIT = 2.0  # seconds asyncpg's notes about the quit's cancelled reads stay hidden
CLOCK_INTERVAL = 1.0  # seconds between ticks of the app's clock (relative times are in seconds)
SILENCE_FLOOR = 8.0
"""Seconds without an answer before the connection is marked lost, whatever the refresh: at
``--refresh 0.2`` two intervals were 0.4 s, so one slow read on a busy host (or reads paused
under a modal) flashed "connection lost" and then "back" while nothing was wrong. 3 s was
still short: at load 11-15 a probe took over a second and a paused console (a probe every 2
s, lost at 4) flashed it too, into the form's snapshots. A hung server is said within 8 s."""

SESSION_READ_ONLY = "Read-only session (--read-only): the database session refuses writes."
DATABASE_READ_ONLY = (
    "The database is read-only (a replica, or read-only by default): writes are off."
)


class AwaApp(Guarded, App[int]):
    """awa-tui: inspect and repair jobs in Awa-style queue storage."""

    CSS_PATH = "app.tcss"
    TITLE = "awa-tui"

    BINDINGS: ClassVar[list[BindingType]] = [
        Binding("question_mark", "help", "Help", id="app.help"),
        *(screen.JUMP.binding() for screen in JUMPS if screen.JUMP is not None),
        Binding("Z", "pick_schema", "Schema…", show=False, id="app.schema"),
        Binding("q", "quit", "Quit", show=False, id="app.quit"),
    ]

    read_only_reason: reactive[str | None] = reactive(None)
    """Why writes are impossible (session or database), or None when they are possible."""

    connection: reactive[ConnectionState] = reactive(ConnectionState, init=False)
    """Live / lost since T, set by every read; the header and every screen's banner show it."""

    tick: reactive[datetime] = reactive(system_clock, init=False)
    """The app's one clock, set from ``now()`` every ``CLOCK_INTERVAL``: what shows a relative
    time ("15s ago") watches it, so it ticks without a timer of its own."""

    def __init__(
        self,
        settings: AppSettings,
        *,
        clock: Clock | None = None,
        client_factory: ClientFactory | None = None,
    ) -> None:
        super().__init__()
        self.settings = settings
        self._clock = clock or system_clock
        self._client_factory = client_factory
        self._client: Client | None = None
        self._client_ready = asyncio.Event()
        self.descriptors: dict[str, JobKindDescriptor] = {}
        self.fatal_message: str | None = None
        if settings.read_only:
            self.set_reactive(AwaApp.read_only_reason, SESSION_READ_ONLY)
        self.schema = settings.schema
        """The queue-storage schema shown now (the picker, ``Z``, changes it)."""
        self._last_read = 0.0  # monotonic time of the last successful read
        self._runtime_state = "stopped"  # the client's runtime health, to notify its changes
        self._loop_handler: LoopHandler | None = None
        self.stopping = False
        """Quitting: the app exits; asyncpg's notes about cancelled reads are not shown."""
        self.set_reactive(AwaApp.tick, self._clock())
        self._keys = KeyLine(self)
        self.title = "awa-tui · DEMO" if settings.demo_label else "awa-tui"
        self.sub_title = f"{self.connection.header()} · {self._label}"

    @property
    def _label(self) -> str:
        """Where the console reads: the server and the schema shown (a pinned ``dsn_label``
        names both, for the schema the console started on)."""
        settings = self.settings
        if settings.dsn_label and self.schema == settings.schema:
            return settings.dsn_label
        return f"{redact_dsn(settings.dsn)} · schema {self.schema}"

    # -- time and the client ------------------------------------------------------------------
    def now(self) -> datetime:
        return self._clock()

    @property
    def writable(self) -> bool:
        return self.read_only_reason is None

    @property
    def actor(self) -> str:
        """Who every write of this console is audited as (``--actor``, else user@host)."""
        return self.settings.actor or default_actor()

    async def client(self) -> Client:
        """The connected client; waits while the app is still connecting."""
        await self._client_ready.wait()
        assert self._client is not None
        return self._client

    def describe_kind(self, kind: str) -> JobKindDescriptor | None:
        return self.descriptors.get(kind)

    def on_mount(self) -> None:
        settings = self.settings
        query = JobQuery(
            tab=settings.initial_state if settings.initial_state in TABS else "all",
            kind=settings.initial_kind,
        )
        self.push_screen(JobsScreen(query))
        if settings.initial_job is not None:
            self.push_screen(JobDetailScreen(settings.initial_job))
        self.connect()
        self.set_interval(self.health_interval, self._check_health)
        self.set_interval(CLOCK_INTERVAL, self._tick_clock)
        loop = asyncio.get_running_loop()
        self._loop_handler = loop.get_exception_handler()
        loop.set_exception_handler(self._loop_exception)

    def _loop_exception(self, loop: asyncio.AbstractEventLoop, context: dict[str, Any]) -> None:
        """The loop's reports, less asyncpg's note about each read the quit cancelled."""
        if self.stopping and str(context.get("message", "")).startswith(CANCELLED_READ_NOTE):
            return
        if self._loop_handler is not None:
            self._loop_handler(loop, context)
        else:
            loop.default_exception_handler(context)

    def _tick_clock(self) -> None:
        """Advance the clock, and drop the watchers removed widgets left behind (``sweep``)."""
        sweep(self)
        self.tick = self.now()

    @work(exclusive=True, exit_on_error=False, group="connect")
    async def connect(self) -> None:
        try:
            client = await self._open_client(self.schema)
        except (AwaError, OSError) as exc:
            self.fatal_message = describe(exc).text
            self.exit(return_code=exit_code(exc))
            return
        await self._use_client(client)

    async def _open_client(self, schema: str) -> Client:
        settings = self.settings
        if self._client_factory is not None and schema == settings.schema:
            return await self._client_factory()
        return await Client.connect(settings.dsn, schema, read_only=settings.read_only)

    async def _use_client(self, client: Client) -> None:
        self._client = client
        reason = SESSION_READ_ONLY if self.settings.read_only else None
        if reason is None and await client.database_read_only():
            reason = DATABASE_READ_ONLY
        self._last_read = time.monotonic()
        self.read_only_reason = reason
        await self.load_descriptors(client)
        self._client_ready.set()
        for screen in self.screen_stack:
            screen.post_message(ClientConnected(reason))

    def action_pick_schema(self) -> None:
        if isinstance(self.screen, SchemaPickerModal):
            return

        def chosen(name: str | None) -> None:
            if name is not None and name != self.schema:
                self.switch_schema(name)

        self.push_screen(SchemaPickerModal(self.schema, self.settings.schemas), chosen)

    @work(exclusive=True, exit_on_error=False, group="connect")
    async def switch_schema(self, name: str) -> None:
        """Show ``name``: a client on it first (a refusal keeps the schema shown now), then
        the old one closed within ``QUIT_BOUND`` and every screen started over on the new."""
        try:
            client = await self._open_client(name)
        except (AwaError, OSError) as exc:
            self.notify(describe(exc).text, title=f"Schema {name}", severity="error")
            return
        self._client_ready.clear()
        old, self._client = self._client, None
        while len(self.screen_stack) > 1:
            await self.pop_screen()
        if old is not None:
            try:
                await asyncio.wait_for(old.close(), QUIT_BOUND)
            except TimeoutError:
                old.pool.terminate()
        self.schema = name
        self.sub_title = f"{self.connection.header()} · {self._label}"
        await self.push_screen(JobsScreen(JobQuery()))
        await self._use_client(client)
        self.notify(f"Showing schema {name}.", title="Schema")

    async def load_descriptors(self, client: Client) -> None:
        kinds = await client.list_kinds()
        self.descriptors = {k.kind: k.descriptor for k in kinds if k.descriptor is not None}

    # -- connection health --------------------------------------------------------------------
    @property
    def health_interval(self) -> float:
        """How often the connection is checked when nothing else read (the refresh interval)."""
        refresh = self.settings.refresh
        return refresh if refresh > 0 else 2.0

    def watch_connection(self, old: ConnectionState, new: ConnectionState) -> None:
        self.sub_title = f"{new.header()} · {self._label}"
        if old.lost and not new.lost:
            self.notify("The connection to PostgreSQL is back.", title="Connection")
            self.broadcast_changed([])  # every screen reloads what it shows

    def note_read(self) -> None:
        self._last_read = time.monotonic()
        self.connection = self.connection.succeeded(self.now())

    def note_lost(self, exc: BaseException) -> None:
        reason = redact_secrets(describe(exc).text, self.settings.dsn)
        self.connection = self.connection.failed(self.now(), reason)

    def _check_health(self) -> None:
        """Probe when lost (to recover by itself) or when no read succeeded for an interval.

        A database that stops answering (a hung server, a network that drops packets) fails no
        read: each one just waits, and the next refresh replaces it. So silence is a failure
        too: no successful read for two intervals (at least ``SILENCE_FLOOR``) marks the
        connection lost.
        """
        if self._client is None:
            return
        runtime = self._client.health  # stopped unless this client runs jobs (the demo's does)
        if runtime.state != self._runtime_state and runtime.state in ("degraded", "failed"):
            text = f"The worker runtime is {runtime.state}: {runtime.reason}"
            self.notify(text, severity="error" if runtime.state == "failed" else "warning")
        self._runtime_state = runtime.state
        silent = time.monotonic() - self._last_read
        if not self.connection.lost and silent >= max(2 * self.health_interval, SILENCE_FLOOR):
            self.connection = self.connection.failed(
                self.now(), f"PostgreSQL has not answered for {silent:.0f} s."
            )
        if self.connection.lost or silent >= self.health_interval:
            self.probe()

    @work(exclusive=True, exit_on_error=False, group=PROBE)
    async def probe(self) -> None:
        client = await self.client()
        await client.database_read_only()

    # -- quitting -------------------------------------------------------------------------------
    async def action_quit(self) -> None:
        """Say "stopping…" in the header (the frame the terminal keeps while the app closes),
        then exit once that frame is drawn."""
        self.stopping = True
        self.sub_title = f"stopping… · {self._label}"
        self.call_after_refresh(self.exit)

    async def on_unmount(self) -> None:
        """Close the client within ``QUIT_BOUND``: a pool waiting on a read that does not end
        (a hung server) or a runtime's handlers must not hold the quit; past the bound the
        pool's connections are terminated. Reads cancelled mid-transaction by the quit are
        rolled back by that close; asyncpg's note about each is not shown."""
        self.stopping = True
        client, self._client = self._client, None
        if client is None:
            return
        try:
            await asyncio.wait_for(client.close(), QUIT_BOUND)
        except TimeoutError:
            client.pool.terminate()
        finally:
            # The pool releases the cancelled reads' connections after this: keep the filter a
            # little longer, then give the loop its handler back (unless another app took it).
            loop = asyncio.get_running_loop()
            loop.call_later(QUIET_AFTER_QUIT, self._restore_loop_handler, loop)

    def _restore_loop_handler(self, loop: asyncio.AbstractEventLoop) -> None:
        if loop.get_exception_handler() == self._loop_exception:
            loop.set_exception_handler(self._loop_handler)

    # -- keys ---------------------------------------------------------------------------------
    async def on_event(self, event: events.Event) -> None:
        key = event if isinstance(event, events.Key) and not event.is_forwarded else None
        if key is not None and not self._keys.admit(key):
            return
        await super().on_event(event)
        if key is not None:
            self._keys.forwarded(key)

    async def _on_key(self, event: events.Key) -> None:
        """No typed key is lost or overtaken, whatever is loading (``awa_tui.key_line``): a
        key that comes back here from a widget that lost the focus meanwhile goes again, where
        the focus is now (a character into the filter, ``j`` and enter to the new screen's
        table), not to App's bindings, which would act on the new focus."""
        if self._keys.resend(event):
            event.prevent_default()

    # -- errors -------------------------------------------------------------------------------
    def worker_state_changed(self, event: Worker.StateChanged) -> None:
        """Every worker of every screen ends here (``Guarded`` forwards them): reads set the
        connection state, failures become one user-facing message, never a traceback."""
        worker = event.worker
        if event.state is WorkerState.SUCCESS and is_read(worker):
            self.note_read()
        if event.state is not WorkerState.ERROR or worker.error is None:
            return
        if is_connection_error(worker.error):
            self.note_lost(worker.error)
            if is_read(worker):
                return  # the header and banner say so; no notification on every retry
        self.show_error(worker.error)

    def show_error(self, exc: BaseException) -> None:
        message = describe(exc)
        text = redact_secrets(message.text, self.settings.dsn)
        self.notify(text, title=message.title, severity=message.severity, timeout=8)

    def _handle_exception(self, error: Exception) -> None:
        """Textual's last resort. A failed worker leaves the app intact: report it and go on.
        Anything else stopped a message loop Textual will not restart, so exit at once with one
        line (type and place, no locals, no message) instead of a traceback with locals."""
        if isinstance(error, WorkerFailed):
            report_unexpected(self, error.error)
            return
        self._return_code = EXIT_INTERNAL
        self.fatal_message = (
            f"the console stopped on an unexpected error: {unexpected_summary(error)}. "
            "This is a bug; please report it."
        )
        if self._exception is None:  # run_test re-raises it, so tests still see the failure
            self._exception = error
            self._exception_event.set()
        self._close_messages_no_wait()

    async def run_action(
        self,
        action: str | ActionParseResult,
        default_namespace: DOMNode | None = None,
        namespaces: Mapping[str, DOMNode] | None = None,
    ) -> bool:
        """Run ``action``; a screen's action that does not apply says why instead.

        Textual swallows a key whose action ``check_action`` refuses; here the screen's
        ``refusal`` (the same one that dims it in the footer) becomes a notification.
        """
        if isinstance(action, str) and isinstance(default_namespace, AwaScreen):
            namespace, name, parameters = parse_action(action)
            screen = default_namespace
            if not namespace and not screen.check_action(name, parameters):
                if screen.typed_ahead(action):
                    return True
                reason = screen.refusal(name)
                if reason is not None:
                    self.notify(reason, title="Not available", severity="warning", timeout=5)
                    return True
        return await super().run_action(action, default_namespace, namespaces)

    # -- writes (every caller confirms first) ------------------------------------------------
    def refuse_write(self) -> bool:
        """While the connection is lost a write fails at once, with a message saying why."""
        if not self.connection.lost:
            return False
        self.notify(self.connection.refusal(), title="Connection lost", severity="warning")
        return True

    def broadcast_changed(self, job_ids: list[int]) -> None:
        for screen in self.screen_stack:
            screen.post_message(JobsChanged(list(job_ids)))

    @work(exclusive=True, exit_on_error=False, group="write")
    async def run_job_action(
        self, action: JobAction, job_ids: list[int], reason: str | None = None
    ) -> None:
        await writes.act_on_jobs(self, action, job_ids, reason)

    @work(exclusive=True, exit_on_error=False, group="write")
    async def run_bulk_matching(self, action: JobAction, query: JobQuery) -> None:
        await writes.act_on_matching(self, action, query)

    # -- navigation and habits ----------------------------------------------------------------
    def action_help(self) -> None:
        if isinstance(self.screen, HelpScreen):
            return
        self.push_screen(HelpScreen(self.screen))

    def action_jump(self, name: str) -> None:
        """Open the screen whose ``JUMP`` is ``name``; one already open (under what was opened
        from it) comes back to the top instead, as it was, so the stack never grows by going
        round (Q, enter, Q, enter, ...)."""
        screen_type = JUMPED[name]
        opened = [s for s in self.screen_stack if type(s) is screen_type]
        if not opened:
            self.push_screen(screen_type())
            return
        while self.screen is not opened[-1]:
            self.pop_screen()

    def ask_job_id(self) -> None:
        """The palette's "Go to job id": ask for an id, open that job's detail."""

        def chosen(text: str | None) -> None:
            if text is None:
                return
            try:
                job_id = int(text.strip().lstrip("#"))
            except ValueError:
                self.notify(f"{text!r} is not a job id.", title="Go to job", severity="warning")
                return
            self.open_job(job_id)

        self.push_screen(
            PromptModal(
                "Go to job id",
                "The job's detail opens (the browser's filter id:N shows it in the list).",
                confirm_label="Open",
                keep_label="Back",
                placeholder="42",
            ),
            chosen,
        )

    def open_job(self, job_id: int) -> None:
        self.push_screen(JobDetailScreen(job_id))

    def drill(self, query: JobQuery, origin: AwaScreen) -> None:
        """Enter on a row of ``origin`` (a queue, a failure group, a kind): the browser on its
        jobs, pushed over it, so esc comes back to ``origin`` and the row it was on."""
        self.push_screen(JobsScreen(query, origin=origin.TITLE))

    def copy_text(self, text: str, what: str) -> None:
        """To the clipboard (OSC 52). Inside tmux or screen that arrives only when the
        multiplexer passes it on (tmux: set-clipboard on), which the console cannot see: the
        text is also saved to a file, and the notification says where."""
        self.copy_to_clipboard(text)
        if not (os.environ.get("TMUX") or os.environ.get("STY")):
            self.notify(f"Copied {what} to the clipboard.", title="Copied")
            return
        path = (self.settings.save_dir / "awa-copied.txt").resolve()
        path.write_text(text + "\n", encoding="utf-8")
        self.notify(
            f"Sent {what} to the clipboard; inside tmux it arrives only with set-clipboard on, "
            f"so it is also saved to {path}.",
            title="Copied",
            timeout=8,
        )

    def save_job(self, row: JobRow) -> Path:
        """Write the job as JSON (output decoded, and its exact stored text beside it)."""
        path = (self.settings.save_dir / f"awa-job-{row.id}.json").resolve()  # say where
        document = row.model_dump(mode="json")
        document["output"] = row.output
        path.write_bytes(orjson.dumps(document, option=orjson.OPT_INDENT_2) + b"\n")
        self.notify(f"Saved job {row.id} to {path}.", title="Saved")
        return path

    def get_system_commands(self, screen: Screen[object]) -> Iterable[SystemCommand]:
        """The palette offers every key of the current screen (disabled ones are left out),
        and "Go to job id"."""
        yield from super().get_system_commands(screen)
        yield SystemCommand("Go to job id", "Open one job's detail by its id", self.ask_job_id)
        seen: set[str] = set()
        for active in screen.active_bindings.values():
            binding = active.binding
            if not active.enabled or not binding.description or binding.action in seen:
                continue
            seen.add(binding.action)
            yield SystemCommand(
                binding.description,
                f"Key: {binding.key_display or binding.key}",
                partial(self.run_action, binding.action, active.node),
            )


JUMPED: dict[str, type[AwaScreen]] = {s.JUMP.action: s for s in JUMPS if s.JUMP is not None}
"""Each jump's action name to its screen class (``action_jump``)."""


def make_app(
    dsn: str | None,
    schema: str = "awa",
    *,
    schemas: tuple[str, ...] = (),
    read_only: bool = False,
    refresh: float = 2.0,
    initial_job: int | None = None,
    initial_kind: str | None = None,
    initial_state: str | None = None,
    demo_label: str | None = None,
    clock: Clock | None = None,
    client_factory: ClientFactory | None = None,
    dsn_label: str | None = None,
    save_dir: Path | None = None,
    editor: str | None = None,
    actor: str | None = None,
) -> AwaApp:
    """The app as the CLI, the demo and the tests build it."""
    settings = AppSettings(
        dsn=dsn,
        schema=schema,
        schemas=schemas,
        read_only=read_only,
        refresh=refresh,
        initial_job=initial_job,
        initial_kind=initial_kind,
        initial_state=initial_state,
        demo_label=demo_label,
        dsn_label=dsn_label,
        save_dir=save_dir or Path(),
        editor=editor,
        actor=actor,
    )
    return AwaApp(settings, clock=clock, client_factory=client_factory)
