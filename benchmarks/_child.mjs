// What the Node peers of `python -m benchmarks peers` share (pgboss/run.mjs, graphile/run.mjs).
import { createInterface } from 'node:readline';

// Print "ready", then wait for "go" on stdin: the caller opens its measured window between.
export async function readyThenGo() {
  console.log('ready');
  const lines = createInterface({ input: process.stdin });
  for await (const line of lines) if (line.trim() === 'go') break;
}

// insert(start, n) for JOBS jobs in batches of 2,000, as every system in `peers` enqueues.
export async function inBatches(total, insert) {
  for (let start = 0; start < total; start += 2000) {
    await insert(start, Math.min(total, start + 2000) - start);
  }
}
