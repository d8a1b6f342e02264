-- v005: unique jobs and periodic schedules.
--
-- unique_keys: one row per job inserted with a unique key, for as long as the job exists.
-- `holding` says whether the job holds its (kind, unique_key) now: true from the insert while
-- the job is in one of its `states`, false once it ended in a state outside them. A partial
-- unique index lets at most one job per (kind, unique_key) hold it, so the database refuses a
-- second holder whatever the concurrency. The row stays (not holding) so an operator retry
-- can take the key back with the job's own states. Jobs move between tables (ready,
-- deferred, done, DLQ); this table is the one place their key lives, so no per-table index
-- has to agree with another. Jobs without a key never touch it.
--
-- periodic_schedules: the schedules clients declared (client.periodic), one row per name.
-- The maintenance leader enqueues each due tick and moves next_run_at on, in one transaction.
--
-- As v002 and v003 did: the installer is redefined without being run (the previous one kept
-- as awa.install_queue_storage_v004, the installer as of v004), and a targeted tail adds the
-- tables to every installed schema. CREATE TABLE IF NOT EXISTS touches no existing table, so
-- a re-run takes no lock.

CREATE FUNCTION awa.add_unique_and_periodic_v005(p_schema text) RETURNS void
LANGUAGE plpgsql AS $tail$
BEGIN
    EXECUTE replace($ddl$
    CREATE TABLE IF NOT EXISTS @S.unique_keys (
        job_id bigint PRIMARY KEY,
        kind text NOT NULL,
        unique_key text NOT NULL,
        states text[] NOT NULL,
        holding boolean NOT NULL DEFAULT true,
        created_at timestamptz NOT NULL DEFAULT now()
    );
    CREATE UNIQUE INDEX IF NOT EXISTS unique_keys_holder
        ON @S.unique_keys (kind, unique_key) WHERE holding;

    CREATE TABLE IF NOT EXISTS @S.periodic_schedules (
        name text PRIMARY KEY,
        kind text NOT NULL,
        queue text NOT NULL,
        args jsonb NOT NULL,
        priority smallint NOT NULL,
        max_attempts int NOT NULL,
        payload jsonb,
        cron text,
        every_seconds double precision,
        timezone text NOT NULL DEFAULT 'UTC',
        next_run_at timestamptz NOT NULL,
        last_tick_at timestamptz,
        last_job_id bigint,
        created_at timestamptz NOT NULL DEFAULT now(),
        updated_at timestamptz NOT NULL DEFAULT now(),
        CHECK ((cron IS NULL) <> (every_seconds IS NULL))
    );
    CREATE INDEX IF NOT EXISTS periodic_schedules_due ON @S.periodic_schedules (next_run_at);
    $ddl$, '@S', quote_ident(p_schema));
END
$tail$;

ALTER FUNCTION awa.install_queue_storage(text, int, int) RENAME TO install_queue_storage_v004;

CREATE FUNCTION awa.install_queue_storage(p_schema text, p_queue_slots int DEFAULT 8, p_claim_slots int DEFAULT 8)
RETURNS void LANGUAGE plpgsql AS $installer$
BEGIN
    PERFORM awa.install_queue_storage_v004(p_schema, p_queue_slots, p_claim_slots);
    PERFORM awa.add_unique_and_periodic_v005(p_schema);
END
$installer$;

SELECT awa.add_unique_and_periodic_v005(s) FROM awa.queue_storage_schemas() AS s;
