// Side by side with node-readiness-controller (sigs.k8s.io/node-readiness-controller v0.5.0): one
// sandbox, both controllers running at once, each through a counting proxy of its own, bursts
// alternating between them (which goes first alternates too). Each measures the controller, not a
// worker:
//   kube-node-ready             node created -> taint removed, with the instant worker image
//                               (kube-node-ready-instant: the pod writes a passing summary and exits)
//   node-readiness-controller   condition True -> taint removed, the bench setting the rule's
//                               conditions the moment each node is created (examples/node-readiness-rule.yaml,
//                               selector narrowed to the bench's nodes)
// Both run as local processes the way the other bursts run kube-node-ready: the chart's
// ServiceAccount and RBAC (each rendered from its own chart), a TokenRequest token, leader election
// on, the chart's arguments. Per run: latency distributions, API writes per node (at the proxy),
// controller CPU seconds and RSS (from /proc). A contender that exited between its runs (lost its
// Lease) is started again before its next one, as its Deployment would restart it.
import { spawn } from 'node:child_process';
import { readFileSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { parse, stringify } from 'yaml';
import { applyObjects, certPaths, k8s, NODE_READINESS_CONTROLLER_VERSION, NODE_READINESS_RULES, nodeReadinessDir, renderNodeReadinessChart, sandboxLayout, simulatedNode, stopSandbox, type FaultProxy, type SandboxState } from '@kube-node-ready/sandbox';
import { freshSandbox, RUN_LABEL, settle, startObserver, waitForOpened, type BenchEnv } from './burst.js';
import { applyChartRbac, benchConfig, INSTANT_WORKER_IMAGE, ControllerProcess, controllerKubeconfig, JOIN_CGROUPS, startProxy, TAINT } from './controller.js';
import { createRealisticNodes, realisticNodeName } from './nodes.js';
import { ProcessSampler, sampleProcess } from './proc.js';
import { distribution, type Distribution } from './stats.js';
import { pool, round, sleep, track } from './util.js';

export type Contender = 'kube-node-ready' | 'node-readiness-controller';
/** kube-node-ready's leader election in the side-by-side runs (see runSideBySide). */
export const LONG_LEASE = { leaseDuration: '60s', renewDeadline: '40s', retryPeriod: '5s' };
const NRC_NAMESPACE = 'node-readiness-controller';
const SIDE_LABEL = 'bench.kube-node-ready.io/side';

interface ExampleRule {
  metadata: { name: string };
  spec: { conditions: Array<{ type: string; requiredStatus: string }>; taint: k8s.V1Taint; nodeSelector: { matchLabels?: Record<string, string> } };
}

export interface SideRun {
  contender: Contender;
  size: number;
  repetition: number;
  /** Order within the pair (1: ran first). */
  order: number;
  opened: number;
  createSpreadMs: number;
  totalMs?: number;
  /** The reaction: ours node created -> taint removed; theirs condition True -> taint removed. */
  reactionMs: Distribution;
  /** Node created -> taint removed, for both. */
  openAfterNodeCreatedMs: Distribution;
  /**
   * kube-node-ready only: the controller's own share of the reaction, (worker pod created - node
   * created) + (taint removed - worker pod finished); the rest is the instant worker pod's life
   * (scheduling, the kubelet starting it in its network namespace, its exit, its status).
   */
  controllerOnlyMs?: Distribution;
  /** kube-node-ready only: worker pod created -> pod finished (Succeeded). */
  workerPodMs?: Distribution;
  api: { byKind: Record<string, number>; writesPerNode: number; nodeWritesPerNode: number; requestsPerNode: number };
  controller: { cpuSeconds: number; cpuMsPerNode: number; peakRssMiB: number; rssMiBAtEnd: number };
  /** Per node: reaction ms (the chart's CDF). */
  samples: number[];
  /** The contender had exited since its last run and was started again just before this one. */
  restartedBefore?: boolean;
}

/**
 * Both controllers' RSS with `nodes` realistic Nodes in the cluster (both list and watch every
 * Node): measured before the bursts, on the same processes, the Nodes deleted again afterwards.
 */
export interface FootprintPoint {
  nodes: number;
  /** One Node's JSON as the API returns it (status with images and node info, managedFields). */
  nodeObjectBytes: number;
  createMs: number;
  sampleWindowMs: number;
  rssMiB: Record<Contender, { mean: number; max: number }>;
  /** CPU seconds each spent from the first Node created to the end of the window. */
  cpuSeconds: Record<Contender, number>;
}

export interface SideBySideResult {
  versions: { nodeReadinessController: string };
  /** Why the runs stopped before the last one (a controller exited during its own run), if they did. */
  stoppedEarly?: string;
  /** Each contender started again because it had exited (lost its Lease) between its runs. */
  restarts?: Record<Contender, number>;
  startupRssMiB: Record<Contender, number>;
  /** RSS with 1000 and 5000 realistic Nodes (--footprint), before the bursts. */
  footprint?: FootprintPoint[];
  runs: SideRun[];
  /** Per size, medians over repetitions and the ratio theirs / ours (same run). */
  bySize: Array<{
    size: number;
    ours: { reactionP50: number | undefined; reactionP99: number | undefined; controllerOnlyP50Median?: number; controllerOnlyP99Median?: number; writesPerNode: number; cpuSeconds: number; peakRssMiB: number };
    theirs: { reactionP50: number | undefined; reactionP99: number | undefined; writesPerNode: number; cpuSeconds: number; peakRssMiB: number };
    ratio: { reactionP50?: number; reactionP99?: number; writesPerNode?: number; cpuSeconds?: number; peakRssMiB?: number };
  }>;
}

export class NrcProcess {
  static readonly MARKERS = ['Successfully acquired lease', 'Starting workers'];
  readonly child;
  private output = '';
  private readonly seen = new Set<string>();
  /** `procsFiles`: the process joins these cgroups (its limits) before it starts, as a container's would. */
  constructor(binary: string, args: string[], kubeconfig: string, logFile: string, procsFiles: readonly string[] = []) {
    const [cmd, ...rest] = procsFiles.length ? ['/bin/sh', '-c', JOIN_CGROUPS, 'nrc-manager', ...procsFiles, '--', binary, ...args] : [binary, ...args];
    this.child = track(spawn(cmd!, rest, { stdio: ['ignore', 'pipe', 'pipe'], env: { PATH: process.env.PATH ?? '', KUBECONFIG: kubeconfig, HOME: '/tmp' } }));
    const log: string[] = [];
    const scan = (d: Buffer) => {
      log.push(d.toString());
      // Its log is verbose (a few lines per node): start-up lines are remembered, not searched for in the tail.
      const window = this.output.slice(-500) + d.toString();
      for (const m of NrcProcess.MARKERS) if (window.includes(m)) this.seen.add(m);
      this.output = (this.output + d.toString()).slice(-20_000);
    };
    this.child.stdout!.on('data', scan);
    this.child.stderr!.on('data', scan);
    this.child.once('exit', () => writeFileSync(logFile, log.join('')));
  }
  get pid(): number {
    return this.child.pid!;
  }
  /** Resolves once the process has logged `text` (one of MARKERS). */
  async waitFor(text: string, timeoutMs: number): Promise<void> {
    const deadline = Date.now() + timeoutMs;
    while (!this.seen.has(text)) {
      if (this.child.exitCode !== null) throw new Error(`node-readiness-controller exited (${this.child.exitCode}):\n${this.output.slice(-3000)}`);
      if (Date.now() > deadline) throw new Error(`node-readiness-controller did not log "${text}" within ${timeoutMs / 1000}s:\n${this.output.slice(-3000)}`);
      await sleep(200);
    }
  }
  async stop(): Promise<void> {
    if (this.child.exitCode !== null || this.child.signalCode !== null) return;
    const exited = new Promise<void>((r) => this.child.once('exit', () => r()));
    this.child.kill('SIGTERM');
    await Promise.race([exited, sleep(15_000)]);
    if (this.child.exitCode === null && this.child.signalCode === null) this.child.kill('SIGKILL');
  }
}

/** A kubeconfig for a ServiceAccount, its server the given proxy (else the API server itself). */
export async function saKubeconfig(kc: k8s.KubeConfig, state: SandboxState, proxy: FaultProxy | undefined, namespace: string, sa: string, file: string): Promise<void> {
  const layout = sandboxLayout(state.dir, state.slot);
  const tr = await kc.makeApiClient(k8s.CoreV1Api).createNamespacedServiceAccountToken({ name: sa, namespace, body: { spec: { audiences: [], expirationSeconds: 4 * 3600 } } });
  writeFileSync(
    file,
    stringify({
      apiVersion: 'v1',
      kind: 'Config',
      clusters: [{ name: 'bench', cluster: { server: proxy?.url ?? `https://${layout.apiHost}:${layout.apiPort}`, 'certificate-authority': certPaths(layout.paths.certs).caCert } }],
      users: [{ name: sa, user: { token: tr.status?.token ?? '' } }],
      contexts: [{ name: 'bench', context: { cluster: 'bench', user: sa } }],
      'current-context': 'bench',
    }),
    { mode: 0o600 },
  );
}

const WRITE = /^(create|update|patch|delete|deletecollection|apply) /;

export async function runSideBySide(env: BenchEnv, sizes: number[], reps: number, onRun: (partial: SideBySideResult) => void = () => {}, footprintCounts: readonly number[] = []): Promise<SideBySideResult> {
  const { state, kc } = await freshSandbox(env, 'side by side');
  const core = kc.makeApiClient(k8s.CoreV1Api);
  const layout = sandboxLayout(env.sandboxDir, env.slot);
  const proxies: FaultProxy[] = [];
  let ours: ControllerProcess | undefined;
  let theirs: NrcProcess | undefined;
  try {
    // kube-node-ready: the chart's RBAC and admission policies, the instant worker image.
    await applyChartRbac(state, INSTANT_WORKER_IMAGE);
    const oursProxy = await startProxy(layout);
    proxies.push(oursProxy);
    const oursKubeconfig = join(env.sandboxDir, 'controller.kubeconfig');
    await controllerKubeconfig(kc, layout, oursProxy, oursKubeconfig);
    const metricsPort = 18000 + 150 + env.slot;
    const configFile = join(env.sandboxDir, 'controller.yaml');
    const config = benchConfig(env.tuning, metricsPort, INSTANT_WORKER_IMAGE) as { leaderElection: Record<string, string> };
    // A longer Lease than the product's 15 s / 10 s / 2 s: a renewal goes through the bench's counting
    // proxy, in the bench's own process, which a large burst keeps busy past the product's renew
    // deadline; kube-node-ready would then lose its Lease and exit, which ends the comparison.
    // node-readiness-controller keeps its chart's defaults (bench/results/2026-11-23-side-by-side.md says so).
    Object.assign(config.leaderElection, LONG_LEASE);
    writeFileSync(configFile, stringify(config));
    const startOurs = (n: number) =>
      new ControllerProcess(configFile, oursKubeconfig, join(env.logDir, `side-kube-node-ready${n ? `-restart${n}` : ''}.log`), metricsPort, env.controller);
    ours = startOurs(0);

    // node-readiness-controller: its chart's CRD, ServiceAccount and RBAC; the chart's arguments.
    await core.createNamespace({ body: { metadata: { name: NRC_NAMESPACE } } });
    const objects = await renderNodeReadinessChart(state.binDir, NRC_NAMESPACE, 'node-readiness-controller');
    await applyObjects({ state }, objects.filter((o) => o.kind !== 'Deployment'));
    const deployment = objects.find((o) => o.kind === 'Deployment') as k8s.V1Deployment;
    const pod = deployment.spec!.template.spec!;
    const theirsProxy = await startProxy(layout);
    proxies.push(theirsProxy);
    const theirsKubeconfig = join(env.sandboxDir, 'nrc.kubeconfig');
    await saKubeconfig(kc, state, theirsProxy, NRC_NAMESPACE, pod.serviceAccountName!, theirsKubeconfig);
    const probePort = 18000 + 170 + env.slot;
    const args = (pod.containers[0]!.args ?? []).map((a) => (a.startsWith('--health-probe-bind-address=') ? `--health-probe-bind-address=127.0.0.1:${probePort}` : a));
    if (!args.some((a) => a.startsWith('--leader-election-namespace'))) args.push(`--leader-election-namespace=${NRC_NAMESPACE}`);
    const startTheirs = (n: number) =>
      new NrcProcess(join(nodeReadinessDir(state.binDir), 'manager'), args, theirsKubeconfig, join(env.logDir, `side-node-readiness-controller${n ? `-restart${n}` : ''}.log`));
    theirs = startTheirs(0);

    // The example's rule, narrowed to the bench's node-readiness-controller nodes.
    const rule = parse(readFileSync(join(env.root, 'examples', 'node-readiness-rule.yaml'), 'utf8')) as ExampleRule;
    rule.spec.nodeSelector.matchLabels = { ...rule.spec.nodeSelector.matchLabels, [SIDE_LABEL]: 'node-readiness-controller' };
    await kc.makeApiClient(k8s.CustomObjectsApi).createClusterCustomObject({ ...NODE_READINESS_RULES, body: rule });

    await ours.waitForLog('starting to reconcile', 90_000);
    await theirs.waitFor('Successfully acquired lease', 90_000);
    await theirs.waitFor('Starting workers', 60_000);
    await sleep(1000);
    const startupRssMiB = { 'kube-node-ready': round(sampleProcess(ours.pid)?.rssMiB ?? 0, 1), 'node-readiness-controller': round(sampleProcess(theirs.pid)?.rssMiB ?? 0, 1) } as Record<Contender, number>;
    env.out(`side by side: both controllers lead; RSS at start: kube-node-ready ${startupRssMiB['kube-node-ready']} MiB, node-readiness-controller ${startupRssMiB['node-readiness-controller']} MiB`);

    const runs: SideRun[] = [];
    const restarts: Record<Contender, number> = { 'kube-node-ready': 0, 'node-readiness-controller': 0 };
    /**
     * A contender that exited since its last run (both exit when they lose their Lease, which a
     * renewal through the bench's busy proxy can during the other one's 1000-node burst) is started
     * again before its next run, as its Deployment would restart it, and the restart is reported.
     * One that exits during its own run ends the comparison.
     */
    const restartIfExited = async (contender: Contender): Promise<boolean> => {
      const child = contender === 'kube-node-ready' ? ours!.child : theirs!.child;
      if (child.exitCode === null && child.signalCode === null) return false;
      const n = ++restarts[contender];
      env.out(`side by side: ${contender} exited (${child.exitCode ?? child.signalCode}) after its last run; starting it again, as its Deployment would (restart ${n})`);
      if (contender === 'kube-node-ready') {
        ours = startOurs(n);
        await ours.waitForLog('starting to reconcile', 120_000);
      } else {
        theirs = startTheirs(n);
        await theirs.waitFor('Successfully acquired lease', 120_000);
        await theirs.waitFor('Starting workers', 60_000);
      }
      await sleep(1000);
      return true;
    };
    let stoppedEarly: string | undefined;
    let footprintPoints: FootprintPoint[] | undefined;
    try {
      if (footprintCounts.length > 0) {
        footprintPoints = await footprint(env, kc, { 'kube-node-ready': ours.pid, 'node-readiness-controller': theirs.pid }, footprintCounts);
        onRun({ versions: { nodeReadinessController: NODE_READINESS_CONTROLLER_VERSION }, startupRssMiB, footprint: footprintPoints, runs, bySize: [] });
      }
      for (const size of sizes) {
        for (let rep = 1; rep <= reps; rep++) {
          const order: Contender[] = rep % 2 === 1 ? ['kube-node-ready', 'node-readiness-controller'] : ['node-readiness-controller', 'kube-node-ready'];
          for (const [i, contender] of order.entries()) {
            const isOurs = contender === 'kube-node-ready';
            const restartedBefore = await restartIfExited(contender);
            const r = await oneRun(env, state, core, {
              contender,
              size,
              repetition: rep,
              order: i + 1,
              pid: isOurs ? ours.pid : theirs.pid,
              proxy: isOurs ? oursProxy : theirsProxy,
              taint: isOurs ? TAINT : rule.spec.taint,
              conditions: isOurs ? [] : rule.spec.conditions.map((c) => c.type),
              alive: () => (isOurs ? ours!.child.exitCode === null : theirs!.child.exitCode === null),
            });
            runs.push(restartedBefore ? { ...r, restartedBefore } : r);
            onRun({ versions: { nodeReadinessController: NODE_READINESS_CONTROLLER_VERSION }, startupRssMiB, ...(footprintPoints ? { footprint: footprintPoints } : {}), runs, bySize: summarizeSides(runs), restarts });
            env.out(
              `side by side ${size} (run ${rep}) ${contender}: ${r.opened}/${size} opened, reaction p50 ${r.reactionMs.p50 ?? '-'} ms p99 ${r.reactionMs.p99 ?? '-'} ms, ` +
                `${r.api.writesPerNode} writes/node, ${r.controller.cpuSeconds} CPU-s, peak RSS ${r.controller.peakRssMiB} MiB`,
            );
          }
        }
      }
    } catch (err) {
      // A controller that exits (kube-node-ready does when it loses its Lease) ends the comparison; the runs so far stand.
      stoppedEarly = err instanceof Error ? err.message : String(err);
      env.out(`side by side: stopped early: ${stoppedEarly}`);
    }
    return { versions: { nodeReadinessController: NODE_READINESS_CONTROLLER_VERSION }, startupRssMiB, ...(footprintPoints ? { footprint: footprintPoints } : {}), runs, bySize: summarizeSides(runs), restarts, ...(stoppedEarly ? { stoppedEarly } : {}) };
  } finally {
    await ours?.stop();
    await theirs?.stop();
    for (const p of proxies) await p.close();
    await stopSandbox(env.sandboxDir, env.slot, () => {});
  }
}

/** How long both controllers' RSS is sampled at each footprint size, after the Nodes are in. */
const FOOTPRINT_WINDOW_MS = 30_000;

/**
 * Both controllers' RSS with `counts` realistic Nodes in the cluster (cumulative: 1000, then 4000
 * more for 5000). The Nodes are as a kubelet on EKS registers them (labels, node info, 50 images,
 * conditions; kubeletNodeStatus), verified and untainted, so neither controller has work on them:
 * what is measured is the cost of knowing them. Not played by the simulated kubelet, so their
 * Leases are not renewed and kube-controller-manager marks them Unknown after its grace period,
 * the same churn for both. Deleted again before the bursts.
 */
async function footprint(env: BenchEnv, kc: k8s.KubeConfig, pids: Record<Contender, number>, counts: readonly number[]): Promise<FootprintPoint[]> {
  const contenders = Object.keys(pids) as Contender[];
  const points: FootprintPoint[] = [];
  let created = 0;
  try {
    for (const count of counts) {
      const cpuBefore = Object.fromEntries(contenders.map((c) => [c, sampleProcess(pids[c])?.cpuSeconds ?? 0])) as Record<Contender, number>;
      const { ms: createMs, nodeObjectBytes } = await createRealisticNodes(kc, 'footprint', created, count, (line) => env.out(`side by side footprint: ${line}`));
      created = Math.max(created, count);
      env.out(`side by side footprint: ${count} realistic nodes in (${nodeObjectBytes} bytes each, ${(createMs / 1000).toFixed(1)}s); sampling both controllers' RSS for ${FOOTPRINT_WINDOW_MS / 1000}s`);
      await sleep(5000); // both take the last of them in
      const samplers = contenders.map((c) => ({ c, sampler: new ProcessSampler(pids[c], 1000) }));
      await sleep(FOOTPRINT_WINDOW_MS);
      const rssMiB = {} as FootprintPoint['rssMiB'];
      const cpuSeconds = {} as FootprintPoint['cpuSeconds'];
      for (const { c, sampler } of samplers) {
        const last = sampler.stop();
        const rss = sampler.samples.map((x) => x.rssMiB);
        rssMiB[c] = { mean: round(rss.reduce((a, b) => a + b, 0) / Math.max(1, rss.length), 1), max: round(Math.max(0, ...rss), 1) };
        cpuSeconds[c] = round((last?.cpuSeconds ?? 0) - cpuBefore[c], 2);
      }
      points.push({ nodes: count, nodeObjectBytes, createMs, sampleWindowMs: FOOTPRINT_WINDOW_MS, rssMiB, cpuSeconds });
      env.out(`side by side footprint ${count} nodes: RSS mean/max kube-node-ready ${rssMiB['kube-node-ready'].mean}/${rssMiB['kube-node-ready'].max} MiB, node-readiness-controller ${rssMiB['node-readiness-controller'].mean}/${rssMiB['node-readiness-controller'].max} MiB`);
    }
  } finally {
    env.out(`side by side footprint: deleting the ${created} nodes`);
    await pool(Array.from({ length: created }, (_, i) => i), 50, async (i) => {
      await kc.makeApiClient(k8s.CoreV1Api).deleteNode({ name: realisticNodeName(i) }).catch(() => undefined);
    });
  }
  return points;
}

interface RunSpec {
  contender: Contender;
  size: number;
  repetition: number;
  order: number;
  pid: number;
  proxy: FaultProxy;
  taint: k8s.V1Taint;
  /** Conditions the bench sets True the moment a node is created (node-readiness-controller's inputs). */
  conditions: string[];
  alive: () => boolean;
}

async function oneRun(env: BenchEnv, state: SandboxState, core: k8s.CoreV1Api, s: RunSpec): Promise<SideRun> {
  const tag = `side by side ${s.size} (run ${s.repetition}) ${s.contender}`;
  const runId = `s${s.size}-r${s.repetition}-${s.contender === 'kube-node-ready' ? 'knr' : 'nrc'}`;
  const times = new Map<string, { added?: number; condition?: number; opened?: number; podCreated?: number; podFinished?: number }>();
  let opened = 0;
  const obs = startObserver(
    env,
    state,
    `${RUN_LABEL}=${runId}`,
    (line) => {
      if (!line.node) return;
      let n = times.get(line.node);
      if (!n) times.set(line.node, (n = {}));
      if (line.e === 'nodeAdded') n.added = line.t;
      else if (line.e === 'conditionTrue') n.condition = line.t;
      else if (line.e === 'podCreated') n.podCreated = Math.min(n.podCreated ?? line.t, line.t);
      else if (line.e === 'podFinished' && line.phase === 'Succeeded') n.podFinished = line.t;
      else if (line.e === 'opened') {
        n.opened = line.t;
        opened++;
      }
    },
    // kube-node-ready opens a node by removing its taint and labelling it verified; the rule's
    // taint going is the whole of node-readiness-controller's answer.
    s.contender === 'kube-node-ready' ? { taintKey: s.taint.key, verifiedLabel: 'node-ready/verified' } : { taintKey: s.taint.key, verifiedLabel: '', conditionType: s.conditions[0]! },
  );
  try {
    await obs.ready;
    const proxyBefore = s.proxy.requestsByKind();
    const cpuBefore = sampleProcess(s.pid)!;
    const sampler = new ProcessSampler(s.pid, 250);
    const names = Array.from({ length: s.size }, (_, i) => `side-${runId}-${String(i + 1).padStart(4, '0')}`);
    const labels: Record<string, string> = { [RUN_LABEL]: runId, ...(s.conditions.length ? { [SIDE_LABEL]: 'node-readiness-controller' } : {}) };
    const createStart = Date.now();
    await pool(names, 50, async (name) => {
      await core.createNode({ body: simulatedNode({ name, labels, taints: [s.taint] }) });
      if (s.conditions.length) {
        const now = new Date();
        await core.patchNodeStatus(
          { name, body: { status: { conditions: s.conditions.map((type) => ({ type, status: 'True', reason: 'Bench', message: 'set by the bench', lastHeartbeatTime: now, lastTransitionTime: now })) } } },
          k8s.setHeaderOptions('Content-Type', k8s.PatchStrategy.StrategicMergePatch),
        );
      }
    });
    const createSpreadMs = Date.now() - createStart;
    await waitForOpened({
      tag,
      out: env.out,
      opened: () => opened,
      size: s.size,
      since: createStart,
      timeoutMs: 120_000 + s.size * 600,
      everyMs: 5000,
      gone: () => (s.alive() ? undefined : 'the controller exited'),
    });
    await settle(s.proxy, 3000, 20_000);
    const cpuAfter = sampler.stop()!;
    const byKind = diff(s.proxy.requestsByKind(), proxyBefore);
    const per = (n: number) => round(n / Math.max(1, opened), 2);
    const sum = (pred: (k: string) => boolean) => Object.entries(byKind).filter(([k]) => pred(k) && !k.includes('leases.')).reduce((a, [, v]) => a + v, 0);
    const nodes = [...times.values()].filter((n) => n.added !== undefined);
    const t0 = Math.min(...nodes.map((n) => n.added!));
    const reaction = nodes
      .map((n) => (n.opened === undefined ? undefined : n.opened - (s.conditions.length ? (n.condition ?? n.added!) : n.added!)))
      .filter((v): v is number => v !== undefined);
    const openedTimes = nodes.map((n) => n.opened).filter((t): t is number => t !== undefined);
    return {
      contender: s.contender,
      size: s.size,
      repetition: s.repetition,
      order: s.order,
      opened,
      createSpreadMs,
      ...(openedTimes.length ? { totalMs: Math.max(...openedTimes) - t0 } : {}),
      reactionMs: distribution(reaction),
      openAfterNodeCreatedMs: distribution(nodes.filter((n) => n.opened !== undefined).map((n) => n.opened! - n.added!)),
      ...(s.conditions.length
        ? {}
        : {
            controllerOnlyMs: distribution(
              nodes.filter((n) => n.opened !== undefined && n.podCreated !== undefined && n.podFinished !== undefined).map((n) => n.podCreated! - n.added! + (n.opened! - n.podFinished!)),
            ),
            workerPodMs: distribution(nodes.filter((n) => n.podCreated !== undefined && n.podFinished !== undefined).map((n) => n.podFinished! - n.podCreated!)),
          }),
      api: {
        byKind,
        writesPerNode: per(sum((k) => WRITE.test(k))),
        nodeWritesPerNode: per(sum((k) => /^(update|patch|apply) nodes(\/status)?$/.test(k))),
        requestsPerNode: per(sum(() => true)),
      },
      controller: {
        cpuSeconds: round(cpuAfter.cpuSeconds - cpuBefore.cpuSeconds, 2),
        cpuMsPerNode: round(((cpuAfter.cpuSeconds - cpuBefore.cpuSeconds) * 1000) / Math.max(1, opened), 1),
        peakRssMiB: round(Math.max(...sampler.samples.map((x) => x.rssMiB)), 1),
        rssMiBAtEnd: round(cpuAfter.rssMiB, 1),
      },
      samples: reaction.sort((a, b) => a - b),
    };
  } finally {
    obs.child.kill('SIGTERM');
    // The burst's nodes go before the next run (the other contender's): the next run starts from the same cluster size.
    const left = await core.listNode({ labelSelector: `${RUN_LABEL}=${runId}` });
    await pool(left.items, 50, async (n) => {
      await core.deleteNode({ name: n.metadata!.name! }).catch(() => undefined);
    });
    await sleep(2000);
  }
}

function diff(after: Record<string, number>, before: Record<string, number>): Record<string, number> {
  const out: Record<string, number> = {};
  for (const [k, v] of Object.entries(after)) if (v - (before[k] ?? 0) > 0) out[k] = v - (before[k] ?? 0);
  return out;
}

function summarizeSides(runs: SideRun[]): SideBySideResult['bySize'] {
  const med = (v: number[]) => {
    const s = [...v].sort((a, b) => a - b);
    return s.length ? s[Math.floor((s.length - 1) / 2)]! : 0;
  };
  const side = (rs: SideRun[]) => {
    const pooled = distribution(rs.flatMap((r) => r.samples));
    const own = rs.flatMap((r) => (r.controllerOnlyMs?.p50 !== undefined ? [r.controllerOnlyMs] : []));
    return {
      reactionP50: pooled.p50,
      reactionP99: pooled.p99,
      ...(own.length ? { controllerOnlyP50Median: med(own.map((d) => d.p50!)), controllerOnlyP99Median: med(own.map((d) => d.p99!)) } : {}),
      writesPerNode: med(rs.map((r) => r.api.writesPerNode)),
      cpuSeconds: med(rs.map((r) => r.controller.cpuSeconds)),
      peakRssMiB: Math.max(...rs.map((r) => r.controller.peakRssMiB)),
    };
  };
  const ratio = (a: number | undefined, b: number | undefined) => (a === undefined || b === undefined || b === 0 ? undefined : round(a / b, 2));
  return [...new Set(runs.map((r) => r.size))].map((size) => {
    const ours = side(runs.filter((r) => r.size === size && r.contender === 'kube-node-ready'));
    const theirs = side(runs.filter((r) => r.size === size && r.contender === 'node-readiness-controller'));
    const r: SideBySideResult['bySize'][number]['ratio'] = {};
    const set = (k: keyof typeof r, v: number | undefined) => {
      if (v !== undefined) r[k] = v;
    };
    set('reactionP50', ratio(theirs.reactionP50, ours.reactionP50));
    set('reactionP99', ratio(theirs.reactionP99, ours.reactionP99));
    set('writesPerNode', ratio(theirs.writesPerNode, ours.writesPerNode));
    set('cpuSeconds', ratio(theirs.cpuSeconds, ours.cpuSeconds));
    set('peakRssMiB', ratio(theirs.peakRssMiB, ours.peakRssMiB));
    return { size, ours, theirs, ratio: r };
  });
}

/** The chart: per size, the cumulative distribution of each contender's reaction (log scale), by gnuplot. */
export async function drawSideBySideChart(
  r: { runs: Array<{ contender: string; size: number; samples: number[] }> },
  title: string,
  png: string,
  labels: Record<string, string> = { 'kube-node-ready': 'kube-node-ready: node created -> taint removed', 'node-readiness-controller': 'node-readiness-controller: condition True -> taint removed' },
): Promise<void> {
  const { mkdtempSync, rmSync } = await import('node:fs');
  const { tmpdir } = await import('node:os');
  const { execFile } = await import('node:child_process');
  const dir = mkdtempSync(join(tmpdir(), 'knr-side-chart-'));
  try {
    const sizes = [...new Set(r.runs.map((x) => x.size))].sort((a, b) => a - b);
    // Blues for kube-node-ready, reds for node-readiness-controller (dashes do not survive a step plot of many points).
    const colors: Record<string, string[]> = { 'kube-node-ready': ['#1f77b4', '#17becf', '#0b3d91'], 'kube-node-ready-tuned': ['#2ca02c', '#98df8a', '#006400'], 'node-readiness-controller': ['#ff7f0e', '#d62728', '#8c564b'] };
    const plots: string[] = [];
    sizes.forEach((size, i) => {
      for (const contender of Object.keys(labels)) {
        const runs = r.runs.filter((x) => x.size === size && x.contender === contender);
        const values = runs
          .flatMap((x) => x.samples)
          .map((ms) => Math.max(ms, 1) / 1000)
          .sort((a, b) => a - b);
        if (!values.length) continue;
        // A fraction of the nodes of the burst, not of those opened: a run cut at its time limit stays below 1.
        const total = size * runs.length;
        const file = join(dir, `${contender}-${size}.dat`);
        writeFileSync(file, values.map((v, j) => `${v} ${(j + 1) / total}`).join('\n') + '\n');
        plots.push(`'${file}' using 1:2 with steps lw 2.5 lc rgb '${(colors[contender] ?? colors['kube-node-ready']!)[i % 3]!}' title '${size} nodes, ${labels[contender]}'`);
      }
    });
    const lines = [
      'set terminal pngcairo size 1200,700 font "DejaVu Sans,11" noenhanced',
      `set output '${png}'`,
      `set title "${title.replace(/"/g, "'")}"`,
      'set logscale x 10',
      'set yrange [0:1]',
      'set format x "%g"',
      'set grid xtics mxtics ytics',
      'set key bottom right box opaque font "DejaVu Sans,9"',
      'set xlabel "seconds (log scale)"',
      'set ylabel "fraction of the burst\'s nodes open (cumulative)"',
      plots.length ? `plot ${plots.join(', ')}` : 'plot NaN notitle',
    ];
    writeFileSync(join(dir, 'chart.gp'), lines.join('\n') + '\n');
    await new Promise<void>((resolve, reject) =>
      execFile('gnuplot', [join(dir, 'chart.gp')], (err, _out, stderr) => (err ? reject(new Error(`gnuplot: ${err.message}\n${stderr}`)) : resolve())),
    );
  } finally {
    rmSync(dir, { recursive: true, force: true });
  }
}
