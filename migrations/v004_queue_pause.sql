-- v004: queue pause, and the time indexes the queue summaries read.
--
-- 1. queue_settings gains `paused` and `paused_at`. The claim skips a lane whose queue is
--    paused (storage/claim.py), so every runtime on the schema honours a pause at its next
--    claim; running attempts finish, inserts still land.
-- 2. receipt_completion_batches and done_entries gain an index on finalized_at, so
--    `list_queues()` reads the last hour of completions by time, never the whole history (the
--    batches' index carries queue and count: an index-only scan).
--
-- The installer is redefined without being run, as v002 and v003 did: the v003 installer is
-- kept under a versioned name and the new one calls it, then this tail. The tail is guarded by
-- catalog checks, so a re-run takes no lock; when no lock_timeout is set, 2 s is used and the
-- previous value restored. Building the indexes on a large existing history blocks writes to
-- those tables while it runs (CREATE INDEX CONCURRENTLY cannot run inside the migration's
-- transaction); run the migration at a quiet moment on a big schema.

ALTER FUNCTION awa.install_queue_storage(text, int, int) RENAME TO install_queue_storage_v003;

CREATE FUNCTION awa.add_queue_pause_v004(p_schema text) RETURNS void
LANGUAGE plpgsql AS $tail$
DECLARE
    s text := quote_ident(p_schema);
    previous_timeout text := current_setting('lock_timeout');
    has_paused boolean;
BEGIN
    SELECT EXISTS (SELECT 1 FROM pg_attribute
                    WHERE attrelid = format('%s.queue_settings', s)::regclass
                      AND attname = 'paused' AND NOT attisdropped)
      INTO has_paused;
    IF has_paused
       AND to_regclass(format('%s.done_entries_finalized_at_idx', s)) IS NOT NULL
       AND to_regclass(format('%s.receipt_completion_batches_finalized_at_idx', s)) IS NOT NULL THEN
        RETURN;  -- already applied: touch nothing, lock nothing
    END IF;

    IF previous_timeout IN ('0', '0ms') THEN
        PERFORM set_config('lock_timeout', '2s', true);
    END IF;

    IF NOT has_paused THEN
        EXECUTE format('ALTER TABLE %s.queue_settings '
                       'ADD COLUMN paused boolean NOT NULL DEFAULT false, '
                       'ADD COLUMN paused_at timestamptz', s);
    END IF;
    EXECUTE format('CREATE INDEX IF NOT EXISTS done_entries_finalized_at_idx '
                   'ON %s.done_entries (finalized_at)', s);
    EXECUTE format('CREATE INDEX IF NOT EXISTS receipt_completion_batches_finalized_at_idx '
                   'ON %s.receipt_completion_batches (finalized_at) INCLUDE (queue, completed_count)', s);

    PERFORM set_config('lock_timeout', previous_timeout, true);
END
$tail$;

CREATE FUNCTION awa.install_queue_storage(p_schema text, p_queue_slots int DEFAULT 8, p_claim_slots int DEFAULT 8)
RETURNS void LANGUAGE plpgsql AS $installer$
BEGIN
    PERFORM awa.install_queue_storage_v003(p_schema, p_queue_slots, p_claim_slots);
    PERFORM awa.add_queue_pause_v004(p_schema);
END
$installer$;

SELECT awa.add_queue_pause_v004(schema_name) FROM awa.queue_storage_schemas() AS schema_name;
