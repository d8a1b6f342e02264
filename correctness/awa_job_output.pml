/*
 * awa_job_output.pml -- protocol model of retained job output (ADR-048)
 * for awa-tui's queue storage, checked with Spin.
 *
 * One job, up to MAXL attempts (run leases 1..MAXL).  Each attempt is
 * claimed under a fresh run lease, runs a handler that records a
 * nondeterministic output (0 = none, 1..NV = a value) into its slot,
 * possibly waits for a callback, seals the slot when the handler returns,
 * and then completes or fails through a finalizer that may lose its
 * connection (transaction rolled back) or its acknowledgement
 * (transaction committed, caller does not know) and retries with the
 * sealed value it keeps.  Maintenance rescues open attempts at any time;
 * an external completer holding a callback id races the waiting handler.
 * An operator cancels the job once, at any moment; the claim races it.
 *
 * Every database transaction is one atomic step.  A transition of a
 * running attempt writes only if the attempt (job, lease) is still open
 * (claimed, not closed, not in a completion batch); otherwise it is
 * stale and writes nothing.
 *
 * Negative configurations (each must yield a counterexample):
 *   -DNEG_WRITE_ON_RECORD     write the output when it is recorded
 *   -DNEG_WRITE_AFTER_COMMIT  write it after the commit, in a separate step
 *   -DNEG_DRAIN_FIRST_SEND    the finalizer drains the value on its first send
 *   -DNEG_DROP_COMPACT        the batched (compact) path drops the output
 *   -DNEG_NO_LEASE_GUARD      completion checks the job is running, not the lease
 *   -DNEG_CLAIM_SNAPSHOT      the claim decides on the snapshot it took before
 *                             its lane-lock wait, not on the rows under the lock
 *   -DNEG_CANCEL_SNAPSHOT     the cancel decides on the state it read before
 *                             its lock wait, not on the rows under the lock
 *
 * Size knobs: -DMAXL=n (attempts, 1..3), -DMAXS=n (finalize sends), -DNV=n.
 * -DNO_CANCEL leaves the operator's cancel out: a configuration whose
 * scenario does not involve it stays a third of the size (the cancel only
 * adds behaviours, so a counterexample or a reached goal without it is one
 * with it too).
 */

#ifndef MAXL
#define MAXL 2          /* run leases = max_attempts (at most 3: see ENTRY_OK) */
#endif
#ifndef MAXS
#define MAXS 2          /* finalize sends per attempt (first send + retries) */
#endif
#ifndef NV
#define NV 2            /* output domain: 0 = none, 1..NV */
#endif
#if MAXL < 1 || MAXL > 3
#error "MAXL must be 1..3 (ENTRY_OK checks at most three error entries)"
#endif
#define EXT (MAXL + 1)  /* "who": the external completer */

/* job states (derived summary of the queue-storage rows) */
#define READY     1     /* a ready row nobody has claimed */
#define RUNNING   2     /* claimed by lease `cur` */
#define WAITING   3     /* claimed, callback registered (waiting_external) */
#define COMPLETED 4     /* compact batch row or done entry */
#define FAILED    5     /* terminal failure (done entry / DLQ) */
#define CANCELLED 6     /* done entry 'cancelled' (+ ready tombstone if unclaimed) */

/* completion paths */
#define COMPACT 1       /* receipt_completion_batches, outputs json[] */
#define GENERAL 2       /* done_entries, output json */

/* finalize request kinds */
#define DO_COMPLETE 1
#define DO_FAIL     2

/* ---------------- database state ---------------- */
byte jstate = READY;
byte cur = 0;                 /* lease of the latest claim */
byte next_lease = 1;          /* next run lease / attempt number */
bool closed[MAXL + 2];        /* attempt_closures row for (job, lease) */
bool in_batch[MAXL + 2];      /* (job, lease) in a receipt completion batch */
byte cb = 0;                  /* registered callback id (= its lease), 0 = none */
byte db_out = 0;              /* the job's output as terminal_jobs reads it */
byte db_path = 0;             /* path of the completion that stored it */
byte n_err = 0;               /* error entries in payload.errors */
byte e_lease[MAXL + 1];       /* entry i written by the attempt with this lease */
byte e_out[MAXL + 1];         /* entry i's "output" key (0 = absent) */

/* ---------------- ghost (history) state, read only by invariants ------- */
byte sealed_of[MAXL + 2];     /* what attempt L sealed */
bool sealed_set[MAXL + 2];
byte completed_by = 0;        /* lease that completed the job, EXT, or 0 */
byte n_compl = 0;             /* completion transactions that committed */
bool compl_under_lease = false;  /* the committing attempt was open then */
byte ext_out = 0;             /* output passed to the committed external completion */
byte db_src = 0;              /* who wrote db_out */
bool e_ok[MAXL + 1];          /* entry i committed while its attempt was open */
byte e_had[MAXL + 1];         /* output entry i was written with */
byte n_term = 0;              /* terminal rows written (terminal_jobs rows of the job) */
bool cancel_done = false;     /* an admin cancel committed */
bool claimed_after_cancel = false;  /* a claim committed after the cancel */

/* the lease guard of storage.finalize.attempt_writes.lock_attempt + close_if_open */
#define OPEN(L) (cur == (L) && (jstate == RUNNING || jstate == WAITING) \
                 && !closed[L] && !in_batch[L])

/* ---------------- invariants ---------------- */

/* I1 trace: a stored output traces to the committing attempt and equals
 * what it sealed, or to the committed external completion; the committing
 * attempt was open (held its lease) when it committed. */
#define I1 ((db_out == 0 || \
             (db_src == completed_by && \
              ((completed_by == EXT && db_out == ext_out) || \
               (completed_by >= 1 && completed_by <= MAXL && \
                sealed_set[completed_by] && db_out == sealed_of[completed_by])))) \
            && (completed_by == 0 || compl_under_lease))

/* I2: only completed jobs have an output. */
#define I2 (db_out == 0 || jstate == COMPLETED)

/* I3: an error entry's output belongs to the failed attempt that wrote it
 * (committed under its lease, equal to what it sealed), and only the
 * latest entry written with an output keeps it. */
#define LATER_HAD(i) ((i + 1 < n_err && e_had[i + 1] != 0) || \
                      (i + 2 < n_err && e_had[i + 2] != 0))
#define ENTRY_OK(i) (i >= n_err || \
    ((e_out[i] == 0 || (e_ok[i] && sealed_set[e_lease[i]] && \
                        e_out[i] == sealed_of[e_lease[i]] && !LATER_HAD(i))) && \
     (e_had[i] == 0 || LATER_HAD(i) || e_out[i] == e_had[i])))
#define I3 (ENTRY_OK(0) && ENTRY_OK(1) && ENTRY_OK(2))

/* I4: every committed completion whose attempt sealed an output stored it
 * (and an external completion stored the output passed to it). */
#define I4 ((completed_by == 0) || \
            (completed_by == EXT && db_out == ext_out) || \
            (completed_by >= 1 && completed_by <= MAXL && \
             (sealed_of[completed_by] == 0 || db_out == sealed_of[completed_by])))

/* I5: the job completes at most once. */
#define I5 (n_compl <= 1)

/* I6: a cancelled job is never claimed afterwards, and the job has at most
 * one terminal row (never both cancelled and completed or failed). */
#define I6 (n_term <= 1 && !claimed_after_cancel)

#define INV (I1 && I2 && I3 && I4 && I5 && I6)

/* Checked in every reachable state: the monitor can fire exactly when INV
 * is false.  Its `end` label keeps it a valid end state otherwise. */
active proctype Monitor()
{
end:
    atomic {
        !INV ->
            if :: !I1 -> printf("VIOLATED I1 output traces to committing attempt\n") :: else -> skip fi;
            if :: !I2 -> printf("VIOLATED I2 only completed jobs have an output\n") :: else -> skip fi;
            if :: !I3 -> printf("VIOLATED I3 error-entry output belongs to its failed attempt\n") :: else -> skip fi;
            if :: !I4 -> printf("VIOLATED I4 committed completion stored its sealed output\n") :: else -> skip fi;
            if :: !I5 -> printf("VIOLATED I5 job completes at most once\n") :: else -> skip fi;
            if :: !I6 -> printf("VIOLATED I6 cancelled job never claimed, one terminal row\n") :: else -> skip fi;
            assert(INV)
    }
}

/* ---------------- reachability (vacuity) probes ----------------
 * With -DREACH=n a probe process asserts that goal n never holds; the
 * check expects that assertion to fail, proving the scenario is reachable,
 * so the invariants above are not satisfied vacuously. */
#ifdef REACH
byte commit_send = 0;         /* finalize send that carried the committed completion */
byte stale_sealed = 0;        /* sealed output of a completion refused as stale */
bool stale_superseded = false;/* a completion refused because its attempt was superseded */
bool stale_cancelled = false; /* a completion refused because the job was cancelled */
bool claim_lost = false;      /* a claim whose snapshot showed the job ready found it cancelled */
#define REACH_NOTE_COMMIT(o) commit_send = sends
#define REACH_NOTE_STALE(L, o) \
    if :: completed_by == EXT -> stale_sealed = o :: else -> skip fi; \
    if :: cur != L -> stale_superseded = true :: else -> skip fi; \
    if :: jstate == CANCELLED -> stale_cancelled = true :: else -> skip fi
#define REACH_NOTE_CLAIM_LOST claim_lost = true

#if REACH == 1   /* compact completion stores an attempt's output */
#define GOAL (db_path == COMPACT && db_out != 0 && completed_by >= 1 && completed_by <= MAXL)
#elif REACH == 2 /* completion committed by a finalize retry, output kept */
#define GOAL (completed_by >= 1 && completed_by <= MAXL && commit_send == MAXS && db_out != 0)
#elif REACH == 3 /* a failure with an output strips an earlier failure's output */
#define GOAL (n_err == 2 && e_had[0] != 0 && e_out[0] == 0 && e_out[1] != 0)
#elif REACH == 4 /* a later entry without output (rescue) keeps the earlier one */
#define GOAL (n_err == 2 && e_out[0] != 0 && e_had[1] == 0)
#elif REACH == 5 /* external completion with an output wins over a waiting handler */
#define GOAL (completed_by == EXT && ext_out != 0 && stale_sealed != 0 && stale_sealed != ext_out)
#elif REACH == 6 /* superseded attempt's completion refused; the retry completes general */
#define GOAL (stale_superseded && completed_by == 2 && db_path == GENERAL && db_out != 0)
#elif REACH == 7 /* a claim that saw the job ready before its lock wait loses to the cancel */
#define GOAL (claim_lost && cancel_done && jstate == CANCELLED)
#elif REACH == 8 /* a cancel of the running attempt makes its completion stale */
#define GOAL (stale_cancelled && cancel_done && n_term == 1)
#else
#define GOAL false
#endif

active proctype Reach()
{
end:
    atomic { GOAL -> assert(!GOAL) }
}
#else
#define REACH_NOTE_COMMIT(o) skip
#define REACH_NOTE_STALE(L, o) skip
#define REACH_NOTE_CLAIM_LOST skip
#endif

/* ---------------- transactions ---------------- */

/* storage.finalize.attempt_writes.fail / rescue: append an error entry; an entry
 * with an output strips the output key from earlier entries.  The caller
 * declares a local byte `k`. */
inline append_entry(L, out, gh)
{
    if
    :: out != 0 ->
        k = 0;
        do
        :: k < n_err -> e_out[k] = 0; k++
        :: else -> break
        od;
        k = 0
    :: else -> skip
    fi;
    e_lease[n_err] = L;
    e_out[n_err] = out;
    e_had[n_err] = out;
    e_ok[n_err] = gh;
    n_err++
}

/* the job leaves the attempt: retry with a new ready row, or fail terminally */
inline retry_or_fail(L)
{
    cb = 0;
    if
    :: L < MAXL -> jstate = READY
    :: else -> jstate = FAILED; n_term++
    fi
}

/* storage.finalize.compact_writes.complete_compact / attempt_writes.complete_general under
 * the attempt's lock and guard.  `ok` reports whether the guard matched. */
inline tx_complete(L, out, tagged, ok)
{
#ifdef NEG_NO_LEASE_GUARD
    ok = (jstate == RUNNING || jstate == WAITING);   /* job-level check only */
#else
    ok = OPEN(L);
#endif
    if
    :: ok ->
        compl_under_lease = OPEN(L);                  /* ghost */
        n_compl++;
        n_term++;
        completed_by = L;
        if
        :: (tagged || n_err > 0) -> db_path = GENERAL; closed[L] = true
        :: else -> db_path = COMPACT; in_batch[L] = true
        fi;
        jstate = COMPLETED;
        cb = 0;
#if defined(NEG_WRITE_ON_RECORD) || defined(NEG_WRITE_AFTER_COMMIT)
        skip                                          /* output not written here */
#else
#ifdef NEG_DROP_COMPACT
        if
        :: db_path == COMPACT -> db_out = 0
        :: else -> db_out = out
        fi;
#else
        db_out = out;
#endif
        db_src = L
#endif
        ;
        REACH_NOTE_COMMIT(out)
    :: else ->                                        /* stale: nothing written */
        REACH_NOTE_STALE(L, out)
    fi
}

inline tx_fail(L, out, ok)
{
    ok = OPEN(L);
    if
    :: ok ->
        append_entry(L, out, OPEN(L));   /* ghost e_ok: evaluated before closing */
        closed[L] = true;
        retry_or_fail(L)
    :: else -> skip
    fi
}

/* OutputSlot.set: record (replace), clear, or nothing */
inline record(slot, L)
{
    if
    :: skip
    :: slot = 0
    :: slot = 1
    :: slot = NV
    fi;
#ifdef NEG_WRITE_ON_RECORD
    atomic { db_out = slot; db_src = L }
#else
    skip
#endif
}

/* ---------------- processes ---------------- */

proctype Attempt(byte L)
{
    byte slot = 0;
    byte held = 0;       /* CompletionBatcher's copy of the sealed value */
    byte out;
    byte sends = 0;
    byte kind;
    bool tagged = false; /* job has tags/unique key/metadata: general path */
    bool ok;
    byte k;

    /* the handler runs */
    record(slot, L);
    if
    :: skip
    :: /* ctx.wait_for_callback: register, wait, resume */
       atomic {
           if
           :: OPEN(L) -> cb = L; jstate = WAITING
           :: !OPEN(L) -> skip      /* stale; no `else`: see note at finalizer */
           fi
       };
       /* resumed by resolve_callback (or its wait ends): external
        * completion may have won the race meanwhile */
       atomic {
           if
           :: OPEN(L) && cb == L -> cb = 0; jstate = RUNNING
           :: else -> skip
           fi
       }
    fi;
    record(slot, L);

    /* the handler returns: OutputSlot.seal */
    atomic { held = slot; sealed_of[L] = slot; sealed_set[L] = true };

    if
    :: kind = DO_COMPLETE;
       if
       :: tagged = false
       :: tagged = true
       fi
    :: kind = DO_FAIL
    fi;

    /* the finalizer: send, possibly retry with the kept sealed value */
    do
    :: sends < MAXS ->
        sends++;
        out = held;
#ifdef NEG_DRAIN_FIRST_SEND
        held = 0;
#endif
        /* Note: an `if` that opens an option's atomic block merges its
         * guards into the enclosing `if`, where an `else` would never run
         * next to `skip`; hence explicit complementary guards. */
        if
        :: skip                 /* connection lost before commit: rolled back */
        :: atomic {
               if
               :: kind == DO_COMPLETE -> tx_complete(L, out, tagged, ok)
               :: kind == DO_FAIL -> tx_fail(L, out, ok)
               fi
           };
#ifdef NEG_WRITE_AFTER_COMMIT
           if
           :: ok && kind == DO_COMPLETE ->
               /* a second statement after the completion committed;
                * the worker may also die before it runs */
               if
               :: atomic { db_out = out; db_src = L }
               :: skip
               fi
           :: else -> skip
           fi;
#endif
           if
           :: break             /* acknowledged: committed or stale */
           :: skip              /* acknowledgement lost */
           fi
        fi;
        if
        :: skip                 /* retry */
        :: break                /* worker shut down / killed: abandoned */
        fi
    :: else -> break            /* out of retries: left for rescue */
    od
}

/* storage.runtime.claim.claim_batch: claim the ready job under a new run lease.
 * Two steps: the claim's statement starts (its snapshot shows the job ready),
 * then it holds the lane lock (after waiting for it, possibly behind a cancel
 * that commits meanwhile) and writes.  The engine locks the lane in its own
 * statement (LOCK_LANE) so the claim statement's snapshot is taken under the
 * lock; -DNEG_CLAIM_SNAPSHOT is the one-statement claim that decided on the
 * snapshot it took before the wait. */
active proctype Claimer()
{
end:
    do
    :: atomic { jstate == READY && next_lease <= MAXL };   /* snapshot: claimable */
       atomic {                                            /* under the lane lock */
#ifdef NEG_CLAIM_SNAPSHOT
           if :: cancel_done -> claimed_after_cancel = true :: else -> skip fi;
           cur = next_lease;
           next_lease++;
           jstate = RUNNING;
           run Attempt(cur)
#else
           if
           :: jstate == READY ->
               cur = next_lease;
               next_lease++;
               jstate = RUNNING;
               run Attempt(cur)
           :: else -> REACH_NOTE_CLAIM_LOST   /* cancelled meanwhile: claims nothing */
           fi
#endif
       }
    od
}

/* storage.ops.admin.cancel, once, at any moment: it reads the job's state, then
 * under the lock that serialises the job (the lane lock for a ready job; the
 * attempt's advisory lock for a running or waiting one) it decides against
 * the rows as they are now: a ready job gets a tombstone and a cancelled done
 * row; an open attempt is closed (its completion goes stale) and the job gets
 * a cancelled done row; a job that ended is refused.  -DNEG_CANCEL_SNAPSHOT
 * decides on the state it read before the wait. */
#ifndef NO_CANCEL
active proctype Admin()
{
    byte seen;
end:
    atomic { (jstate == READY || jstate == RUNNING || jstate == WAITING) -> seen = jstate };
    atomic {
#ifdef NEG_CANCEL_SNAPSHOT
        if
        :: seen == READY && jstate != READY ->
            /* tombstone and done row for a job that was claimed meanwhile;
             * its attempt stays open */
            cancel_done = true; n_term++
        :: else ->
#endif
        if
        :: jstate == READY ->
            jstate = CANCELLED; cancel_done = true; n_term++
        :: (jstate == RUNNING || jstate == WAITING) && OPEN(cur) ->
            closed[cur] = true; cb = 0;
            jstate = CANCELLED; cancel_done = true; n_term++
        :: else -> skip                               /* ended meanwhile: refused */
        fi
#ifdef NEG_CANCEL_SNAPSHOT
        fi
#endif
    }
}
#endif

/* storage.ops.maintenance.rescue_expired: heartbeat / deadline / callback
 * timeout lapsed (at any time): close the attempt, write an error entry
 * without an output, retry or fail. */
active proctype Maintenance()
{
    byte k;
end:
    do
    :: atomic {
           OPEN(cur) ->
               append_entry(cur, 0, OPEN(cur));
               closed[cur] = true;
               retry_or_fail(cur)
       }
    od
}

/* storage.ops.callbacks.complete_external: a caller holding a callback id
 * completes the job with its own (validated) output, or none. */
active proctype External()
{
    byte id;
    byte v;
end:
    atomic { cb != 0 -> id = cb };   /* learns a registered callback id */
    if
    :: v = 0
    :: v = 1
    :: v = NV
    fi;
    atomic {
        if
        :: cb == id && OPEN(id) ->
            compl_under_lease = true;   /* guarded by callback id (+ run lease) */
            n_compl++;
            n_term++;
            completed_by = EXT;
            ext_out = v;
            closed[id] = true;          /* general path: done entry */
            jstate = COMPLETED;
            cb = 0;
            db_path = GENERAL;
            db_out = v;
            db_src = EXT
        :: else -> skip                 /* stale / not found */
        fi
    }
}
