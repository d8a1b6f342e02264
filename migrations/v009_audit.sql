-- v009: the audit trail, an append-only table of operator writes in each queue-storage schema.
--
-- Every operator write (retry, cancel, delete, DLQ retry and purge, queue pause and resume,
-- an external callback completion, failure, retry or heartbeat, a bulk action, an
-- edit-and-retry) inserts one row here in the same transaction as the write it records
-- (storage/ops/audit.py), so a write that rolls back leaves none. A row holds who (actor),
-- when (at), what (action, job_ids or the bulk filter as text with its count, queue) and why
-- (reason); a manual completion adds its output's size and sha256, never its text; an
-- edit-and-retry keeps the job's original args (the only args stored here). A trigger refuses
-- every UPDATE except a bulk entry's count growing (each job of a bulk action adds one in its
-- own transaction); rows are deleted only by maintenance, past its audit retention.
--
-- As v004 did: the installer is redefined without being run (the previous one kept as
-- awa.install_queue_storage_v008), and a catalog-guarded tail adds the table to every
-- installed schema, so a re-run takes no lock.

CREATE FUNCTION awa.audit_append_only_v009() RETURNS trigger
LANGUAGE plpgsql AS $fn$
BEGIN
    IF TG_OP = 'UPDATE'
       AND (NEW.id, NEW.at, NEW.actor, NEW.action, NEW.job_ids, NEW.filter, NEW.queue,
            NEW.reason, NEW.output_size, NEW.output_sha256, NEW.original_args)
           IS NOT DISTINCT FROM
           (OLD.id, OLD.at, OLD.actor, OLD.action, OLD.job_ids, OLD.filter, OLD.queue,
            OLD.reason, OLD.output_size, OLD.output_sha256, OLD.original_args)
       AND NEW.count >= OLD.count THEN
        RETURN NEW;
    END IF;
    RAISE EXCEPTION 'the audit trail is append-only' USING ERRCODE = 'insufficient_privilege';
END
$fn$;

CREATE FUNCTION awa.add_audit_v009(p_schema text) RETURNS void
LANGUAGE plpgsql AS $tail$
DECLARE
    s text := quote_ident(p_schema);
BEGIN
    IF to_regclass(format('%s.audit_log', s)) IS NOT NULL THEN
        RETURN;  -- already applied: touch nothing, lock nothing
    END IF;
    EXECUTE format('CREATE TABLE %s.audit_log ('
                   'id bigint GENERATED ALWAYS AS IDENTITY PRIMARY KEY, '
                   'at timestamptz NOT NULL DEFAULT clock_timestamp(), '
                   'actor text NOT NULL, '
                   'action text NOT NULL, '
                   'job_ids bigint[] NOT NULL DEFAULT ''{}'', '
                   'filter text, '
                   'count bigint NOT NULL DEFAULT 1, '
                   'queue text, '
                   'reason text, '
                   'output_size bigint, '
                   'output_sha256 text, '
                   'original_args jsonb)', s);
    EXECUTE format('CREATE INDEX audit_log_at_idx ON %s.audit_log (at)', s);
    EXECUTE format('CREATE INDEX audit_log_job_ids_idx ON %s.audit_log USING gin (job_ids)', s);
    EXECUTE format('CREATE TRIGGER audit_log_append_only BEFORE UPDATE ON %s.audit_log '
                   'FOR EACH ROW EXECUTE FUNCTION awa.audit_append_only_v009()', s);
END
$tail$;

ALTER FUNCTION awa.install_queue_storage(text, int, int) RENAME TO install_queue_storage_v008;

CREATE FUNCTION awa.install_queue_storage(p_schema text, p_queue_slots int DEFAULT 8, p_claim_slots int DEFAULT 8)
RETURNS void LANGUAGE plpgsql AS $installer$
BEGIN
    PERFORM awa.install_queue_storage_v008(p_schema, p_queue_slots, p_claim_slots);
    PERFORM awa.add_audit_v009(p_schema);
END
$installer$;

SELECT awa.add_audit_v009(schema_name) FROM awa.queue_storage_schemas() AS schema_name;
