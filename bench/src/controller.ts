// The controller as users run it: dist/kube-node-ready.mjs (the bundle the image ships), with the
// Helm chart's ServiceAccounts and RBAC (rendered by `helm template`, applied with kubectl), a
// TokenRequest token of the controller's ServiceAccount, and a kubeconfig whose server is the
// sandbox's fault proxy (no faults), so every API request it makes is counted by verb and resource.
import { execFile, spawn, type ChildProcess } from 'node:child_process';
import { createWriteStream, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { stringify } from 'yaml';
import { certPaths, k8s, loadKubeConfig, repoRoot, startFaultProxy, type FaultProxy, type SandboxLayout, type SandboxState } from '@kube-node-ready/sandbox';
import { sleep, track } from './util.js';

export const NAMESPACE = 'kube-system';
export const TAINT = { key: 'node-ready/unverified', value: 'true', effect: 'NoSchedule' };
export const VERIFIED_LABEL = 'node-ready/verified';
/** The worker image of the bench's configuration (the sandbox maps it to dist/kube-node-ready.mjs). */
export const BENCH_WORKER_IMAGE = { repository: 'ghcr.io/kube-node-ready/kube-node-ready', tag: 'bench' };
/** A worker that writes a passing summary and exits at once (the sandbox's `kube-node-ready-instant`): a burst then measures the controller, not the checks. */
export const INSTANT_WORKER_IMAGE = { repository: 'ghcr.io/kube-node-ready/kube-node-ready-instant', tag: 'bench' };
const CONTROLLER_SA = 'kube-node-ready-controller';

/**
 * Renders the chart's ServiceAccounts, RBAC, worker PriorityClass and admission policies and applies
 * them (release kube-node-ready in kube-system, the workers there too); `set`: helm --set values.
 * The policies hold the controller to its worker image: `workerImage` is the one its configuration names.
 */
export async function applyChartRbac(state: SandboxState, workerImage: { repository: string; tag: string }, set: string[] = []): Promise<void> {
  const chart = join(repoRoot(), 'deploy', 'helm', 'kube-node-ready');
  const image = [`config.worker.image.repository=${workerImage.repository}`, `config.worker.image.tag=${workerImage.tag}`];
  const values = [`config.worker.namespace=${NAMESPACE}`, ...image, ...set].flatMap((v) => ['--set', v]);
  // helm template assumes an old Kubernetes unless told: the sandbox's, as its API server reports it.
  const kubeVersion = (await loadKubeConfig(state.kubeconfig).makeApiClient(k8s.VersionApi).getCode()).gitVersion;
  const only = ['serviceaccount', 'rbac', 'priorityclass', 'admission-policies'].flatMap((t) => ['--show-only', `templates/${t}.yaml`]);
  const manifest = await run(join(state.binDir, 'helm'), ['template', 'kube-node-ready', chart, '-n', NAMESPACE, '--kube-version', kubeVersion, ...values, ...only]);
  await run(join(state.binDir, 'kubectl'), ['--kubeconfig', state.kubeconfig, 'apply', '-f', '-'], manifest);
}

/** A kubeconfig for the controller's ServiceAccount; its server is the fault proxy, or the apiserver itself without one. */
export async function controllerKubeconfig(kc: k8s.KubeConfig, layout: SandboxLayout, proxy: FaultProxy | undefined, file: string): Promise<void> {
  const core = kc.makeApiClient(k8s.CoreV1Api);
  const tr = await core.createNamespacedServiceAccountToken({ name: CONTROLLER_SA, namespace: NAMESPACE, body: { spec: { audiences: [], expirationSeconds: 4 * 3600 } } });
  const token = tr.status?.token;
  if (!token) throw new Error('TokenRequest returned no token for the controller ServiceAccount');
  writeFileSync(
    file,
    stringify({
      apiVersion: 'v1',
      kind: 'Config',
      clusters: [{ name: 'bench', cluster: { server: proxy?.url ?? `https://${layout.apiHost}:${layout.apiPort}`, 'certificate-authority': certPaths(layout.paths.certs).caCert } }],
      users: [{ name: CONTROLLER_SA, user: { token } }],
      contexts: [{ name: 'bench', context: { cluster: 'bench', user: CONTROLLER_SA } }],
      'current-context': 'bench',
    }),
    { mode: 0o600 },
  );
}

export function startProxy(layout: SandboxLayout): Promise<FaultProxy> {
  const c = certPaths(layout.paths.certs);
  return startFaultProxy({ upstreamHost: layout.apiHost, upstreamPort: layout.apiPort, caFile: c.caCert, certFile: c.serverCert, keyFile: c.serverKey });
}

export interface ControllerTuning {
  maxConcurrentVerifications: number;
  workers: number;
  qps: number;
  burst: number;
}

/** The controller configuration the bench runs with: defaults except what is listed here. */
export function benchConfig(t: ControllerTuning, metricsPort: number, workerImage = BENCH_WORKER_IMAGE): Record<string, unknown> {
  return {
    worker: { image: { ...workerImage }, namespace: NAMESPACE },
    reconciliation: { maxConcurrentVerifications: t.maxConcurrentVerifications, workers: t.workers },
    nodeManagement: { taints: [TAINT] },
    leaderElection: { namespace: NAMESPACE },
    metrics: { bindAddress: `127.0.0.1:${metricsPort}` },
    kubernetes: { qps: t.qps, burst: t.burst },
  };
}

export const JOIN_CGROUPS = 'while [ "$1" != -- ]; do echo $$ > "$1" || exit 125; shift; done; shift; exec "$@"';

/** How the controller's Node.js process runs: its flags (NODE_OPTIONS) and the rest of its environment. */
export interface ControllerRuntime {
  nodeFlags: string[];
  env: Record<string, string>;
}

export const NO_RUNTIME: ControllerRuntime = { nodeFlags: [], env: {} };

/** For progress lines: "Node.js flags --a --b, environment K=V". */
export function describeRuntime(r: ControllerRuntime): string {
  const env = Object.entries(r.env).map(([k, v]) => `${k}=${v}`);
  return `Node.js flags ${r.nodeFlags.join(' ') || 'none'}, environment ${env.join(' ') || 'none'}`;
}

export class ControllerProcess {
  readonly child: ChildProcess;
  private output = '';
  private readonly waiters: Array<{ text: string; resolve: () => void }> = [];

  constructor(
    readonly configFile: string,
    kubeconfig: string,
    logFile: string,
    readonly metricsPort: number,
    /** The controller's Node.js flags and environment (the chart's, or an experiment's). */
    runtime: ControllerRuntime = NO_RUNTIME,
    /** HOSTNAME of the process: the prefix of its leader-election identity (replicas need their own). */
    hostname = 'bench-controller',
    /** The process joins the cgroup(s) of these cgroup.procs files before it starts: its memory limit. */
    procsFiles: readonly string[] = [],
  ) {
    const argv = [process.execPath, ...runtime.nodeFlags, join(repoRoot(), 'dist', 'kube-node-ready.mjs'), 'controller', '--config', configFile, '--kubeconfig', kubeconfig];
    // As the simulated kubelet starts a container: a shell joins the cgroups, then execs the process
    // (same pid), so every byte it allocates is charged to its limit.
    const [cmd, ...args] = procsFiles.length ? ['/bin/sh', '-c', JOIN_CGROUPS, 'knr-controller', ...procsFiles, '--', ...argv] : argv;
    this.child = track(spawn(cmd!, args, {
      stdio: ['ignore', 'pipe', 'pipe'],
      env: { ...runtime.env, PATH: process.env.PATH ?? '', HOSTNAME: hostname, POD_NAMESPACE: NAMESPACE },
    }));
    const log = createWriteStream(logFile);
    const scan = (d: Buffer) => {
      log.write(d);
      // Keep a bounded tail to look for start-up lines.
      this.output = (this.output + d.toString()).slice(-20_000);
      for (const w of [...this.waiters]) {
        if (this.output.includes(w.text)) {
          this.waiters.splice(this.waiters.indexOf(w), 1);
          w.resolve();
        }
      }
    };
    this.child.stdout!.on('data', scan);
    this.child.stderr!.on('data', scan);
  }

  /** The process has ended (exited or killed by a signal). */
  get exited(): boolean {
    return this.child.exitCode !== null || this.child.signalCode !== null;
  }

  /** The last 20 000 characters the process wrote. */
  get recentOutput(): string {
    return this.output;
  }

  get pid(): number {
    return this.child.pid!;
  }

  /** Resolves once the log contains `text`; rejects when the process exits first or after timeoutMs. */
  waitForLog(text: string, timeoutMs: number): Promise<void> {
    if (this.output.includes(text)) return Promise.resolve();
    return new Promise((resolve, reject) => {
      const timer = setTimeout(() => reject(new Error(`the controller did not log "${text}" within ${timeoutMs / 1000}s; last output:\n${this.output.slice(-3000)}`)), timeoutMs);
      const onExit = (code: number | null) => reject(new Error(`the controller exited (${code}) before logging "${text}":\n${this.output.slice(-3000)}`));
      this.child.once('exit', onExit);
      this.waiters.push({
        text,
        resolve: () => {
          clearTimeout(timer);
          this.child.off('exit', onExit);
          resolve();
        },
      });
    });
  }

  async metrics(): Promise<string> {
    const res = await fetch(`http://127.0.0.1:${this.metricsPort}/metrics`);
    return res.text();
  }

  async stop(): Promise<void> {
    if (this.exited) return;
    const exited = new Promise<void>((r) => this.child.once('exit', () => r()));
    this.child.kill('SIGTERM');
    await Promise.race([exited, sleep(35_000)]);
    if (!this.exited) {
      this.child.kill('SIGKILL');
      await exited;
    }
  }
}

/** Sums a Prometheus counter or histogram _count over label sets matching `filter`. */
export function metricSum(text: string, name: string, filter: (labels: string) => boolean = () => true): number {
  let sum = 0;
  for (const line of text.split('\n')) {
    if (!line.startsWith(name)) continue;
    const rest = line.slice(name.length);
    if (rest[0] !== '{' && rest[0] !== ' ') continue;
    const labels = rest[0] === '{' ? rest.slice(1, rest.indexOf('}')) : '';
    if (filter(labels)) sum += Number(line.slice(line.lastIndexOf(' ') + 1));
  }
  return sum;
}

/** A histogram's cumulative buckets (upper bound -> count), the label sets `filter` accepts summed. */
function histogramBuckets(text: string, name: string, filter: (labels: string) => boolean): Array<[number, number]> {
  const buckets = new Map<number, number>();
  const prefix = `${name}_bucket{`;
  for (const line of text.split('\n')) {
    if (!line.startsWith(prefix)) continue;
    const labels = line.slice(prefix.length, line.lastIndexOf('}'));
    if (!filter(labels)) continue;
    const le = /le="([^"]+)"/.exec(labels)?.[1];
    if (le === undefined) continue;
    const bound = le === '+Inf' ? Infinity : Number(le);
    buckets.set(bound, (buckets.get(bound) ?? 0) + Number(line.slice(line.lastIndexOf(' ') + 1)));
  }
  return [...buckets].sort(([a], [b]) => a - b);
}

/** The upper bound of the histogram bucket holding quantile q (the label sets `filter` accepts summed): Prometheus' le resolution. */
export function histogramQuantile(text: string, name: string, q: number, filter: (labels: string) => boolean = () => true): number {
  const sorted = histogramBuckets(text, name, filter);
  const total = sorted.at(-1)?.[1] ?? 0;
  if (total === 0) return 0;
  return sorted.find(([, count]) => count >= q * total)?.[0] ?? Infinity;
}

/** The share of a histogram's observations at or under `bound`, one of its bucket bounds (undefined: none observed, or no such bucket). */
export function histogramShareUnder(text: string, name: string, bound: number, filter: (labels: string) => boolean = () => true): number | undefined {
  const sorted = histogramBuckets(text, name, filter);
  const total = sorted.at(-1)?.[1] ?? 0;
  const under = sorted.find(([le]) => le === bound)?.[1];
  return total === 0 || under === undefined ? undefined : under / total;
}

function run(cmd: string, args: string[], input?: string): Promise<string> {
  return new Promise((resolve, reject) => {
    const child = execFile(cmd, args, { maxBuffer: 64 * 1024 * 1024 }, (err, stdout, stderr) => {
      if (err) reject(new Error(`${cmd} ${args.join(' ')}: ${err.message}\n${stderr}`));
      else resolve(stdout);
    });
    if (input !== undefined) child.stdin!.end(input);
  });
}
