-- v001: control schema `awa`, the queue-storage installer and the default queue-storage schema.
--
-- A queue-storage schema holds its hot tables LIST-partitioned into ring slots
-- (`slot` column). Slots are reclaimed by TRUNCATE of a whole sealed slot, never by DELETE.
-- The installer is written once with the placeholder @S (the quoted schema name) and run with
-- EXECUTE, so every queue-storage schema gets exactly the same shape.

CREATE SCHEMA IF NOT EXISTS awa;

CREATE TABLE awa.queue_storage_registry (
    schema_name text PRIMARY KEY,
    queue_slots int NOT NULL,
    claim_slots int NOT NULL,
    installed_at timestamptz NOT NULL DEFAULT now()
);

CREATE FUNCTION awa.queue_storage_schemas() RETURNS SETOF text
LANGUAGE sql STABLE AS $$
    SELECT schema_name FROM awa.queue_storage_registry ORDER BY schema_name
$$;

CREATE TABLE awa.job_kind_descriptors (
    kind text PRIMARY KEY,
    display_name text,
    description text,
    owner text,
    docs_url text,
    tags text[] NOT NULL DEFAULT '{}',
    extra jsonb NOT NULL DEFAULT '{}',
    descriptor_hash text NOT NULL,
    sync_interval_seconds int NOT NULL DEFAULT 60,
    created_at timestamptz NOT NULL DEFAULT now(),
    updated_at timestamptz NOT NULL DEFAULT now(),
    last_seen_at timestamptz NOT NULL DEFAULT now()
);

CREATE FUNCTION awa.install_queue_storage(p_schema text, p_queue_slots int DEFAULT 8, p_claim_slots int DEFAULT 8)
RETURNS void LANGUAGE plpgsql AS $installer$
DECLARE
    s text;
    ddl text;
    i int;
BEGIN
    IF p_schema !~ '^[a-z_][a-z0-9_]*$' THEN
        RAISE EXCEPTION 'invalid queue-storage schema name %', p_schema USING ERRCODE = '22023';
    END IF;
    IF p_queue_slots < 3 OR p_claim_slots < 3 THEN
        RAISE EXCEPTION 'a ring needs at least 3 slots' USING ERRCODE = '22023';
    END IF;
    IF EXISTS (SELECT 1 FROM awa.queue_storage_registry WHERE schema_name = p_schema) THEN
        RETURN;  -- already installed
    END IF;
    s := quote_ident(p_schema);
    ddl := $ddl$
    CREATE SCHEMA IF NOT EXISTS @S;

    CREATE TABLE @S.ring_state (
        ring text PRIMARY KEY,
        slot_count int NOT NULL,
        current_slot int NOT NULL DEFAULT 0,
        generation bigint NOT NULL DEFAULT 0,
        rotated_at timestamptz NOT NULL DEFAULT now()
    );

    CREATE TABLE @S.queue_lanes (
        queue text NOT NULL,
        priority smallint NOT NULL,
        next_seq bigint NOT NULL DEFAULT 0,
        claim_seq bigint NOT NULL DEFAULT 0,
        PRIMARY KEY (queue, priority)
    );

    CREATE SEQUENCE @S.job_id_seq;
    CREATE SEQUENCE @S.claim_id_seq;

    CREATE TABLE @S.ready_entries (
        slot int NOT NULL,
        job_id bigint NOT NULL,
        kind text NOT NULL,
        queue text NOT NULL,
        args jsonb NOT NULL,
        priority smallint NOT NULL,
        attempt int NOT NULL,
        run_lease bigint NOT NULL,
        max_attempts int NOT NULL,
        lane_seq bigint,
        run_at timestamptz NOT NULL,
        attempted_at timestamptz,
        created_at timestamptz NOT NULL,
        unique_key text,
        payload jsonb
    ) PARTITION BY LIST (slot);
    CREATE INDEX ON @S.ready_entries (job_id, run_lease);
    CREATE INDEX ON @S.ready_entries (queue, priority, lane_seq);

    CREATE TABLE @S.deferred_jobs (
        job_id bigint PRIMARY KEY,
        state text NOT NULL CHECK (state IN ('scheduled', 'retryable')),
        kind text NOT NULL,
        queue text NOT NULL,
        args jsonb NOT NULL,
        priority smallint NOT NULL,
        attempt int NOT NULL,
        run_lease bigint NOT NULL,
        max_attempts int NOT NULL,
        run_at timestamptz NOT NULL,
        attempted_at timestamptz,
        created_at timestamptz NOT NULL,
        unique_key text,
        payload jsonb
    );
    CREATE INDEX ON @S.deferred_jobs (run_at);

    CREATE TABLE @S.claim_batches (
        slot int NOT NULL,
        claim_id bigint NOT NULL,
        queue text NOT NULL,
        priority smallint NOT NULL,
        lane_lo bigint NOT NULL,
        lane_hi bigint NOT NULL,
        job_ids bigint[] NOT NULL,
        run_leases bigint[] NOT NULL,
        lane_seqs bigint[] NOT NULL,
        attempts int[] NOT NULL,
        claimed_at timestamptz NOT NULL,
        deadline_at timestamptz NOT NULL
    ) PARTITION BY LIST (slot);
    CREATE INDEX ON @S.claim_batches (claim_id);
    CREATE INDEX ON @S.claim_batches (queue, priority, lane_hi);

    CREATE TABLE @S.attempt_closures (
        slot int NOT NULL,
        job_id bigint NOT NULL,
        run_lease bigint NOT NULL,
        claim_id bigint NOT NULL,
        outcome text NOT NULL,
        closed_at timestamptz NOT NULL
    ) PARTITION BY LIST (slot);
    CREATE INDEX ON @S.attempt_closures (job_id, run_lease);
    CREATE INDEX ON @S.attempt_closures (claim_id);

    CREATE TABLE @S.attempt_state (
        job_id bigint NOT NULL,
        run_lease bigint NOT NULL,
        claim_id bigint NOT NULL,
        state text NOT NULL DEFAULT 'running' CHECK (state IN ('running', 'waiting_external')),
        heartbeat_at timestamptz,
        progress jsonb,
        callback_id text UNIQUE,
        callback_timeout_at timestamptz,
        callback_result jsonb,
        callback_resolved boolean NOT NULL DEFAULT false,
        PRIMARY KEY (job_id, run_lease)
    );
    CREATE INDEX ON @S.attempt_state (callback_timeout_at) WHERE state = 'waiting_external';

    CREATE TABLE @S.receipt_completion_batches (
        slot int NOT NULL,
        batch_id bigint GENERATED ALWAYS AS IDENTITY,
        claim_id bigint NOT NULL,
        queue text NOT NULL,
        priority smallint NOT NULL,
        claim_lane_lo bigint NOT NULL,
        claim_lane_hi bigint NOT NULL,
        min_job_id bigint NOT NULL,
        max_job_id bigint NOT NULL,
        job_ids bigint[] NOT NULL,
        run_leases bigint[] NOT NULL,
        lane_seqs bigint[] NOT NULL,
        attempts int[] NOT NULL,
        completed_count int NOT NULL,
        finalized_at timestamptz NOT NULL
    ) PARTITION BY LIST (slot);
    CREATE INDEX ON @S.receipt_completion_batches (claim_id);
    CREATE INDEX ON @S.receipt_completion_batches (queue, priority, claim_lane_hi);
    CREATE INDEX ON @S.receipt_completion_batches (max_job_id, batch_id);

    CREATE TABLE @S.done_entries (
        slot int NOT NULL,
        job_id bigint NOT NULL,
        run_lease bigint NOT NULL,
        state text NOT NULL CHECK (state IN ('completed', 'failed', 'cancelled')),
        attempt int NOT NULL,
        finalized_at timestamptz NOT NULL,
        payload jsonb
    ) PARTITION BY LIST (slot);
    CREATE INDEX ON @S.done_entries (job_id, run_lease);
    CREATE INDEX ON @S.done_entries (state, job_id);

    CREATE TABLE @S.receipt_completion_tombstones (
        slot int NOT NULL,
        job_id bigint NOT NULL,
        run_lease bigint NOT NULL,
        deleted_at timestamptz NOT NULL DEFAULT now()
    ) PARTITION BY LIST (slot);
    CREATE INDEX ON @S.receipt_completion_tombstones (job_id, run_lease);

    CREATE TABLE @S.ready_tombstones (
        slot int NOT NULL,
        job_id bigint NOT NULL,
        run_lease bigint NOT NULL,
        tombstoned_at timestamptz NOT NULL DEFAULT now()
    ) PARTITION BY LIST (slot);
    CREATE INDEX ON @S.ready_tombstones (job_id, run_lease);

    CREATE TABLE @S.dlq_entries (
        job_id bigint PRIMARY KEY,
        kind text NOT NULL,
        queue text NOT NULL,
        args jsonb NOT NULL,
        priority smallint NOT NULL,
        attempt int NOT NULL,
        max_attempts int NOT NULL,
        run_at timestamptz NOT NULL,
        attempted_at timestamptz,
        created_at timestamptz NOT NULL,
        finalized_at timestamptz NOT NULL,
        unique_key text,
        payload jsonb,
        dlq_reason text NOT NULL,
        dlq_at timestamptz NOT NULL,
        original_run_lease bigint NOT NULL
    );
    CREATE INDEX ON @S.dlq_entries (dlq_at);

    CREATE TABLE @S.queue_settings (
        queue text PRIMARY KEY,
        dlq_enabled boolean NOT NULL DEFAULT false
    );

    CREATE TABLE @S.maintenance_state (
        id boolean PRIMARY KEY DEFAULT true CHECK (id),
        rescue_horizon bigint NOT NULL DEFAULT 0
    );
    INSERT INTO @S.maintenance_state DEFAULT VALUES;

    CREATE VIEW @S.terminal_jobs AS
    SELECT r.job_id, r.kind, r.queue, r.args, r.priority, d.attempt, r.run_lease, r.max_attempts,
           r.run_at, r.created_at, d.finalized_at, d.state, r.unique_key,
           COALESCE(d.payload, r.payload) AS payload, 'general'::text AS path
      FROM @S.done_entries d
      JOIN @S.ready_entries r ON r.job_id = d.job_id AND r.run_lease = d.run_lease
    UNION ALL
    SELECT r.job_id, r.kind, r.queue, r.args, r.priority, b.attempts[item.ord]::int, r.run_lease,
           r.max_attempts, r.run_at, r.created_at, b.finalized_at, 'completed'::text, r.unique_key,
           NULL::jsonb, 'compact'::text
      FROM @S.receipt_completion_batches b
     CROSS JOIN LATERAL unnest(b.job_ids, b.run_leases) WITH ORDINALITY AS item(job_id, run_lease, ord)
      JOIN @S.ready_entries r ON r.job_id = item.job_id AND r.run_lease = item.run_lease
     WHERE NOT EXISTS (
            SELECT 1 FROM @S.receipt_completion_tombstones t
             WHERE t.job_id = item.job_id AND t.run_lease = item.run_lease);
    $ddl$;
    EXECUTE replace(ddl, '@S', s);

    EXECUTE format('INSERT INTO %s.ring_state (ring, slot_count) VALUES ($1, $2), ($3, $4)', s)
        USING 'queue', p_queue_slots, 'claim', p_claim_slots;
    FOR i IN 0 .. p_queue_slots - 1 LOOP
        EXECUTE format('CREATE TABLE %1$s.ready_entries_%2$s PARTITION OF %1$s.ready_entries FOR VALUES IN (%2$s)', s, i);
        EXECUTE format('CREATE TABLE %1$s.done_entries_%2$s PARTITION OF %1$s.done_entries FOR VALUES IN (%2$s)', s, i);
        EXECUTE format('CREATE TABLE %1$s.receipt_completion_batches_%2$s PARTITION OF %1$s.receipt_completion_batches FOR VALUES IN (%2$s)', s, i);
        EXECUTE format('CREATE TABLE %1$s.receipt_completion_tombstones_%2$s PARTITION OF %1$s.receipt_completion_tombstones FOR VALUES IN (%2$s)', s, i);
        EXECUTE format('CREATE TABLE %1$s.ready_tombstones_%2$s PARTITION OF %1$s.ready_tombstones FOR VALUES IN (%2$s)', s, i);
    END LOOP;
    FOR i IN 0 .. p_claim_slots - 1 LOOP
        EXECUTE format('CREATE TABLE %1$s.claim_batches_%2$s PARTITION OF %1$s.claim_batches FOR VALUES IN (%2$s)', s, i);
        EXECUTE format('CREATE TABLE %1$s.attempt_closures_%2$s PARTITION OF %1$s.attempt_closures FOR VALUES IN (%2$s)', s, i);
    END LOOP;

    INSERT INTO awa.queue_storage_registry (schema_name, queue_slots, claim_slots)
    VALUES (p_schema, p_queue_slots, p_claim_slots)
    ON CONFLICT (schema_name) DO NOTHING;
END
$installer$;

SELECT awa.install_queue_storage('awa');
