import { execFileSync } from 'node:child_process';
import { existsSync, readdirSync, readFileSync } from 'node:fs';
import { join } from 'node:path';
import type { TestProject } from 'vitest/node';
import { processesAndMountsUnder } from './leftovers.js';
import { DAEMON_UNHANDLED, repoRoot, startSandbox, stopSandbox } from '@kube-node-ready/sandbox';

declare module 'vitest' {
  export interface ProvidedContext {
    sandboxDir: string;
  }
}

/**
 * Starts one sandbox for the whole `sandbox` test project (slot 1, or KNR_TEST_SLOT, so it does
 * not collide with a developer's `make sandbox-up` on slot 0), and stops it afterwards. With KNR_SANDBOX_DIR set,
 * the tests use that running sandbox instead and leave it up.
 */
export default async function setup(project: TestProject): Promise<(() => Promise<void>) | undefined> {
  const root = repoRoot();
  const existing = process.env.KNR_SANDBOX_DIR;
  if (existing) {
    project.provide('sandboxDir', existing);
    return undefined;
  }
  // The simulated kubelet runs the product from its bundle, as the image would.
  execFileSync(process.execPath, [join(root, 'scripts', 'bundle.mjs'), '--quiet'], { stdio: 'inherit' });
  // KNR_TEST_SLOT lets two test runs (say, a fresh clone beside a working tree) share the machine.
  // The serial project (tests that disrupt the cluster) gets a sandbox of its own, 30 slots up.
  const serial = project.name === 'sandbox-serial';
  const slot = (Number(process.env.KNR_TEST_SLOT ?? '1') + (serial ? 30 : 0)) % 100;
  const dir = join(root, '.sandbox', `test-${slot}`);
  await startSandbox({ dir, slot, progress: (l) => console.error(l) });
  project.provide('sandboxDir', dir);
  return async () => {
    await stopSandbox(dir, slot, () => {});
    // `sandbox down` leaves nothing of the real nodes (kubelets, containerd and its shims, kube-proxy,
    // their mounts, cgroups and network namespaces) nor of the pods' namespaces: checked after every run.
    const left = leftovers(dir, slot);
    if (left.length) {
      console.error(`the ${project.name} sandbox left ${left.length} thing(s) behind after it stopped, a sandbox bug:\n${left.slice(0, 20).join('\n')}`);
      process.exitCode = 1;
    }
    // The daemon logs a rejection nobody handled instead of ending the cluster: still a failure.
    const log = join(dir, 'logs', 'daemon.log');
    const bugs = existsSync(log) ? readFileSync(log, 'utf8').split('\n').filter((l) => l.includes(DAEMON_UNHANDLED)) : [];
    if (bugs.length) {
      console.error(`the ${project.name} sandbox's daemon logged ${bugs.length} unhandled rejection(s), a sandbox bug (${log}):\n${bugs.slice(0, 5).join('\n')}`);
      process.exitCode = 1;
    }
  };
}

/** Processes, mounts, network namespaces and cgroups of the sandbox in `dir` (slot `slot`) still there. */
function leftovers(dir: string, slot: number): string[] {
  const left = processesAndMountsUnder(dir);
  // Every namespace the sandbox names for its slot: its pods' (knr<slot>-p*), its real nodes' (knr<slot>-n*, knr<slot>-s0).
  if (existsSync('/run/netns')) for (const ns of readdirSync('/run/netns')) if (ns.startsWith(`knr${slot}-`)) left.push(`network namespace ${ns}`);
  // The real nodes' cgroup roots (/knr<slot>-<node> in each hierarchy).
  for (const hierarchy of existsSync('/sys/fs/cgroup') ? readdirSync('/sys/fs/cgroup') : []) {
    const root = join('/sys/fs/cgroup', hierarchy);
    let entries: string[];
    try {
      entries = readdirSync(root);
    } catch {
      continue;
    }
    for (const e of entries) if (e.startsWith(`knr${slot}-`)) left.push(`cgroup ${join(root, e)}`);
  }
  return left;
}
