// Graphile Worker's side of bench/durable.py: one worker process running a no-op task.
//
//   node worker.js CONNECTION_STRING CONCURRENCY [batched]
//
// Without "batched": its defaults but concurrency (jobs fetched one by one, each completion its
// own statement; pollInterval 2000 ms, LISTEN/NOTIFY wakes the workers). "batched": the batching
// options of its performance docs: a local queue of concurrency + 1 jobs fetched at once, and
// completions and failures sent in batches (completeJobBatchDelay / failJobBatchDelay 0 ms:
// the calls made in the same tick go together).
"use strict";
const { run } = require("graphile-worker");

async function main() {
  const [connectionString, concurrency, mode] = process.argv.slice(2);
  const jobs = Number(concurrency);
  const worker = {};
  if (mode === "batched") {
    worker.localQueue = { size: jobs + 1 };
    worker.completeJobBatchDelay = 0;
    worker.failJobBatchDelay = 0;
  }
  const runner = await run({
    connectionString,
    concurrency: jobs,
    maxPoolSize: Math.max(10, jobs + 2),
    noHandleSignals: false,
    taskList: { noop: async () => 1 },
    preset: { worker },
  });
  await runner.promise;
}

main().catch((err) => {
  console.error(err);
  process.exit(1);
});
