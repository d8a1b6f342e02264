-- v011: deferred_jobs (scheduled and retryable jobs) indexed by (queue, state).
--
-- The queue summaries (storage.read.queues: the Queues screen, GET /api/queues and every
-- /metrics scrape) count each queue's scheduled and retryable jobs. Without this index that
-- count was a scan of every deferred job, grouped (100,000 scheduled jobs: about 20 ms of each
-- scrape); with it, each queue and state reads at most the count cap of index entries, as the
-- available count does, and the queues that hold deferred jobs are found by a skip scan. The
-- entry costs a deferred insert (a scheduled job, a retry) 16 B in one more index.
--
-- As v007 did: the installer is redefined without being run (the previous one kept as
-- awa.install_queue_storage_v010), and a catalog-guarded tail adds the index in every
-- installed schema, so a re-run takes no lock; when no lock_timeout is set, 2 s is used and the
-- previous value restored. Building the index blocks writes to deferred_jobs while it runs
-- (CREATE INDEX CONCURRENTLY cannot run inside the migration's transaction). A reader of an
-- earlier release works with or without it.

CREATE FUNCTION awa.index_deferred_by_queue_v011(p_schema text) RETURNS void
LANGUAGE plpgsql AS $tail$
DECLARE
    s text := quote_ident(p_schema);
    previous_timeout text := current_setting('lock_timeout');
BEGIN
    IF to_regclass(format('%s.deferred_jobs_queue_state_idx', s)) IS NOT NULL THEN
        RETURN;  -- already applied: touch nothing, lock nothing
    END IF;
    IF previous_timeout IN ('0', '0ms') THEN
        PERFORM set_config('lock_timeout', '2s', true);
    END IF;
    EXECUTE format('CREATE INDEX IF NOT EXISTS deferred_jobs_queue_state_idx '
                   'ON %s.deferred_jobs (queue, state)', s);
    PERFORM set_config('lock_timeout', previous_timeout, true);
END
$tail$;

ALTER FUNCTION awa.install_queue_storage(text, int, int) RENAME TO install_queue_storage_v010;

CREATE FUNCTION awa.install_queue_storage(p_schema text, p_queue_slots int DEFAULT 8, p_claim_slots int DEFAULT 8)
RETURNS void LANGUAGE plpgsql AS $installer$
BEGIN
    PERFORM awa.install_queue_storage_v010(p_schema, p_queue_slots, p_claim_slots);
    PERFORM awa.index_deferred_by_queue_v011(p_schema);
END
$installer$;

SELECT awa.index_deferred_by_queue_v011(s) FROM awa.queue_storage_schemas() AS s;
