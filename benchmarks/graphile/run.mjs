// graphile-worker's side of `python -m benchmarks peers`: node run.mjs DSN JOBS CONCURRENCY POOL QUEUE.
// Migrates its schema, prints "ready", waits for "go" on stdin (the caller opens its measured
// window), inserts JOBS jobs with addJobs in batches of 2,000, runs them with its documented
// performance settings (https://worker.graphile.org/docs/performance: concurrentJobs, maxPoolSize,
// localQueue.size, completeJobBatchDelay and failJobBatchDelay 0), and prints
// "done <enqueue s> <run s> <completed>". It keeps no output: a completed job's row is deleted,
// so the run ends when the handler has seen every job and the jobs table is empty.
import { inBatches, readyThenGo } from '../_child.mjs';
import { Logger, makeWorkerUtils, run } from 'graphile-worker';

const [dsn, jobs, concurrency, pool, queue] = process.argv.slice(2);
const total = Number(jobs);
const quiet = new Logger(() => (level, message) => {
  if (level === 'error') console.error('graphile-worker:', message);
});
const preset = {
  worker: {
    connectionString: dsn, concurrentJobs: Number(concurrency), maxPoolSize: Number(pool),
    localQueue: { size: Number(queue) }, completeJobBatchDelay: 0, failJobBatchDelay: 0,
    logger: quiet, crontabFile: '/nonexistent', taskDirectory: '/nonexistent',
  },
};
const utils = await makeWorkerUtils({ connectionString: dsn, logger: quiet });
await utils.migrate();
await readyThenGo();

const started = performance.now();
await inBatches(total, (start, n) => utils.addJobs(
  Array.from({ length: n }, (_, k) => ({ identifier: 'noop', payload: { i: start + k } }))));
const inserted = performance.now();
let handled = 0;
const runner = await run({ preset, taskList: { noop: async () => { handled += 1; } } });
const left = `SELECT count(*)::int AS n FROM graphile_worker._private_jobs`;
let remaining = total;
while (handled < total || remaining > 0) {
  await new Promise((resolve) => setTimeout(resolve, 20));
  remaining = (await utils.withPgClient((c) => c.query(left))).rows[0].n;
}
const done = performance.now();
await runner.stop();
await utils.release();
console.log(`done ${(inserted - started) / 1000} ${(done - inserted) / 1000} ${handled}`);
process.exit(0);
