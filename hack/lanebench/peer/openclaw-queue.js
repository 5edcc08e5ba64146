// Copyright 2026 The agentlane Authors.
// Licensed under the Apache License, Version 2.0.
//
// A port, to plain Node.js, of the lane-aware command queue OpenClaw runs
// its agent turns through (src/process/command-queue.ts), used as the peer
// that hack/lanebench compares the lane engine with. It keeps that queue's
// algorithm:
//
//   - lanes are created on first use and kept in a Map by name; a lane is
//     a FIFO array of entries, a count of running tasks and a
//     maxConcurrent cap (1 unless set, as in OpenClaw);
//   - enqueueCommandInLane pushes an entry holding the task and the
//     resolve/reject of a new Promise, stamps its enqueue time, and drains
//     the lane;
//   - draining is a pump loop guarded by a draining flag: while the lane
//     has room it shifts the head, measures how long it waited (OpenClaw
//     warns past warnAfterMs), counts it active and runs it in an async
//     closure that, once the task settles, frees the slot, pumps the lane
//     again, then settles the caller's promise;
//   - an agent run is enqueued in its session lane ("session:<key>", cap 1)
//     and, from there, in the global lane ("main", capped by
//     agents.defaults.maxConcurrent), as runEmbeddedPiAgent does.
//
// OpenClaw also writes debug diagnostics on enqueue and dequeue and keeps
// per-lane generations for resets; this port leaves those out, which can
// only make the peer faster.
//
// Usage: node openclaw-queue.js --workload=single|lanes|sessions
//        [--tasks=N] [--sessions=N] [--check=1]
// prints one JSON line like hack/lanebench: workload, tasks, seconds,
// tasks_per_sec, cpu_seconds (the process's CPU time, user and system,
// over the same interval). With --check=1 the tasks are not no-ops: each yields once
// while it runs and the line reports the most tasks seen running at once
// per lane (max_lane) and per session (max_session), to test the port.
'use strict';

const MAIN_LANE = 'main';

class CommandQueue {
  constructor() {
    this.lanes = new Map();
  }

  lane(name) {
    let state = this.lanes.get(name);
    if (state === undefined) {
      state = { name, queue: [], active: 0, maxConcurrent: 1, draining: false };
      this.lanes.set(name, state);
    }
    return state;
  }

  setLaneConcurrency(name, maxConcurrent) {
    const state = this.lane(name);
    state.maxConcurrent = Math.max(1, Math.floor(maxConcurrent));
    this.drain(state);
  }

  enqueueCommandInLane(lane, task, opts) {
    const state = this.lane(lane.trim() || MAIN_LANE);
    return new Promise((resolve, reject) => {
      state.queue.push({
        task,
        resolve,
        reject,
        enqueuedAt: Date.now(),
        warnAfterMs: (opts && opts.warnAfterMs) || 2000,
        onWait: opts && opts.onWait,
      });
      this.drain(state);
    });
  }

  enqueueCommand(task, opts) {
    return this.enqueueCommandInLane(MAIN_LANE, task, opts);
  }

  drain(state) {
    if (state.draining) {
      return;
    }
    state.draining = true;
    const pump = () => {
      try {
        while (state.active < state.maxConcurrent && state.queue.length > 0) {
          const entry = state.queue.shift();
          const waitedMs = Date.now() - entry.enqueuedAt;
          if (waitedMs >= entry.warnAfterMs && entry.onWait) {
            entry.onWait(waitedMs, state.queue.length);
          }
          state.active += 1;
          void (async () => {
            try {
              const result = await entry.task();
              state.active -= 1;
              pump();
              entry.resolve(result);
            } catch (err) {
              state.active -= 1;
              pump();
              entry.reject(err);
            }
          })();
        }
      } finally {
        state.draining = false;
      }
    };
    pump();
  }

  // runInSession enqueues task in the session's lane and, from there, in
  // the global lane, so a session runs one task at a time and the process
  // at most the global lane's cap.
  runInSession(sessionKey, task) {
    return this.enqueueCommandInLane(`session:${sessionKey}`, () =>
      this.enqueueCommandInLane(MAIN_LANE, task),
    );
  }
}

const noop = async () => true;

// checked returns a task for --check: it yields once while it runs and
// records how many tasks of its group (lane or session) ran at once.
const running = new Map();
const peaks = new Map();
function checked(group) {
  return async () => {
    const n = (running.get(group) || 0) + 1;
    running.set(group, n);
    peaks.set(group, Math.max(peaks.get(group) || 0, n));
    await null;
    running.set(group, running.get(group) - 1);
    return true;
  };
}

function peak(prefix) {
  let m = 0;
  for (const [g, n] of peaks) {
    if (g.startsWith(prefix)) {
      m = Math.max(m, n);
    }
  }
  return m;
}

function parseArgs(argv) {
  const args = { workload: 'single', tasks: 100000, sessions: 1000, check: 0 };
  for (const a of argv) {
    const m = /^--([a-z]+)=(.*)$/.exec(a);
    if (!m || !(m[1] in args)) {
      throw new Error(`unknown argument ${a}`);
    }
    args[m[1]] = m[1] === 'workload' ? m[2] : Number.parseInt(m[2], 10);
  }
  return args;
}

// The workloads of hack/lanebench, in the same shape and sizes.
function workload(name, sessions, check) {
  const q = new CommandQueue();
  switch (name) {
    case 'single':
      // One lane with cap 4.
      q.setLaneConcurrency(MAIN_LANE, 4);
      return (i) => q.enqueueCommand(check ? checked('lane:main') : noop);
    case 'lanes': {
      // 10 lanes with cap 4 each, submissions interleaved across lanes.
      const names = [];
      for (let l = 0; l < 10; l++) {
        names.push(`lane-${l}`);
        q.setLaneConcurrency(names[l], 4);
      }
      return (i) => {
        const lane = names[i % names.length];
        return q.enqueueCommandInLane(lane, check ? checked(`lane:${lane}`) : noop);
      };
    }
    case 'sessions': {
      // Sessions run one task at a time under a process-wide cap of 8.
      q.setLaneConcurrency(MAIN_LANE, 8);
      const keys = [];
      for (let s = 0; s < Math.max(sessions, 1); s++) {
        keys.push(`session-${s}`);
      }
      if (check) {
        // Every task of the global lane counts in one group, and in its
        // session's.
        return (i) => {
          const key = keys[i % keys.length];
          const lane = checked('lane:main');
          const session = checked(`session:${key}`);
          return q.runInSession(key, () => Promise.all([lane(), session()]).then(() => true));
        };
      }
      return (i) => q.runInSession(keys[i % keys.length], noop);
    }
    default:
      throw new Error(`unknown workload ${name}`);
  }
}

async function main() {
  const args = parseArgs(process.argv.slice(2));
  const submit = workload(args.workload, args.sessions, args.check);
  const pending = new Array(args.tasks);
  const cpu0 = process.cpuUsage();
  const start = process.hrtime.bigint();
  for (let i = 0; i < args.tasks; i++) {
    pending[i] = submit(i);
  }
  const results = await Promise.all(pending);
  const seconds = Number(process.hrtime.bigint() - start) / 1e9;
  const cpu = process.cpuUsage(cpu0);
  if (results.some((r) => r !== true)) {
    throw new Error('a task did not succeed');
  }
  const line = {
    workload: args.workload,
    tasks: args.tasks,
    seconds,
    tasks_per_sec: args.tasks / seconds,
    cpu_seconds: (cpu.user + cpu.system) / 1e6,
  };
  if (args.check) {
    line.max_lane = peak('lane:');
    line.max_session = peak('session:');
  }
  process.stdout.write(JSON.stringify(line) + '\n');
}

main().catch((err) => {
  process.stderr.write(`openclaw-queue: ${err.stack || err}\n`);
  process.exit(1);
});
