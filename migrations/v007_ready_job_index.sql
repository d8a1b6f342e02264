-- v007: ready_entries is indexed by job_id alone, not by (job_id, run_lease).
--
-- Every ready row writes one entry in each of its two indexes, and those entries were half of
-- an enqueue's WAL. The (job_id, run_lease) entry is 24 bytes; a job_id entry is 16 (index
-- tuples are padded to 8 bytes, so even an int4 run_lease would not fit in the 16), which
-- saves 8 B of WAL per job (9.5 with the pages that hold them). Every reader still finds a
-- row by job_id through the index and checks run_lease on the row: a job has one ready row
-- per attempt that went back to ready (a retry, a DLQ retry), a handful at most, so the extra
-- rows read are few and in the same pages.
--
-- As v006 did: the installer is redefined without being run (the previous one kept as
-- awa.install_queue_storage_v006), and a catalog-guarded tail swaps the index in every
-- installed schema (the new one built before the old one is dropped), so a re-run takes no
-- lock; when no lock_timeout is set, 2 s is used and the previous value restored. Building
-- the index on a large history blocks writes to ready_entries while it runs (CREATE INDEX
-- CONCURRENTLY cannot run inside the migration's transaction); run the migration at a quiet
-- moment on a big schema. A runtime of an earlier release works on either index.

CREATE FUNCTION awa.index_ready_by_job_v007(p_schema text) RETURNS void
LANGUAGE plpgsql AS $tail$
DECLARE
    s text := quote_ident(p_schema);
    previous_timeout text := current_setting('lock_timeout');
BEGIN
    IF to_regclass(format('%s.ready_entries_job_id_idx', s)) IS NOT NULL
       AND to_regclass(format('%s.ready_entries_job_id_run_lease_idx', s)) IS NULL THEN
        RETURN;  -- already applied: touch nothing, lock nothing
    END IF;
    IF previous_timeout IN ('0', '0ms') THEN
        PERFORM set_config('lock_timeout', '2s', true);
    END IF;
    EXECUTE format('CREATE INDEX IF NOT EXISTS ready_entries_job_id_idx '
                   'ON %s.ready_entries (job_id)', s);
    EXECUTE format('DROP INDEX IF EXISTS %s.ready_entries_job_id_run_lease_idx', s);
    PERFORM set_config('lock_timeout', previous_timeout, true);
END
$tail$;

ALTER FUNCTION awa.install_queue_storage(text, int, int) RENAME TO install_queue_storage_v006;

CREATE FUNCTION awa.install_queue_storage(p_schema text, p_queue_slots int DEFAULT 8, p_claim_slots int DEFAULT 8)
RETURNS void LANGUAGE plpgsql AS $installer$
BEGIN
    PERFORM awa.install_queue_storage_v006(p_schema, p_queue_slots, p_claim_slots);
    PERFORM awa.index_ready_by_job_v007(p_schema);
END
$installer$;

SELECT awa.index_ready_by_job_v007(s) FROM awa.queue_storage_schemas() AS s;
