import { writeSync } from 'node:fs';
import { Worker } from 'node:worker_threads';
import { rng, type Rng } from './random.js';

/**
 * Seeded fuzzing for tests. Every case gets its own seed and a failure names it, so one case can be
 * replayed alone: KNR_FUZZ_SEED=<seed> npx vitest run --project unit <file>.
 */

export { rng, type Rng };

/** The seeds of `cases` cases (base, base + 1, ...), or only KNR_FUZZ_SEED when it is set. */
export function fuzzSeeds(base: number, cases: number): number[] {
  if (isReplay()) return [Number(process.env.KNR_FUZZ_SEED)];
  return Array.from({ length: cases }, (_, i) => base + i);
}

/** One case is replayed (KNR_FUZZ_SEED): assertions about the spread of all cases do not apply. */
export function isReplay(): boolean {
  return (process.env.KNR_FUZZ_SEED ?? '').trim() !== '';
}

/** Prefixes a failure with the seed of its case (keeping the error, so assertion diffs still show). */
export function withSeed(seed: number, err: unknown): Error {
  const error = err instanceof Error ? err : new Error(String(err));
  error.message = `fuzz case seed ${seed} (replay: KNR_FUZZ_SEED=${seed}): ${error.message}`;
  return error;
}

/**
 * Runs synchronous cases. A blocked thread cannot fail a test, so with `hangAfterCpuMs` a watchdog
 * thread kills the test process when one case has used that much CPU time, printing the case's
 * seed. CPU time, not wall time: a loaded machine, or a process paused by someone else's chaos
 * test, is not a hang.
 */
export function fuzz(base: number, cases: number, body: (r: Rng, seed: number) => void, opts: { hangAfterCpuMs?: number } = {}): void {
  const watchdog = opts.hangAfterCpuMs === undefined ? undefined : startWatchdog(opts.hangAfterCpuMs);
  try {
    for (const seed of fuzzSeeds(base, cases)) {
      watchdog?.enter(seed);
      try {
        body(rng(seed), seed);
      } catch (err) {
        throw withSeed(seed, err);
      } finally {
        watchdog?.exit();
      }
    }
  } finally {
    watchdog?.stop();
  }
}

/** Runs asynchronous cases, `concurrency` at a time; a case not settled within `guardMs` fails as a hang. */
export async function fuzzAsync(
  base: number,
  cases: number,
  body: (r: Rng, seed: number) => Promise<void>,
  opts: { guardMs: number; concurrency?: number },
): Promise<void> {
  const seeds = fuzzSeeds(base, cases);
  let failure: Error | undefined;
  const runOne = async (seed: number) => {
    let timer: NodeJS.Timeout | undefined;
    const hang = new Promise<never>((_, reject) => {
      timer = setTimeout(() => reject(new Error(`no result within ${opts.guardMs}ms: a hang`)), opts.guardMs);
    });
    try {
      await Promise.race([body(rng(seed), seed), hang]);
    } catch (err) {
      failure ??= withSeed(seed, err);
    } finally {
      clearTimeout(timer);
    }
  };
  const lanes = Array.from({ length: Math.min(opts.concurrency ?? 1, seeds.length) }, async () => {
    for (let seed = seeds.shift(); seed !== undefined && !failure; seed = seeds.shift()) await runOne(seed);
  });
  await Promise.all(lanes);
  if (failure) throw failure;
}

interface Watchdog {
  enter(seed: number): void;
  exit(): void;
  stop(): void;
}

// Plain JavaScript: the thread is not transformed by vitest. It writes to fd 2 itself, because a
// worker's process.stderr goes through the (blocked) main thread. process.cpuUsage() counts the
// whole process, the main thread included. state: [seed, CPU microseconds at the start, running].
const WATCHDOG = `
const { workerData } = require('node:worker_threads');
const { writeSync } = require('node:fs');
const state = new Float64Array(workerData.buffer);
setInterval(() => {
  const { user, system } = process.cpuUsage();
  if (state[2] === 1 && user + system - state[1] > workerData.ms * 1000) {
    writeSync(2, '\\nfuzz case seed ' + state[0] + ' used more than ' + workerData.ms + 'ms of CPU: a hang; killing the test process (replay: KNR_FUZZ_SEED=' + state[0] + ')\\n');
    process.kill(process.pid, 'SIGKILL');
  }
}, 50);
`;

function startWatchdog(ms: number): Watchdog {
  const state = new Float64Array(new SharedArrayBuffer(24));
  const worker = new Worker(WATCHDOG, { eval: true, workerData: { buffer: state.buffer, ms } });
  worker.unref();
  worker.on('error', (err) => writeSync(2, `fuzz watchdog failed: ${err.message}\n`));
  return {
    enter(seed) {
      const { user, system } = process.cpuUsage();
      state[0] = seed;
      state[1] = user + system;
      state[2] = 1;
    },
    exit() {
      state[2] = 0;
    },
    stop() {
      void worker.terminate();
    },
  };
}
