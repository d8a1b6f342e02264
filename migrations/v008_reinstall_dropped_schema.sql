-- v008: a queue-storage schema dropped by hand (DROP SCHEMA ... CASCADE) can be installed again.
--
-- Its row in awa.queue_storage_registry outlived it: the installer took the schema for
-- installed and returned at once (nothing was created, and the later installers' steps then
-- failed on the missing tables), and every later migration's tail, run on each registered
-- schema, would fail on it too. A schema counts as installed while its ring_state table
-- exists. As v007 did, the installer is redefined (the previous one kept as
-- awa.install_queue_storage_v007): it forgets a registered schema that is gone, then installs.
-- awa.queue_storage_schemas() lists only schemas that still exist (the previous one kept as
-- awa.queue_storage_schemas_v001), so a later tail passes over a dropped one; and the rows of
-- schemas dropped before this migration are forgotten now. Nothing else is touched.

CREATE FUNCTION awa.queue_storage_exists_v008(p_schema text) RETURNS boolean
LANGUAGE sql STABLE AS $$
    SELECT to_regclass(quote_ident(p_schema) || '.ring_state') IS NOT NULL
$$;

ALTER FUNCTION awa.queue_storage_schemas() RENAME TO queue_storage_schemas_v001;

CREATE FUNCTION awa.queue_storage_schemas() RETURNS SETOF text
LANGUAGE sql STABLE AS $$
    SELECT s FROM awa.queue_storage_schemas_v001() AS s WHERE awa.queue_storage_exists_v008(s)
$$;

ALTER FUNCTION awa.install_queue_storage(text, int, int) RENAME TO install_queue_storage_v007;

CREATE FUNCTION awa.install_queue_storage(p_schema text, p_queue_slots int DEFAULT 8, p_claim_slots int DEFAULT 8)
RETURNS void LANGUAGE plpgsql AS $installer$
BEGIN
    DELETE FROM awa.queue_storage_registry
     WHERE schema_name = p_schema AND NOT awa.queue_storage_exists_v008(p_schema);
    PERFORM awa.install_queue_storage_v007(p_schema, p_queue_slots, p_claim_slots);
END
$installer$;

DELETE FROM awa.queue_storage_registry WHERE NOT awa.queue_storage_exists_v008(schema_name);
