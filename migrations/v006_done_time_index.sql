-- v006: an index on done_entries (state, finalized_at, job_id) for the job browser.
--
-- The browser's time filter (`since:` / `before:`), its sort by finish time and the tab
-- counts under a time filter read failed, cancelled and general-path completed jobs by state
-- and finish time. v004's index on finalized_at alone holds every state: a walk of it for the
-- failed jobs of a window reads every completed job of that window too, so the cost grew with
-- how rare the state is (a full scan for a state with no jobs). With the state first, each
-- read is one range of the state's own entries, in (finalized_at, job_id) order, which is also
-- the keyset order of a page sorted by finish time. Compact completions need nothing new
-- (v004 indexed their batches' finalized_at), nor does the DLQ (dlq_at is indexed since v001).
--
-- A runtime ahead of this migration works on a schema without the index, only slower there.
-- As v004 did: the installer is redefined without being run (the previous one kept as
-- awa.install_queue_storage_v005), and a catalog-guarded tail adds the index to every
-- installed schema, so a re-run takes no lock; when no lock_timeout is set, 2 s is used and
-- the previous value restored. Building the index on a large history blocks writes to
-- done_entries while it runs (CREATE INDEX CONCURRENTLY cannot run inside the migration's
-- transaction); run the migration at a quiet moment on a big schema.

CREATE FUNCTION awa.add_done_time_index_v006(p_schema text) RETURNS void
LANGUAGE plpgsql AS $tail$
DECLARE
    s text := quote_ident(p_schema);
    previous_timeout text := current_setting('lock_timeout');
BEGIN
    IF to_regclass(format('%s.done_entries_state_finalized_at_idx', s)) IS NOT NULL THEN
        RETURN;  -- already applied: touch nothing, lock nothing
    END IF;
    IF previous_timeout IN ('0', '0ms') THEN
        PERFORM set_config('lock_timeout', '2s', true);
    END IF;
    EXECUTE format('CREATE INDEX IF NOT EXISTS done_entries_state_finalized_at_idx '
                   'ON %s.done_entries (state, finalized_at, job_id)', s);
    PERFORM set_config('lock_timeout', previous_timeout, true);
END
$tail$;

ALTER FUNCTION awa.install_queue_storage(text, int, int) RENAME TO install_queue_storage_v005;

CREATE FUNCTION awa.install_queue_storage(p_schema text, p_queue_slots int DEFAULT 8, p_claim_slots int DEFAULT 8)
RETURNS void LANGUAGE plpgsql AS $installer$
BEGIN
    PERFORM awa.install_queue_storage_v005(p_schema, p_queue_slots, p_claim_slots);
    PERFORM awa.add_done_time_index_v006(p_schema);
END
$installer$;

SELECT awa.add_done_time_index_v006(s) FROM awa.queue_storage_schemas() AS s;
