"""``awa-tui --demo``: an embedded PostgreSQL, migrated, with a live workload on the real runtime.

The workload shows what the console is for: typed outputs completed on both storage paths
(plain jobs take the compact path, jobs with tags or metadata the general one), retries whose
failed attempts recorded outputs, a dead-letter queue, jobs parked waiting for callbacks, jobs
scheduled for later, long-running jobs, new jobs arriving every few seconds, and one queue
that backs up now and then (``awa_tui.demo_backlog``).
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import importlib.util
import os
import random
import signal
import sys
import time
from collections.abc import Callable
from datetime import UTC, datetime, timedelta
from types import FrameType
from typing import TYPE_CHECKING, Literal

from pydantic import BaseModel

from awa_tui.demo_backlog import Backlog
from awa_tui.embedded import (
    SIGNALS,
    TERMINAL_SIGNALS,
    EmbeddedPostgres,
    exit_now,
    exit_on_signals,
    python_sigint,
    signal_exit_code,
)
from awa_tui.errors import EXIT_USAGE, describe, exit_code
from storage import (
    AwaError,
    Client,
    Job,
    RetryAfter,
    TerminalError,
    WaitForCallback,
    migrate,
)

if TYPE_CHECKING:
    from awa_tui.app import AwaApp

DEMO_LABEL = "embedded PostgreSQL with a live workload; nothing here is real"
SCHEMA = "awa"


class SendEmail(BaseModel):
    to: str
    template: str


class EmailReceipt(BaseModel):
    message_id: str
    accepted: list[str]
    provider: str


class ResizeImage(BaseModel):
    image_id: int
    width: int
    height: int


class Thumbnail(BaseModel):
    url: str
    width: int
    height: int
    bytes: int


class SyncInventory(BaseModel):
    warehouse: str


class SyncReport(BaseModel):
    updated: int
    skipped: int
    failed_skus: list[str]


class ChargeCard(BaseModel):
    order_id: int
    amount_cents: int


class ChargeAttempt(BaseModel):
    provider: str
    decline_code: str | None
    retryable: bool


class AwaitPayment(BaseModel):
    order_id: int
    provider: str


class PaymentResult(BaseModel):
    status: Literal["paid", "refused"]
    reference: str
    amount_cents: int


class BuildReport(BaseModel):
    report: str
    seconds: float


class ReportSummary(BaseModel):
    rows: int
    pages: int


WAREHOUSES = ("eu-1", "eu-2", "us-1", "us-2", "ap-1")
ALWAYS_FAILING = "eu-3"


class DemoClient(Client):
    """The demo's client: it also owns the task that keeps jobs arriving."""

    feeder: asyncio.Task[None] | None = None
    workload: Client | None = None  # the writing client, when the console's own is read-only

    async def close(self, timeout: float | None = Client.CLOSE_TIMEOUT) -> None:  # noqa: ASYNC109
        if self.feeder is not None:
            self.feeder.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await self.feeder
        if self.workload is not None:
            await self.workload.close()
        # Quitting does not wait for the demo's handlers (one sleeps 45 s): they are cancelled
        # and their attempts given back as retries (one quick write).
        await self.shutdown(abandon=True)
        await super().close(timeout)


def register(client: Client, backlog: Backlog | None = None) -> None:
    """The demo's kinds: each declares an output type and publishes a descriptor. With a
    ``backlog``, the handlers of its queue wait out its stalls."""

    @client.task(SendEmail, output=EmailReceipt, queue="mail")
    async def send_email(job: Job[SendEmail]) -> RetryAfter | None:
        job.set_output(
            EmailReceipt(
                message_id=f"msg-{job.id:06d}", accepted=[job.args.to], provider="postmark"
            )
        )
        if "bounce" in job.args.to and job.attempt < 2:
            return RetryAfter(3)  # the attempt's output stays in its error entry
        return None

    @client.task(ResizeImage, output=Thumbnail, queue="images")
    async def resize_image(job: Job[ResizeImage]) -> None:
        if backlog is not None:
            await backlog.wait_turn("images")
        await asyncio.sleep(0.2)
        w, h = job.args.width // 4, job.args.height // 4
        job.set_output(
            Thumbnail(
                url=f"https://cdn.example/t/{job.args.image_id}.webp",
                width=w,
                height=h,
                bytes=w * h // 3,
            )
        )

    @client.task(SyncInventory, output=SyncReport)
    async def sync_inventory(job: Job[SyncInventory]) -> None:
        updated = 40 * job.attempt
        failed = [f"SKU-{job.id}-{n}" for n in range(3 - min(job.attempt, 3))]
        job.set_output(SyncReport(updated=updated, skipped=2, failed_skus=failed))
        if job.args.warehouse == ALWAYS_FAILING or job.attempt < 2:
            raise RuntimeError(
                f"upstream timed out after {updated} items (warehouse {job.args.warehouse})"
            )

    @client.task(ChargeCard, output=ChargeAttempt, queue="payments")
    async def charge_card(job: Job[ChargeCard]) -> None:
        if job.args.amount_cents % 7 == 0:
            job.set_output(
                ChargeAttempt(provider="stripe", decline_code="insufficient_funds", retryable=False)
            )
            raise TerminalError("card declined: insufficient_funds")
        job.set_output(ChargeAttempt(provider="stripe", decline_code=None, retryable=False))

    @client.task(AwaitPayment, output=PaymentResult, queue="webhooks")
    async def await_payment(job: Job[AwaitPayment]) -> WaitForCallback:
        token = await job.register_callback(timeout_seconds=3600)
        return WaitForCallback(token)

    @client.task(BuildReport, output=ReportSummary, queue="reports")
    async def build_report(job: Job[BuildReport]) -> None:
        await asyncio.sleep(job.args.seconds)
        job.set_output(ReportSummary(rows=1200, pages=14))

    descriptors = (
        (SendEmail, "Send email", "Sends one transactional email.", "growth"),
        (ResizeImage, "Resize image", "Makes a thumbnail of an uploaded image.", "media"),
        (SyncInventory, "Sync inventory", "Pulls stock levels from a warehouse.", "supply"),
        (ChargeCard, "Charge card", "Charges a card for an order.", "payments"),
        (AwaitPayment, "Await payment", "Waits for the payment provider's webhook.", "payments"),
        (BuildReport, "Build report", "Renders a nightly report.", "analytics"),
    )
    for args_type, name, description, owner in descriptors:
        client.job_kind_descriptor(
            args_type,
            display_name=name,
            description=description,
            owner=owner,
            docs_url=f"https://runbooks.example/{owner}",
        )


async def seed(client: Client, rng: random.Random) -> None:
    """A first screenful: every state the console shows."""
    await client.configure_queue("payments", dlq=True)
    await client.insert_many(
        [SendEmail(to=f"user{n}@example.com", template="welcome") for n in range(12)]
    )
    await client.insert(SendEmail(to="bounce@example.com", template="welcome"), max_attempts=3)
    for n in range(6):
        await client.insert(
            ResizeImage(image_id=100 + n, width=1600, height=1200),
            tags=["upload"],
            metadata={"uploaded_by": f"user{n}"},
        )
    for warehouse in (*WAREHOUSES[:3], ALWAYS_FAILING):
        await client.insert(SyncInventory(warehouse=warehouse), max_attempts=3)
    await client.insert_many(
        [ChargeCard(order_id=500 + n, amount_cents=700 * (n + 1) + n % 2) for n in range(6)],
        max_attempts=1,
    )
    await client.insert_many([AwaitPayment(order_id=900 + n, provider="adyen") for n in range(3)])
    await client.insert(BuildReport(report="nightly-sales", seconds=45))
    later = datetime.now(UTC) + timedelta(minutes=rng.randint(10, 50))
    await client.insert(
        BuildReport(report="weekly-finance", seconds=5),
        run_at=later,
        unique_key="report:weekly-finance",  # the job detail shows the key and its holder
    )


async def feed(client: Client, rng: random.Random, backlog: Backlog) -> None:
    """Jobs keep arriving while you watch; during a backlog, a burst of uploads too."""
    order = 1000
    started = time.monotonic()
    while True:
        await asyncio.sleep(rng.uniform(2.0, 4.0))
        order += 1
        choice = rng.random()
        try:
            if backlog.step(time.monotonic() - started):  # uploads pile up while it stalls
                images = range(order * 10, order * 10 + backlog.burst)
                burst = [ResizeImage(image_id=n, width=800, height=600) for n in images]
                await client.insert_many(burst, tags=["upload"], returning="ids")
            if choice < 0.4:
                await client.insert(SendEmail(to=f"user{order}@example.com", template="receipt"))
            elif choice < 0.6:
                await client.insert(
                    ResizeImage(image_id=order, width=800, height=600), tags=["upload"]
                )
            elif choice < 0.75:
                await client.insert(
                    ChargeCard(
                        order_id=order, amount_cents=order * 7 if order % 3 == 0 else order * 5 + 1
                    ),
                    max_attempts=1,
                )
            elif choice < 0.85:
                await client.insert(AwaitPayment(order_id=order, provider="adyen"))
            else:
                await client.insert(SyncInventory(warehouse=rng.choice(WAREHOUSES)), max_attempts=3)
        except AwaError:
            return  # the console is closing


class DemoWorkload:
    """``start`` is the app's client factory: it runs inside the app's event loop."""

    def __init__(
        self, dsn: str, schema: str = SCHEMA, *, read_only: bool = False, seed_value: int = 48
    ) -> None:
        self.dsn = dsn
        self.schema = schema
        self.read_only = read_only
        self.rng = random.Random(seed_value)
        self.backlog = Backlog()

    async def start(self) -> Client:
        client = await DemoClient.connect(self.dsn, self.schema)
        register(client, self.backlog)
        await seed(client, self.rng)
        # Periodic schedules (the S screen): stored by start(), enqueued by maintenance.
        client.periodic(BuildReport(report="digest", seconds=2), every=timedelta(minutes=1))
        client.periodic(
            BuildReport(report="nightly-sales", seconds=45),
            cron="0 2 * * *",
            timezone="Europe/Paris",
            name="nightly-sales",
        )
        queues = self.backlog.queue_limits(s.queue for s in client.tasks.values())
        await client.start(queues, name="awa-tui --demo")  # the timeline's runtime names it
        feeder = feed(client, self.rng, self.backlog)
        client.feeder = asyncio.get_running_loop().create_task(feeder)
        if not self.read_only:
            return client
        console = await DemoClient.connect(self.dsn, self.schema, read_only=True)
        console.workload = client  # the console reads through a read-only session
        return console


def build_demo_app(dsn: str, args: argparse.Namespace) -> AwaApp:
    """The console on the demo database, its client the demo's live workload."""
    from awa_tui.app import make_app

    return make_app(
        dsn,
        SCHEMA,
        read_only=args.read_only,
        refresh=args.refresh,
        initial_job=args.job,
        initial_kind=args.kind,
        initial_state=args.state,
        demo_label=DEMO_LABEL,
        client_factory=DemoWorkload(dsn, read_only=args.read_only).start,
        dsn_label=f"embedded PostgreSQL (pgserver) · schema {SCHEMA}",
        editor=os.environ.get("VISUAL") or os.environ.get("EDITOR"),
        actor=args.actor,
    )


STUCK_EXIT = 2.0
"""Seconds after which a SIGTERM no longer waits for an exit already under way."""


async def run_app(app: AwaApp, note: Callable[[int], None], server: EmbeddedPostgres) -> None:
    """Run the app until it exits, or a signal ends the process.

    SIGHUP means the terminal is gone: there is nothing to restore, and Textual's writes to it
    can block the main thread for good (the writer thread stuck on the terminal, the loop stuck
    on the writer's queue). So SIGHUP stops the server and leaves at once (``exit_now``: 129).
    SIGTERM exits through Textual, which restores the terminal (143); a SIGTERM that comes more
    than ``STUCK_EXIT`` seconds after an exit that has not finished leaves at once too.

    These are ``signal.signal`` handlers, not the loop's: Python runs them in the main thread
    even while it is blocked on a lock or a write, where the loop would never get to its own.
    """
    loop = asyncio.get_running_loop()
    exiting: list[float] = []  # when SIGTERM asked the app to exit

    def on_signal(signum: int, frame: FrameType | None) -> None:
        code = signal_exit_code(signum)
        if signum != signal.SIGTERM:
            note(signum)
            exit_now(server, code)
        if exiting:
            if time.monotonic() - exiting[0] > STUCK_EXIT:
                exit_now(server, code)
            return
        note(signum)
        exiting.append(time.monotonic())
        with contextlib.suppress(RuntimeError):  # the loop is closed: the app is gone already
            loop.call_soon_threadsafe(lambda: app.exit(return_code=code))

    previous = {sig: signal.signal(sig, on_signal) for sig in SIGNALS}
    # Textual's driver installs its suspend and resume handlers and never takes them back.
    previous.update({sig: signal.getsignal(sig) for sig in TERMINAL_SIGNALS})
    try:
        await app.run_async()
    finally:
        for sig, handler in previous.items():
            signal.signal(sig, handler)


def say(message: str) -> None:
    """A line on stderr; the terminal may be gone already (SIGHUP)."""
    with contextlib.suppress(OSError):
        print(f"awa-tui: {message}", file=sys.stderr)


def run_demo(args: argparse.Namespace) -> int:
    """The embedded server is stopped and its directory removed on every way out: quit, an
    error, Ctrl-C (before the console is up), SIGTERM and SIGHUP."""
    if importlib.util.find_spec("pgserver") is None:  # not imported: see awa_tui.embedded
        say("--demo needs pgserver: pip install 'awa-tui[demo]'")
        return EXIT_USAGE
    try:
        with exit_on_signals() as seen, EmbeddedPostgres() as server:
            seen.raise_if_seen()  # each step's end: a signal whose own raise was lost
            say("starting the embedded PostgreSQL for the demo…")
            try:
                with python_sigint(seen):
                    asyncio.run(migrate(server.dsn))
            except AwaError as exc:
                say(describe(exc).text)
                return exit_code(exc)
            app = build_demo_app(server.dsn, args)
            seen.raise_if_seen()
            with python_sigint(seen):
                asyncio.run(run_app(app, seen.note, server))
            if app.fatal_message is not None:
                say(app.fatal_message)
            return app.return_code or 0
    except KeyboardInterrupt:
        say("interrupted.")
        return signal_exit_code(signal.SIGINT)
