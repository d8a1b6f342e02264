-- v003: one name rule for queue-storage schemas, the same as storage/names.py.
--
-- A schema name is a lower-case unquoted identifier ([a-z_][a-z0-9_]*, the whole string: no
-- trailing newline), does not start with pg_ (reserved by PostgreSQL), and is at most 50
-- bytes, so that the longest name derived from it still fits PostgreSQL's 63-byte identifiers:
-- the notification channel 'awa_callback_' || schema (13 + 50 = 63; 'awa_cancel_' is shorter).
-- Longer names made every pg_notify fail ("channel name too long") and, past 63, were
-- truncated, so two names opened one schema. Nothing else derived grows with the name:
-- sequences and partitions live inside the schema, advisory locks use hashtext(schema).
--
-- The installer is redefined without being run, as v002 did: the v002 installer is kept under
-- a versioned name and the new one checks the name first. Schemas already installed are left
-- as they are.

CREATE FUNCTION awa.check_queue_storage_schema_name(p_schema text) RETURNS void
LANGUAGE plpgsql IMMUTABLE AS $check$
BEGIN
    -- to_json renders the name with control characters escaped ("a\n"), never raw.
    IF p_schema IS NULL OR p_schema !~ '^[a-z_][a-z0-9_]*$' THEN
        RAISE EXCEPTION 'queue-storage schema name % is not allowed: use lower-case letters, digits and underscores, starting with a letter or an underscore', coalesce(to_json(p_schema)::text, 'NULL')
            USING ERRCODE = '22023';
    END IF;
    IF octet_length(p_schema) > 50 THEN
        RAISE EXCEPTION 'queue-storage schema name % is % characters long; at most 50 are allowed, so that its notification channels (awa_callback_<schema>) fit PostgreSQL''s 63-byte names', to_json(p_schema)::text, octet_length(p_schema)
            USING ERRCODE = '22023';
    END IF;
    IF p_schema LIKE 'pg\_%' THEN
        RAISE EXCEPTION 'queue-storage schema name % is not allowed: PostgreSQL reserves names starting with pg_', to_json(p_schema)::text
            USING ERRCODE = '22023';
    END IF;
END
$check$;

ALTER FUNCTION awa.install_queue_storage(text, int, int) RENAME TO install_queue_storage_v002;

CREATE FUNCTION awa.install_queue_storage(p_schema text, p_queue_slots int DEFAULT 8, p_claim_slots int DEFAULT 8)
RETURNS void LANGUAGE plpgsql AS $installer$
BEGIN
    PERFORM awa.check_queue_storage_schema_name(p_schema);
    PERFORM awa.install_queue_storage_v002(p_schema, p_queue_slots, p_claim_slots);
END
$installer$;
