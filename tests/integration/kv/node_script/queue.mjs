// BullMQ and ioredis defineCommand against one server (the port is argv[2]):
// real jobs end to end (completed, delayed, retried then completed, failed
// after its attempts, prioritised, a parent waiting for its children, a
// rate-limited worker) and ioredis's EVALSHA-with-EVAL-fallback scripts.
// Prints one JSON line of what it saw (no times, no ids that differ between
// servers), so that the Python test can compare two servers' runs.
import { Queue, Worker, QueueEvents, FlowProducer } from "bullmq";
import Redis from "ioredis";

const port = Number(process.argv[2]);
const connection = { host: "127.0.0.1", port, maxRetriesPerRequest: null };
const out = {};
const sleep = (ms) => new Promise((r) => setTimeout(r, ms));

async function waitFor(what, pred, ms = 20000) {
  const end = Date.now() + ms;
  while (Date.now() < end) {
    if (await pred()) return;
    await sleep(25);
  }
  throw new Error("timed out waiting for " + what);
}

async function bullmq() {
  const name = "jobs";
  const queue = new Queue(name, { connection });
  await queue.obliterate({ force: true });
  const events = new QueueEvents(name, { connection });
  await events.waitUntilReady();
  const seen = { completed: [], failed: [], attemptsMade: {} };
  events.on("completed", ({ jobId }) => seen.completed.push(jobId));
  events.on("failed", ({ jobId }) => seen.failed.push(jobId));

  const tries = {};
  const worker = new Worker(
    name,
    async (job) => {
      tries[job.name] = (tries[job.name] || 0) + 1;
      if (job.name === "flaky" && tries.flaky < 3) throw new Error("flaky " + tries.flaky);
      if (job.name === "broken") throw new Error("always broken");
      if (job.name === "progress") await job.updateProgress(50);
      return { doubled: job.data.n * 2 };
    },
    { connection, concurrency: 1 },
  );

  const added = Date.now();
  const jobs = {
    plain: await queue.add("plain", { n: 1 }),
    delayed: await queue.add("delayed", { n: 2 }, { delay: 400 }),
    flaky: await queue.add("flaky", { n: 3 }, { attempts: 5, backoff: { type: "fixed", delay: 50 } }),
    broken: await queue.add("broken", { n: 4 }, { attempts: 2, backoff: { type: "exponential", delay: 20 } }),
    progress: await queue.add("progress", { n: 5 }),
    prio: await queue.add("prio", { n: 6 }, { priority: 3 }),
  };
  const bulk = await queue.addBulk([1, 2, 3].map((n) => ({ name: "bulk", data: { n } })));

  const ids = [...Object.values(jobs), ...bulk].map((j) => j.id);
  await waitFor("jobs to settle", async () => {
    const c = await queue.getJobCounts("completed", "failed");
    return c.completed + c.failed === ids.length;
  });
  const delayedAt = (await queue.getJob(jobs.delayed.id)).processedOn;
  out.delayed_waited = delayedAt - added >= 350;

  const state = {};
  for (const [k, j] of Object.entries(jobs)) {
    const job = await queue.getJob(j.id);
    state[k] = {
      state: await job.getState(),
      attemptsMade: job.attemptsMade,
      returnvalue: job.returnvalue,
      failedReason: job.failedReason,
      progress: job.progress,
    };
  }
  out.jobs = state;
  out.bulk = await Promise.all(bulk.map(async (j) => (await queue.getJob(j.id)).returnvalue));
  out.counts = await queue.getJobCounts("waiting", "active", "delayed", "completed", "failed",
                                        "prioritized", "paused");
  out.tries = tries;

  // retry a failed job by hand: it runs again (and fails again)
  const failedJob = await queue.getJob(jobs.broken.id);
  await failedJob.retry();
  await waitFor("retried job to fail again", async () => (await failedJob.getState()) === "failed"
    && (await queue.getJob(jobs.broken.id)).attemptsMade >= 3);
  out.manual_retry_tries = tries.broken;

  // a parent that waits for its children (FlowProducer: multi-key Lua)
  const flow = new FlowProducer({ connection });
  const tree = await flow.add({
    name: "plain", queueName: name, data: { n: 10 },
    children: [{ name: "plain", queueName: name, data: { n: 11 } },
               { name: "plain", queueName: name, data: { n: 12 } }],
  });
  await waitFor("flow parent", async () => (await tree.job.getState()) === "completed");
  const parent = await queue.getJob(tree.job.id);
  out.flow_children = Object.values(await parent.getChildrenValues()).map((v) => v.doubled).sort();

  // pause/resume, a job removed, a clean
  await queue.pause();
  const paused = await queue.add("plain", { n: 20 });
  await sleep(100);
  out.paused_state = await paused.getState();
  await queue.resume();
  await waitFor("resumed job", async () => (await paused.getState()) === "completed");
  const removable = await queue.add("plain", { n: 21 }, { delay: 60000 });
  await removable.remove();
  out.removed = (await queue.getJob(removable.id)) === undefined;
  out.cleaned = (await queue.clean(0, 100, "completed")).length;

  await worker.close();
  await events.close();
  await flow.close();

  // a rate-limited worker: 3 jobs a second
  const rq = new Queue("limited", { connection });
  await rq.obliterate({ force: true });
  const done = [];
  const lw = new Worker("limited", async (job) => { done.push(Date.now()); return job.data.n; },
                        { connection, limiter: { max: 3, duration: 1000 } });
  await rq.addBulk([1, 2, 3, 4, 5, 6].map((n) => ({ name: "l", data: { n } })));
  await waitFor("limited jobs", async () => done.length === 6);
  out.rate_limited = done[5] - done[0] >= 900;
  await lw.close();
  await rq.obliterate({ force: true });
  await rq.close();
  await queue.obliterate({ force: true });
  await queue.close();
}

async function ioredisScripts() {
  const r = new Redis(connection);
  await r.flushall();
  r.defineCommand("capIncr", {
    numberOfKeys: 1,
    lua: `local v = redis.call('incrby', KEYS[1], ARGV[1])
          if v > tonumber(ARGV[2]) then redis.call('set', KEYS[1], ARGV[2]) return tonumber(ARGV[2]) end
          return v`,
  });
  r.defineCommand("swap", {
    numberOfKeys: 2,
    lua: `local a = redis.call('get', KEYS[1]) local b = redis.call('get', KEYS[2])
          redis.call('set', KEYS[1], b) redis.call('set', KEYS[2], a) return {b, a}`,
  });
  r.defineCommand("hmax", {
    lua: `local best, bk = nil, nil
          local all = redis.call('hgetall', KEYS[1])
          for i = 1, #all, 2 do local v = tonumber(all[i+1]) if not best or v > best then best, bk = v, all[i] end end
          return {bk, tostring(best)}`,
  });
  r.defineCommand("fails", { numberOfKeys: 0, lua: "return redis.error_reply('MYERR nope')" });
  const res = {};
  res.cap = [];
  for (let i = 0; i < 4; i++) res.cap.push(await r.capIncr("c", 4, 10));
  await r.mset("a", "1", "b", "2");
  res.swap = await r.swap("a", "b");
  await r.hset("h", "x", 3, "y", 9, "z", 5);
  res.hmax = await r.hmax(1, "h");
  try { await r.fails(); } catch (e) { res.fails = e.message; }
  // the cache is flushed: ioredis's EVALSHA gets NOSCRIPT and falls back to EVAL
  await r.script("FLUSH");
  res.after_flush = await r.capIncr("c", 1, 10);
  const p = r.pipeline();
  p.capIncr("p", 2, 5).capIncr("p", 2, 5).capIncr("p", 2, 5).swap("a", "b");
  res.pipeline = (await p.exec()).map(([e, v]) => (e ? e.message : v));
  const m = r.multi();
  m.capIncr("m", 7, 100).hmax(1, "h");
  res.multi = (await m.exec()).map(([e, v]) => (e ? e.message : v));
  res.exists = await r.script("EXISTS", "ffffffffffffffffffffffffffffffffffffffff");
  out.ioredis = res;
  r.disconnect();
}

try {
  await bullmq();
  await ioredisScripts();
  console.log(JSON.stringify(out));
  process.exit(0);
} catch (e) {
  console.error(e && e.stack ? e.stack : e);
  console.log(JSON.stringify(out));
  process.exit(1);
}
