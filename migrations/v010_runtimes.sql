-- v010: a runtime registry, and the runtime that took each claim batch.
--
-- 1. `runtimes` in each queue-storage schema: one row per runtime start (storage.runtime
--    .registry), written once, in one statement, before the runtime's first claim: the host,
--    the process id, when it started, the name its command gave (`awa-tui worker` gives its
--    module:tasks target) and the awa-tui version. A client that is not a runtime (the
--    console, the HTTP server) registers nothing.
-- 2. `claim_batches.runtime_id`, nullable: the claim statement writes it with the rest of the
--    batch row (no extra round trip), so it costs a few bytes per batch, not per job. NULL for
--    batches claimed before this migration, or by a runtime of an earlier release.
--
-- No foreign key: claim batches are TRUNCATEd by ring prune, and a key would make every claim
-- probe the registry. Maintenance deletes the registry rows no claim batch references any
-- more once they are older than its retention (storage.ops.runtimes), at most once per claim
-- rotation interval: `maintenance_state.runtimes_pruned_at` says when it last did.
--
-- As v009 did: the installer is redefined without being run (the previous one kept as
-- awa.install_queue_storage_v009), and a catalog-guarded tail changes every installed schema,
-- so a re-run takes no lock; when no lock_timeout is set, 2 s is used and the previous value
-- restored. Adding a nullable column without a default rewrites nothing.

CREATE FUNCTION awa.add_runtimes_v010(p_schema text) RETURNS void
LANGUAGE plpgsql AS $tail$
DECLARE
    s text := quote_ident(p_schema);
    previous_timeout text := current_setting('lock_timeout');
    has_runtime_id boolean;
    has_pruned_at boolean;
BEGIN
    SELECT EXISTS (SELECT 1 FROM pg_attribute
                    WHERE attrelid = format('%s.claim_batches', s)::regclass
                      AND attname = 'runtime_id' AND NOT attisdropped)
      INTO has_runtime_id;
    SELECT EXISTS (SELECT 1 FROM pg_attribute
                    WHERE attrelid = format('%s.maintenance_state', s)::regclass
                      AND attname = 'runtimes_pruned_at' AND NOT attisdropped)
      INTO has_pruned_at;
    IF has_runtime_id AND has_pruned_at AND to_regclass(format('%s.runtimes', s)) IS NOT NULL THEN
        RETURN;  -- already applied: touch nothing, lock nothing
    END IF;

    IF previous_timeout IN ('0', '0ms') THEN
        PERFORM set_config('lock_timeout', '2s', true);
    END IF;

    EXECUTE format('CREATE TABLE IF NOT EXISTS %s.runtimes ('
                   'id bigint GENERATED ALWAYS AS IDENTITY PRIMARY KEY, '
                   'host text NOT NULL, '
                   'pid int NOT NULL, '
                   'started_at timestamptz NOT NULL DEFAULT now(), '
                   'name text, '
                   'version text)', s);
    EXECUTE format('CREATE INDEX IF NOT EXISTS runtimes_started_at_idx ON %s.runtimes (started_at)', s);
    IF NOT has_runtime_id THEN
        EXECUTE format('ALTER TABLE %s.claim_batches ADD COLUMN runtime_id bigint', s);
    END IF;
    IF NOT has_pruned_at THEN
        EXECUTE format('ALTER TABLE %s.maintenance_state ADD COLUMN runtimes_pruned_at timestamptz', s);
    END IF;

    PERFORM set_config('lock_timeout', previous_timeout, true);
END
$tail$;

ALTER FUNCTION awa.install_queue_storage(text, int, int) RENAME TO install_queue_storage_v009;

CREATE FUNCTION awa.install_queue_storage(p_schema text, p_queue_slots int DEFAULT 8, p_claim_slots int DEFAULT 8)
RETURNS void LANGUAGE plpgsql AS $installer$
BEGIN
    PERFORM awa.install_queue_storage_v009(p_schema, p_queue_slots, p_claim_slots);
    PERFORM awa.add_runtimes_v010(p_schema);
END
$installer$;

SELECT awa.add_runtimes_v010(schema_name) FROM awa.queue_storage_schemas() AS schema_name;
