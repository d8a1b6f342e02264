"""Screens pinned as SVG snapshots (fixed size, fixed clock, fixed ids and times).

Plain ``def`` tests: ``snap_compare`` runs the app in its own event loop. The data is seeded
first with ``asyncio.run``; ``tests/tui/scenarios.py`` is shared with ``scripts/screenshots.py``,
which writes the same screens to ``screenshots/``.
"""

from __future__ import annotations

from collections.abc import Callable

from tests.tui.scenarios import SCREENS, SIZE, Screen, prepare

SnapCompare = Callable[..., bool]


def check(snap_compare: SnapCompare, dsn: str, schema: str, screen: Screen) -> None:
    app = prepare(dsn, schema, screen)
    assert snap_compare(app, terminal_size=SIZE, run_before=screen.run_before)


def test_browser(snap_compare: SnapCompare, migrated_dsn: str, schema: str) -> None:
    """The job browser on the seeded incident: state tabs with counts (All 11, Failed 1, DLQ 1),
    newest first, ids 12..1, a diamond where an output exists (hollow where only a failed
    attempt kept one), last errors in red for the failed and retryable jobs; the waiting job's
    `when` is its claim time (1h24m ago), as for a running job."""
    check(snap_compare, migrated_dsn, schema, SCREENS["browser"])


def test_browser_time_range_sorted(
    snap_compare: SnapCompare, migrated_dsn: str, schema: str
) -> None:
    """All tab filtered to `since:90m` (since 08:00 on the pinned clock) and sorted by time,
    latest first (`s`): the scheduled report (due in 3 days) on top, then each job by its own
    time column, the `when` column reading in that order down to the waiting job's claim time
    (1h24m ago, not its callback deadline); jobs whose time is before 08:00 are gone and the tab
    counts follow the range (the status line says so); the `when ▼` header marks the order, the
    filter bar reads `since:90m sort:-when`."""
    check(snap_compare, migrated_dsn, schema, SCREENS["browser-since-sorted"])


def test_detail_typed_output(snap_compare: SnapCompare, migrated_dsn: str, schema: str) -> None:
    """Job 4 (resize_image, general path, tag "upload"): the summary grid, and the output panel
    labelled "type Thumbnail", "size 79 B of 4,096 B", "fits the schema", the stored JSON text
    highlighted exactly as stored, and under it which attempt wrote it (attempt 1, by its
    handler, general path) and when its queue slot is pruned. The footer offers Delete, the
    one write a completed job takes: no Complete, Retry or Cancel."""
    check(snap_compare, migrated_dsn, schema, SCREENS["detail"])


def test_detail_compare_diff(snap_compare: SnapCompare, migrated_dsn: str, schema: str) -> None:
    """Job 13 (sync_ledger) failed once after recording {"updated": 0, "skipped": 412, ...}
    and completed on its retry: the completed output with its provenance line (attempt 2, by
    its handler, general path, pruned with its queue slot at ~HH:MMZ), then, after d, the
    diff from the kept output to it: ~ $.updated 0 → 412, ~ $.skipped 412 → 0, ~ $.status,
    + $.batches; the footer shows d Diff/stacked."""
    check(snap_compare, migrated_dsn, schema, SCREENS["detail-compare"])


def test_detail_kept_output_beside_last_good(
    snap_compare: SnapCompare, migrated_dsn: str, schema: str
) -> None:
    """Job 5 (sync_inventory, failed): no completed output, the SyncReport its failed attempt
    kept in error entry #2 under "Kept by the failed attempt of error entry #2", and "Last good
    output of sync_inventory in queue default" saying none is among the latest 1,000 compact
    and 1,000 general-path completions (the kind never completed)."""
    check(snap_compare, migrated_dsn, schema, SCREENS["detail-kept"])


def test_error_history_kept_output(
    snap_compare: SnapCompare, migrated_dsn: str, schema: str
) -> None:
    """Job 5's three error entries newest first; #3 is terminal, #2 carries the "kept output"
    marker and is selected, so its SyncReport output is shown below with its provenance line
    (attempt 2, by its handler, which failed, kept in error entry #2, kept at least until
    ~2026-03-17 07:59Z) and the note that only the latest failed attempt with an output keeps
    it."""
    check(snap_compare, migrated_dsn, schema, SCREENS["errors"])


def test_complete_form_validation_error(
    snap_compare: SnapCompare, migrated_dsn: str, schema: str
) -> None:
    """The completion form for waiting job 7, callback id prefilled, with an output whose
    "status" is not one of the PaymentResult schema's values: a red line naming the reason
    and the JSON path $.status, the engine's words; Complete is disabled. The pasted output
    replaced the skeleton; the field list stays beside the editor."""
    check(snap_compare, migrated_dsn, schema, SCREENS["complete-invalid"])


def test_complete_form_success(snap_compare: SnapCompare, migrated_dsn: str, schema: str) -> None:
    """The same form after a confirmed completion: "Completed: job 7 is completed", the row
    now completed, and the stored output text."""
    check(snap_compare, migrated_dsn, schema, SCREENS["complete-done"])


COMPLETE_OPEN = Screen("complete-open", app_options=(("initial_job", 7),), keys=("C",))


def test_complete_form_opens_with_its_rules(
    snap_compare: SnapCompare, migrated_dsn: str, schema: str
) -> None:
    """At 120x40 the form for waiting job 7 opens with the PaymentResult skeleton selected in
    the editor ("status": "paid", "reference": "", "amount_cents": 0), a green check, and
    beside it "Fields of PaymentResult": status string required, one of "paid", "refused";
    reference and amount_cents required. The footer offers f7 Select all and ctrl+l Clear."""
    app = prepare(migrated_dsn, schema, COMPLETE_OPEN)
    assert snap_compare(app, terminal_size=(120, 40), run_before=COMPLETE_OPEN.run_before)


def test_complete_form_at_80_columns(
    snap_compare: SnapCompare, migrated_dsn: str, schema: str
) -> None:
    """The same form at 80x24: the field list narrows to 26 columns beside the editor and
    still names every field; the form scrolls below the payload."""
    app = prepare(migrated_dsn, schema, COMPLETE_OPEN)
    assert snap_compare(app, terminal_size=(80, 24), run_before=COMPLETE_OPEN.run_before)


def test_kinds(snap_compare: SnapCompare, migrated_dsn: str, schema: str) -> None:
    """Every kind with display name, declared output type, schema tick, live counts, and the
    descriptor flag: legacy_export is stale. The selected kind's descriptor (its queue,
    webhooks, and "Args schema: published (n enqueues a job)") and schema below, with "Schema
    drift: no output of await_payment to check" and the window it read (completions, and the
    outputs kept by the newest failed, deferred and dead-lettered jobs); the footer offers n
    Enqueue…; no Extra section (a runtime's own queue and args schema are not extra)."""
    check(snap_compare, migrated_dsn, schema, SCREENS["kinds"])


ENQUEUE_INVALID = Screen(
    "enqueue-invalid",
    keys=("K", *"jjjjj", "n"),
    paste='{"image_id": 9, "width": "wide", "height": 480}',
)


def test_enqueue_form_refuses_args_by_path(
    snap_compare: SnapCompare, migrated_dsn: str, schema: str
) -> None:
    """At 120x40, n on Kinds' resize_image: queue images (the handler's, from the descriptor),
    priority 2 (1-4), run at empty; the pasted args in the editor with a red "✗ args $.width:
    expected integer, got string" (the published args schema's check: this console registers
    no handler), never the value typed; beside it "Fields of ResizeImage": image_id, width,
    height, integers, required. The Enqueue button is disabled."""
    app = prepare(migrated_dsn, schema, ENQUEUE_INVALID)
    assert snap_compare(app, terminal_size=(120, 40), run_before=ENQUEUE_INVALID.run_before)


def test_dlq(snap_compare: SnapCompare, migrated_dsn: str, schema: str) -> None:
    """The dead-letter queue: job 6 (charge_card) with its reason and time, and below it the
    last error and the note that its error entry kept an output."""
    check(snap_compare, migrated_dsn, schema, SCREENS["dlq"])


def test_queues(snap_compare: SnapCompare, migrated_dsn: str, schema: str) -> None:
    """Q, sorted by lag (the header says "by lag ▼ (s)", the footer offers s Sort): mail first,
    "paused" in yellow with 1 available job and a lag of 80m in red, the header says 1 paused;
    then the queues with no lag by name: default 1 retryable, reports 1 scheduled, webhooks 1
    waiting. No completions in the last hour (the seeded history is older), so the sparklines
    are dots. Below, the selected queue's (mail) detail: paused since 7m ago, 0 completed and 0
    failed in the last 5 min and hour."""
    check(snap_compare, migrated_dsn, schema, SCREENS["queues"])


def test_failure_groups(snap_compare: SnapCompare, migrated_dsn: str, schema: str) -> None:
    """G: three groups of one job each, signatures with numbers normalised to <n>:
    sync_inventory "RuntimeError: upstream timed out after <n> items" (retryable job 10),
    sync_inventory "RuntimeError: connection reset by warehouse eu-<n>" (failed job 5, whose
    second entry kept an output: marked), charge_card "TerminalError: card declined:
    insufficient_funds" (dead-lettered job 6, marked); the retryable group's detail below,
    its R key dimmed (nothing to retry), then "Kept outputs: 1 of 1 member kept one" with the
    window read (the newest 2,000 failed, retryable and dead-lettered jobs each) and its one
    shape {failed_skus, skipped, updated} with job 10's sample; the footer offers f."""
    check(snap_compare, migrated_dsn, schema, SCREENS["failure-groups"])


def test_timeline(snap_compare: SnapCompare, migrated_dsn: str, schema: str) -> None:
    """t on job 5 (sync_inventory, 3 attempts): three rows oldest first with ready, claimed and
    ended times (UTC, the pinned claims all read 07:56:00), the time each took and the runtime
    that claimed it (worker-b:977, worker-a:4242, worker-b:977); attempts 1 and 2 "retried" in
    yellow, attempt 3 "error" in red (its closure: the last error); each row's error in red,
    cut; below, attempt 1's runtime in full ("worker-b:977, started 07:10 (shop.tasks:tasks,
    awa-tui 0.1.0, runtime 2)") and its whole error "upstream timed out after 40 items"."""
    check(snap_compare, migrated_dsn, schema, SCREENS["timeline"])


def test_schedules(snap_compare: SnapCompare, migrated_dsn: str, schema: str) -> None:
    """Two periodic schedules by name: cleanup_tmp "every 15 min", next run in 10m, last tick
    5m ago, last job 12; daily-sales "0 6 * * 1-5" in Europe/Paris, next run in 1d19h, never
    ticked. Below, the selected schedule: its cadence in words, next run and last tick in full,
    and the rule for ticks missed while nothing ran."""
    check(snap_compare, migrated_dsn, schema, SCREENS["schedules"])


def test_read_only_banner(snap_compare: SnapCompare, migrated_dsn: str, schema: str) -> None:
    """The browser opened with --read-only: a READ-ONLY banner under the header, and no write
    keys (Retry, Cancel, Delete, All matching) in the footer."""
    check(snap_compare, migrated_dsn, schema, SCREENS["read-only"])


def test_empty_database(snap_compare: SnapCompare, migrated_dsn: str, schema: str) -> None:
    """A migrated schema with no jobs: every tab counts 0 and the status line says "No jobs"."""
    check(snap_compare, migrated_dsn, schema, SCREENS["empty"])


def test_audit(snap_compare: SnapCompare, migrated_dsn: str, schema: str) -> None:
    """The Audit screen (U) newest first: ana's manual completion of job 7 two minutes ago
    with its reason, the API's purge of job 10, ana's bulk retry (3 jobs matching
    state=failed kind=sync_inventory) and bo's pause of queue mail; the selected completion's
    detail below shows its output as 61 bytes and a sha256, never its text."""
    check(snap_compare, migrated_dsn, schema, SCREENS["audit"])


def test_failure_groups_split_by_field(
    snap_compare: SnapCompare, migrated_dsn: str, schema: str
) -> None:
    """G with five more timeouts: "upstream timed out after <n> items" is now the largest group
    (6 jobs: 1 retryable, 5 failed); below its detail, "Kept outputs: 6 of 6 members kept one"
    with the window read, one shape {failed_skus, skipped, updated} with job 17's sample, then
    after f three times (the schema's fields sorted: failed_skus, skipped, updated) "Split by
    updated": 4 jobs kept 40 (newest job 15) and 2 kept 80 (job 17); the footer offers f."""
    check(snap_compare, migrated_dsn, schema, SCREENS["failure-groups-split"])


def test_kinds_schema_drift(snap_compare: SnapCompare, migrated_dsn: str, schema: str) -> None:
    """K on send_email after job 2's stored receipt was rewritten (accepted a string, no
    provider): "Schema drift: 1 of 3 outputs do not fit the current schema", read from the
    latest 1,000 compact and 1,000 general-path completions and the outputs kept by the newest
    1,000 failed, deferred and dead-lettered jobs each; job 2 (compact) listed with
    $.accepted type (expected array, got string) and $.provider required, never the values."""
    check(snap_compare, migrated_dsn, schema, SCREENS["kinds-drift"])
