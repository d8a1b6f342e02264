// pg-boss's side of `python -m benchmarks peers`: node run.mjs DSN JOBS WORKERS BATCH.
// Installs its schema and queue, prints "ready", waits for "go" on stdin (the caller opens
// its measured window), inserts JOBS jobs in batches of 2,000, runs them with work(), each job
// completing with its own 100 B output, and prints "done <enqueue s> <run s> <completed>".
// burstWhenBatchFull: fetch again at once while fetches come back full, as a busy pg-boss
// worker is configured; without it each worker sleeps 0.5 s after every batch (~2,000 jobs/s).
import { inBatches, readyThenGo } from '../_child.mjs';
import { PgBoss } from 'pg-boss';

const [dsn, jobs, workers, batch] = process.argv.slice(2);
const total = Number(jobs);
const queue = 'noop';
const output = (i) => ({ updated: i % 10000, skipped: i % 100, warehouse: 'eu-west-1',
  took_ms: i % 5000, cursor: i.toString(16).padStart(20, '0') });  // 100 B of JSON text

const boss = new PgBoss({ connectionString: dsn, schedule: false, supervise: false, max: 10 });
boss.on('error', (error) => console.error('pg-boss error:', error.message));
await boss.start();
await boss.createQueue(queue);
await readyThenGo();

const started = performance.now();
await inBatches(total, (start, n) =>
  boss.insert(queue, Array.from({ length: n }, (_, k) => ({ data: { i: start + k } }))));
const inserted = performance.now();
const options = { batchSize: Number(batch), localConcurrency: Number(workers),
  pollingIntervalSeconds: 0.5, burstWhenBatchFull: true, perJobResults: true };
await boss.work(queue, options, async (claimed) =>
  claimed.map((job) => ({ id: job.id, status: 'completed', output: output(job.data.i) })));
const count = `SELECT count(*)::int AS n FROM pgboss.job WHERE name = $1 AND state = 'completed'`;
let completed = 0;
while (completed < total) {
  await new Promise((resolve) => setTimeout(resolve, 20));
  completed = (await boss.getDb().executeSql(count, [queue])).rows[0].n;
}
const done = performance.now();
await boss.stop({ graceful: false, wait: true });
console.log(`done ${(inserted - started) / 1000} ${(done - inserted) / 1000} ${completed}`);
process.exit(0);
