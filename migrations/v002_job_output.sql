-- v002: retained job output (ADR-048's v052).
--
-- 1. The installer is redefined without being run: the v001 body is kept under a versioned
--    name and the new installer calls it, then the output tail, so fresh installs get the
--    output columns.
-- 2. A targeted tail updates every schema awa.queue_storage_schemas() finds. It does not
--    replay the installer. Each change is guarded by a catalog check, so a re-run takes no
--    lock; terminal_jobs is locked before its tables (the order readers take them); when no
--    lock_timeout is set, 2 s is used and the previous value restored.

ALTER FUNCTION awa.install_queue_storage(text, int, int) RENAME TO install_queue_storage_v001;

CREATE FUNCTION awa.add_job_output_v002(p_schema text) RETURNS void
LANGUAGE plpgsql AS $tail$
DECLARE
    s text := quote_ident(p_schema);
    previous_timeout text := current_setting('lock_timeout');
    has_batch_outputs boolean;
    has_done_output boolean;
    has_view_output boolean;
BEGIN
    SELECT EXISTS (SELECT 1 FROM pg_attribute
                    WHERE attrelid = format('%s.receipt_completion_batches', s)::regclass
                      AND attname = 'outputs' AND NOT attisdropped)
      INTO has_batch_outputs;
    SELECT EXISTS (SELECT 1 FROM pg_attribute
                    WHERE attrelid = format('%s.done_entries', s)::regclass
                      AND attname = 'output' AND NOT attisdropped)
      INTO has_done_output;
    SELECT EXISTS (SELECT 1 FROM pg_attribute
                    WHERE attrelid = format('%s.terminal_jobs', s)::regclass
                      AND attname = 'output' AND NOT attisdropped)
      INTO has_view_output;
    IF has_batch_outputs AND has_done_output AND has_view_output THEN
        RETURN;  -- already applied: touch nothing, lock nothing
    END IF;

    IF previous_timeout IN ('0', '0ms') THEN
        PERFORM set_config('lock_timeout', '2s', true);
    END IF;

    -- Readers lock terminal_jobs and then its tables; take them in the same order.
    EXECUTE format('LOCK TABLE %s.terminal_jobs IN ACCESS EXCLUSIVE MODE', s);

    IF NOT has_batch_outputs THEN
        EXECUTE format('ALTER TABLE %s.receipt_completion_batches ADD COLUMN outputs json[]', s);
        EXECUTE format(
            'ALTER TABLE %s.receipt_completion_batches ADD CONSTRAINT receipt_completion_batches_outputs_aligned '
            'CHECK (outputs IS NULL OR cardinality(outputs) = completed_count) NOT VALID', s);
    END IF;
    IF NOT has_done_output THEN
        EXECUTE format('ALTER TABLE %s.done_entries ADD COLUMN output json', s);
    END IF;

    -- CREATE OR REPLACE VIEW may only append columns, which is what this does.
    EXECUTE replace($view$
    CREATE OR REPLACE VIEW @S.terminal_jobs AS
    SELECT r.job_id, r.kind, r.queue, r.args, r.priority, d.attempt, r.run_lease, r.max_attempts,
           r.run_at, r.created_at, d.finalized_at, d.state, r.unique_key,
           COALESCE(d.payload, r.payload) AS payload, 'general'::text AS path,
           d.output
      FROM @S.done_entries d
      JOIN @S.ready_entries r ON r.job_id = d.job_id AND r.run_lease = d.run_lease
    UNION ALL
    SELECT r.job_id, r.kind, r.queue, r.args, r.priority, b.attempts[item.ord]::int, r.run_lease,
           r.max_attempts, r.run_at, r.created_at, b.finalized_at, 'completed'::text, r.unique_key,
           NULL::jsonb, 'compact'::text,
           b.outputs[item.ord]
      FROM @S.receipt_completion_batches b
     CROSS JOIN LATERAL unnest(b.job_ids, b.run_leases) WITH ORDINALITY AS item(job_id, run_lease, ord)
      JOIN @S.ready_entries r ON r.job_id = item.job_id AND r.run_lease = item.run_lease
     WHERE NOT EXISTS (
            SELECT 1 FROM @S.receipt_completion_tombstones t
             WHERE t.job_id = item.job_id AND t.run_lease = item.run_lease)
    $view$, '@S', s);

    PERFORM set_config('lock_timeout', previous_timeout, true);
END
$tail$;

CREATE FUNCTION awa.install_queue_storage(p_schema text, p_queue_slots int DEFAULT 8, p_claim_slots int DEFAULT 8)
RETURNS void LANGUAGE plpgsql AS $installer$
BEGIN
    PERFORM awa.install_queue_storage_v001(p_schema, p_queue_slots, p_claim_slots);
    PERFORM awa.add_job_output_v002(p_schema);
END
$installer$;

DO $descriptor$
BEGIN
    IF NOT EXISTS (SELECT 1 FROM pg_attribute
                    WHERE attrelid = 'awa.job_kind_descriptors'::regclass
                      AND attname = 'output' AND NOT attisdropped) THEN
        ALTER TABLE awa.job_kind_descriptors
            ADD COLUMN output jsonb CHECK (output IS NULL OR octet_length(output::text) <= 65536);
    END IF;
END
$descriptor$;

SELECT awa.add_job_output_v002(schema_name) FROM awa.queue_storage_schemas() AS schema_name;
