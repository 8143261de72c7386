// Real nodes of one sandbox at a time on this machine. make test runs two sandboxes side by side (the
// sandbox project, and the serial project on slot +30), and real nodes are the heaviest thing a test
// runs: a kubelet, containerd, kube-proxy and the worker each, and CoreDNS on the system node; two
// sandboxes' real nodes busy at once overload 2 cores. So a test file that starts real nodes holds
// this lock from its first hook to its last: shared by the files of one sandbox (its slot),
// exclusive between sandboxes. A holder is a process; one that died holds nothing.
import { mkdirSync, readFileSync, rmdirSync, statSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { setTimeout as sleep } from 'node:timers/promises';
import { afterAll, beforeAll } from 'vitest';
import { sandbox } from '../sandbox.js';

const STATE = join(tmpdir(), 'knr-real-nodes.lock.json');
/** mkdir is atomic: the directory is the mutex around reading and writing STATE. */
const MUTEX = join(tmpdir(), 'knr-real-nodes.lock.d');
/** Longer than the longest real-node file of the other sandbox (about 6 minutes), with room for a loaded machine. */
const WAIT_MS = 30 * 60_000;

interface State {
  slot?: number;
  holders: Array<{ pid: number; token: string }>;
}

function alive(pid: number): boolean {
  try {
    process.kill(pid, 0);
    return true;
  } catch (err) {
    return (err as NodeJS.ErrnoException).code === 'EPERM';
  }
}

async function withMutex<T>(fn: (s: State) => T): Promise<T> {
  for (;;) {
    try {
      mkdirSync(MUTEX);
      break;
    } catch (err) {
      if ((err as NodeJS.ErrnoException).code !== 'EEXIST') throw err;
      // A holder killed between mkdir and rmdir: the mutex is held for milliseconds, never 30 s.
      try {
        if (Date.now() - statSync(MUTEX).mtimeMs > 30_000) rmdirSync(MUTEX);
      } catch {
        // removed meanwhile
      }
      await sleep(50);
    }
  }
  try {
    let state: State = { holders: [] };
    try {
      state = JSON.parse(readFileSync(STATE, 'utf8')) as State;
    } catch {
      // none yet, or unreadable: nobody holds it
    }
    state.holders = state.holders.filter((h) => alive(h.pid));
    if (state.holders.length === 0) delete state.slot;
    const result = fn(state);
    writeFileSync(STATE, JSON.stringify(state));
    return result;
  } finally {
    rmdirSync(MUTEX);
  }
}

/**
 * Registers hooks that hold the machine's real-node lock for the whole test file; call it before
 * the file's other hooks, so that it is taken first and let go last.
 */
export function holdRealNodeLock(): void {
  const token = `${process.pid}-${Math.random().toString(36).slice(2)}`;
  beforeAll(async () => {
    const slot = sandbox().layout.slot;
    const deadline = Date.now() + WAIT_MS;
    let logged = false;
    for (;;) {
      const held = await withMutex((s) => {
        if (s.slot !== undefined && s.slot !== slot) return s;
        s.slot = slot;
        s.holders.push({ pid: process.pid, token });
        return undefined;
      });
      if (!held) return;
      if (Date.now() > deadline) {
        throw new Error(`the machine's real nodes (${STATE}) are still held by the sandbox on slot ${held.slot} (processes ${held.holders.map((h) => h.pid).join(', ')}) after ${WAIT_MS / 60_000} minutes`);
      }
      if (!logged) console.log(`real nodes: waiting for the sandbox on slot ${held.slot} to finish its real-node tests (${STATE})`);
      logged = true;
      await sleep(2_000);
    }
  }, WAIT_MS + 60_000);
  afterAll(async () => {
    await withMutex((s) => {
      s.holders = s.holders.filter((h) => h.token !== token);
      if (s.holders.length === 0) delete s.slot;
    });
  });
}
