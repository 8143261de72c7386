import { spawn } from 'node:child_process';
import { existsSync, mkdirSync, openSync, readFileSync, rmSync } from 'node:fs';
import { dirname, join, resolve } from 'node:path';
import { fileURLToPath } from 'node:url';
import { unmountUnder } from './containerd.js';
import { createNetns, deleteNetns, inNetns } from './netns.js';
import type { k8s} from './kube.js';
import { loadKubeConfig } from './kube.js';
import { sandboxLayout, type SandboxLayout, type SandboxState } from './layout.js';
import { run, sleep } from './proc.js';

export interface StartOptions {
  dir: string;
  slot?: number;
  nodes?: number;
  /** Directory with etcd, kube-apiserver, kube-scheduler, kubectl, helm; built (or found in the cache) when absent. */
  binDir?: string;
  leaseRenewMs?: number;
  /** The API server writes an audit log of every write request (auditLogPath), for a benchmark that counts writes by client. */
  auditWrites?: boolean;
  logLevel?: 'info' | 'debug';
  /** Progress lines (default: stderr). */
  progress?: (line: string) => void;
}

/** The repository root (this file lives in packages/sandbox/src, or is bundled into dist/). */
export function repoRoot(): string {
  let dir = dirname(fileURLToPath(import.meta.url));
  while (!existsSync(join(dir, 'packages', 'sandbox', 'go', 'build.sh'))) {
    const up = dirname(dir);
    if (up === dir) throw new Error('cannot find the kube-node-ready repository root from ' + fileURLToPath(import.meta.url));
    dir = up;
  }
  return dir;
}

/** Builds the sandbox binaries (or finds them in ~/.cache/kube-node-ready) and returns their directory. */
export async function ensureBinaries(progress: (line: string) => void): Promise<string> {
  const script = join(repoRoot(), 'packages', 'sandbox', 'go', 'build.sh');
  return new Promise((resolvePromise, reject) => {
    const child = spawn('bash', [script], { stdio: ['ignore', 'pipe', 'pipe'] });
    let out = '';
    child.stdout.on('data', (d: Buffer) => (out += d.toString()));
    child.stderr.on('data', (d: Buffer) => {
      for (const line of d.toString().split('\n')) if (line.trim()) progress(line);
    });
    child.on('error', reject);
    child.on('close', (code) => {
      const dir = out.trim().split('\n').pop() ?? '';
      if (code === 0 && dir) resolvePromise(dir);
      else reject(new Error(`building the sandbox binaries failed (exit ${code}); see the output above`));
    });
  });
}

/**
 * Starts a sandbox in the background: creates its network namespace, launches the daemon inside
 * it and waits until the control plane, DNS, service proxy and simulated kubelet are ready.
 * Needs root (network namespaces). Returns the daemon's state (kubeconfig path, apiserver URL).
 */
export async function startSandbox(opts: StartOptions): Promise<SandboxState> {
  const progress = opts.progress ?? ((l: string) => process.stderr.write(`${l}\n`));
  const layout = sandboxLayout(opts.dir, opts.slot ?? 0);
  const root = repoRoot();
  const bundle = join(root, 'dist', 'sandbox.mjs');
  if (!existsSync(bundle)) throw new Error(`${bundle} is missing: run \`make build\` (or \`npm run build\`) first`);
  const binDir = opts.binDir ?? (await ensureBinaries(progress));

  await stopSandbox(opts.dir, layout.slot, () => {});
  rmSync(layout.dir, { recursive: true, force: true });
  mkdirSync(layout.paths.logs, { recursive: true });
  progress(`sandbox: creating network namespace ${layout.netns}`);
  await createNetns(layout);

  const logFd = openSync(join(layout.paths.logs, 'daemon.log'), 'a');
  const args = [
    process.execPath,
    '--enable-source-maps',
    bundle,
    'daemon',
    `--dir=${layout.dir}`,
    `--slot=${layout.slot}`,
    `--bin-dir=${binDir}`,
    `--nodes=${opts.nodes ?? 0}`,
    ...(opts.leaseRenewMs ? [`--lease-renew-ms=${opts.leaseRenewMs}`] : []),
    ...(opts.auditWrites ? ['--audit-writes'] : []),
    `--log-level=${opts.logLevel ?? 'info'}`,
  ];
  const argv = inNetns(layout, args);
  const child = spawn(argv[0]!, argv.slice(1), { detached: true, stdio: ['ignore', logFd, logFd] });
  child.unref();

  const started = Date.now();
  let lastReport = 0;
  progress(`sandbox: starting etcd, kube-apiserver, kube-controller-manager, kube-scheduler, Karpenter, DNS and the simulated kubelet (logs: ${layout.paths.logs})`);
  for (;;) {
    const state = readStateFile(layout);
    if (state?.ready) {
      progress(`sandbox: ready in ${((Date.now() - started) / 1000).toFixed(1)}s, kubeconfig ${state.kubeconfig}`);
      return state;
    }
    if (child.exitCode !== null || (state && state.ready === false && Date.now() - started > 1000)) {
      const tail = readTail(join(layout.paths.logs, 'daemon.log'));
      await deleteNetns(layout);
      throw new Error(`the sandbox daemon failed to start; last log lines:\n${tail}`);
    }
    if (Date.now() - started > 180_000) {
      await stopSandbox(opts.dir, layout.slot, progress);
      throw new Error(`the sandbox did not become ready within 180s; see ${layout.paths.logs}`);
    }
    if (Date.now() - lastReport > 5000 && Date.now() - started > 4000) {
      lastReport = Date.now();
      progress(`sandbox: still starting (${Math.round((Date.now() - started) / 1000)}s)...`);
    }
    await sleep(200);
  }
}

/** Stops the sandbox in `dir`: the daemon and everything in its namespace, then the namespace itself. */
export async function stopSandbox(dir: string, slot = 0, progress: (l: string) => void = (l) => process.stderr.write(`${l}\n`)): Promise<void> {
  const layout = sandboxLayout(dir, slot);
  const state = readStateFile(layout);
  const pids = await netnsPids(layout);
  if (!state && pids.length === 0) {
    await deleteNetns(layout);
    return;
  }
  progress(`sandbox: stopping ${layout.netns}`);
  if (state?.pid && alive(state.pid)) {
    process.kill(state.pid, 'SIGTERM');
    // Real nodes stop one by one, a few seconds each (their pods, containerd, mounts).
    const deadline = Date.now() + 60_000;
    while (alive(state.pid) && Date.now() < deadline) await sleep(100);
  }
  // Whatever is still running in the namespace (a crashed daemon's children) is killed outright.
  for (const pid of await netnsPids(layout)) {
    try {
      process.kill(pid, 'SIGKILL');
    } catch {
      /* gone */
    }
  }
  for (let i = 0; i < 50 && (await netnsPids(layout)).length; i++) await sleep(100);
  await deleteNetns(layout);
  // Mounts a real node left (a daemon killed while it stopped one): the next start removes the directory.
  await unmountUnder(layout.dir);
  rmSync(layout.paths.state, { force: true });
}

async function netnsPids(layout: SandboxLayout): Promise<number[]> {
  const r = await run('ip', ['netns', 'pids', layout.netns]);
  if (r.code !== 0) return [];
  return r.stdout.split(/\s+/).filter(Boolean).map(Number);
}

function alive(pid: number): boolean {
  try {
    process.kill(pid, 0);
    return true;
  } catch {
    return false;
  }
}

function readStateFile(layout: SandboxLayout): SandboxState | undefined {
  try {
    return JSON.parse(readFileSync(layout.paths.state, 'utf8')) as SandboxState;
  } catch {
    return undefined;
  }
}

function readTail(file: string, lines = 30): string {
  try {
    return readFileSync(file, 'utf8').trim().split('\n').slice(-lines).join('\n');
  } catch {
    return '(no log)';
  }
}

export interface SandboxConnection {
  state: SandboxState;
  layout: SandboxLayout;
  kc: k8s.KubeConfig;
}

/** Connects to a running sandbox (for tests and the CLI). */
export function connectSandbox(dir: string): SandboxConnection {
  const abs = resolve(dir);
  let state: SandboxState;
  try {
    state = JSON.parse(readFileSync(join(abs, 'state.json'), 'utf8')) as SandboxState;
  } catch {
    throw new Error(`no sandbox is running in ${abs}: start one with \`make sandbox-up\``);
  }
  if (!state.ready) throw new Error(`the sandbox in ${abs} is not ready; see ${join(abs, 'logs')}`);
  return { state, layout: sandboxLayout(abs, state.slot), kc: loadKubeConfig(state.kubeconfig) };
}

/** Runs a command inside the sandbox's network namespace (where cluster addresses are reachable). */
export function execInSandbox(layout: SandboxLayout, argv: string[], input?: string) {
  const full = inNetns(layout, argv);
  return run(full[0]!, full.slice(1), { input });
}
