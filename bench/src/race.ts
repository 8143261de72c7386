// The race: kube-node-ready against node-readiness-controller (sigs.k8s.io/node-readiness-controller
// v0.5.0) with its own reporter, like with like. One sandbox, the same nodes, bursts of each size,
// the contenders one after the other (which goes first alternates from size to size), each at its
// chart's defaults:
//   kube-node-ready             the chart's qps/burst, workers and maxConcurrentVerifications, the
//                               real worker with its default checks (DNS, API, TCP, service) in a
//                               pod on the node's pod network, memory limit and NODE_OPTIONS of
//                               the chart
//   kube-node-ready (tuned)     the same with the settings of --tuned (optional)
//   node-readiness-controller   its chart's arguments and limits (cpu 500m, memory 128Mi), its
//                               cni-readiness example: the reporter DaemonSet (hostNetwork, a GET
//                               of the node's CNI health endpoint every 5 s, node condition
//                               projectcalico.org/CalicoReady) and its rule, enforcementMode
//                               bootstrap-only
// Every node comes up the same way: NotReady for 10 s, its CNI ready 5 s later (its health
// endpoint answers 503 until then, and pods get no sandbox), 5 s for a node's first image pull.
// Per run: node Ready -> taint removed p50/p95/p99; every API write the burst caused per node,
// counted at the API server (its audit log) by client: the controller, its worker or reporter pods,
// kube-scheduler, kube-controller-manager and the (simulated) kubelet (node Leases and the bench's
// own node creations left out); the controller's CPU and peak RSS in a cgroup with its chart's limits.
import { closeSync, existsSync, fstatSync, openSync, readdirSync, readFileSync, readSync, statSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { parse, stringify } from 'yaml';
import { silentLogger } from '@kube-node-ready/core';
import {
  applyObjects,
  auditLogPath,
  Cgroups,
  CNI_HEALTH_PORT,
  k8s,
  NODE_READINESS_CONTROLLER_VERSION,
  NODE_READINESS_RULES,
  nodeReadinessDir,
  parseQuantity,
  renderCniReporter,
  renderNodeReadinessChart,
  sandboxLayout,
  simulatedNode,
  stopSandbox,
  type ContainerCgroup,
  type SandboxState,
} from '@kube-node-ready/sandbox';
import { apiserverSnapshot, diffApf, diffCounts, type ApfLevel } from './apiserver.js';
import { freshSandbox, RUN_LABEL, startObserver, waitForOpened, type BenchEnv } from './burst.js';
import { applyChartRbac, BENCH_WORKER_IMAGE, benchConfig, ControllerProcess, controllerKubeconfig, NAMESPACE, TAINT, VERIFIED_LABEL, type ControllerTuning } from './controller.js';
import { NrcProcess, saKubeconfig } from './neighbour.js';
import { machineCpu, ProcessSampler, sampleProcess } from './proc.js';
import { distribution, type Distribution } from './stats.js';
import { pool, round, sleep } from './util.js';

export type RaceContender = 'kube-node-ready' | 'kube-node-ready-tuned' | 'node-readiness-controller';
const NRC: RaceContender = 'node-readiness-controller';
const NRC_NAMESPACE = 'node-readiness-controller';
const NODE_VERIFICATIONS = { group: 'kube-node-ready.io', version: 'v1alpha1', plural: 'nodeverifications' } as const;
const SIDE_LABEL = 'bench.kube-node-ready.io/race';
/** How every node of the race comes up (sandbox bring-up annotations). */
export const RACE_BRING_UP = { notReadyFor: '10s', cniDelay: '5s', imagePullDelay: '5s' } as const;
/**
 * kube-node-ready's worker checks the same thing the reporter does: the node's CNI health endpoint,
 * from a pod on the node's pod network. (Its default checks, DNS among them, would measure the
 * sandbox's cluster DNS, one event loop for every node, at 100 workers at once.)
 */
const WORKER_CHECKS = { enabled: ['http'], http: { targets: [{ url: `http://$(HOST_IP):${CNI_HEALTH_PORT}/readiness` }] } };
/** Resources left out of the writes per node: node heartbeats and leader election, whatever the contender. */
const NOT_CAUSED = new Set(['leases']);

export interface RaceWrites {
  /** Every write in the run's window per node, all clients but the bench. */
  perNode: number;
  /** Per node, by client. */
  byClient: Record<string, number>;
  /** Totals by client and request (`client: verb resource[/sub]`). */
  byRequest: Record<string, number>;
  /** Writes the API server refused (4xx/5xx), included above. */
  refused: number;
}

export interface RaceRun {
  contender: RaceContender;
  size: number;
  /** 1: ran first at this size. */
  order: number;
  opened: number;
  /** Node Ready (and no other taint keeping pods off) -> taint removed. */
  readyToOpenMs: Distribution;
  /** Node created -> taint removed. */
  createdToOpenMs: Distribution;
  /** First node created -> last node opened. */
  totalMs?: number;
  writes: RaceWrites;
  controller: {
    limits: { cpu?: string; memory?: string };
    /** Whether a cgroup enforces them (root with a cgroup hierarchy). */
    enforced: boolean;
    cpuSeconds: number;
    cpuMsPerNode: number;
    peakRssMiB: number;
  };
  /**
   * node-readiness-controller only: its reporter processes at the end of the run (one per node, they
   * keep running): RSS summed (the binary's shared pages counted in each) and the anonymous part.
   */
  reporters?: { processes: number; rssMiBTotal: number; anonMiBTotal: number };
  /**
   * kube-node-ready only, nodes opened by a pod's pass: where Ready -> open went. Ready -> the
   * passing pod created (a slot, a failed attempt's back-off), created -> running (the pod's
   * sandbox once the CNI is ready, the image pull), running -> finished (the worker's process and
   * checks), finished -> open (the controller's reaction).
   */
  workerPod?: { readyToCreatedMs: Distribution; createdToRunningMs: Distribution; runningToFinishedMs: Distribution; finishedToOpenMs: Distribution; attemptsPerNode: number };
  /**
   * Reads per node in the run's window, every client (apiserver_request_total: the audit log has
   * writes only): `get nodes` (the reporter GETs its Node before every check) and all gets and lists.
   */
  reads: { getNodesPerNode: number; getsAndListsPerNode: number };
  /** The API server's priority and fairness during the run, per priority level. */
  apf: Record<string, ApfLevel>;
  /** Machine CPU busy fraction during the run (2 cores share the control plane, the controllers and every pod). */
  machineBusy: number;
  /** Per node: Ready -> open, ms, sorted (the chart's CDF). */
  samples: number[];
}

export interface RaceResult {
  versions: { nodeReadinessController: string };
  bringUp: typeof RACE_BRING_UP;
  settings: Partial<Record<RaceContender, Record<string, unknown>>>;
  runs: RaceRun[];
  /** Per size: both sides and the ratio kube-node-ready / node-readiness-controller (below 1: ours is lower). */
  bySize: Array<{ size: number; ours: RaceSide; tuned?: RaceSide; theirs: RaceSide; ratio: Partial<Record<keyof RaceSide, number>> }>;
  stoppedEarly?: string;
}

export interface RaceSide {
  readyToOpenP50?: number;
  readyToOpenP95?: number;
  readyToOpenP99?: number;
  writesPerNode: number;
  /** Writes by the controller and its own pods (worker or reporter pods) per node. */
  ownWritesPerNode: number;
  cpuSeconds: number;
  peakRssMiB: number;
}

/** `config.reconciliation` and `config.kubernetes` of the chart's values.yaml: the settings users get. */
export function chartTuning(root: string): ControllerTuning {
  const file = join(root, 'deploy', 'helm', 'kube-node-ready', 'values.yaml');
  const v = parse(readFileSync(file, 'utf8')) as { config?: { reconciliation?: Partial<ControllerTuning>; kubernetes?: { qps?: number; burst?: number } } };
  const r = v.config?.reconciliation;
  const k = v.config?.kubernetes;
  if (!r?.maxConcurrentVerifications || !r.workers || !k?.qps || !k.burst) throw new Error(`${file}: config.reconciliation.maxConcurrentVerifications/workers or config.kubernetes.qps/burst missing`);
  return { maxConcurrentVerifications: r.maxConcurrentVerifications, workers: r.workers, qps: k.qps, burst: k.burst };
}

function chartLimits(root: string): { cpu?: string; memory?: string } {
  const file = join(root, 'deploy', 'helm', 'kube-node-ready', 'values.yaml');
  return (parse(readFileSync(file, 'utf8')) as { controller?: { resources?: { limits?: { cpu?: string; memory?: string } } } }).controller?.resources?.limits ?? {};
}

interface Contestant {
  contender: RaceContender;
  limits: { cpu?: string; memory?: string };
  /** The taint the contender removes; the race's nodes start with it. */
  taint: k8s.V1Taint;
  start(procsFiles: readonly string[], logFile: string): Promise<{ pid: number; exited: () => boolean; stop: () => Promise<void> }>;
}

export async function runRace(env: BenchEnv, sizes: number[], tuned: ControllerTuning | undefined, onRun: (partial: RaceResult) => void = () => {}): Promise<RaceResult> {
  const { state, kc } = await freshSandbox(env, 'race', { auditWrites: true });
  const core = kc.makeApiClient(k8s.CoreV1Api);
  const layout = sandboxLayout(env.sandboxDir, env.slot);
  const cgroups = Cgroups.detect(layout, silentLogger());
  const defaults = chartTuning(env.root);
  try {
    // kube-node-ready: the chart's RBAC and admission policies, the real worker.
    await applyChartRbac(state, BENCH_WORKER_IMAGE);
    const oursKubeconfig = join(env.sandboxDir, 'controller.kubeconfig');
    await controllerKubeconfig(kc, layout, undefined, oursKubeconfig);
    const metricsPort = 18000 + 150 + env.slot;
    const ours = (contender: RaceContender, tuning: ControllerTuning): Contestant => {
      const configFile = join(env.sandboxDir, `${contender}.yaml`);
      const config = benchConfig(tuning, metricsPort, BENCH_WORKER_IMAGE) as { worker: Record<string, unknown> };
      config.worker.checks = WORKER_CHECKS;
      writeFileSync(configFile, stringify(config));
      return {
        contender,
        limits: chartLimits(env.root),
        taint: TAINT,
        async start(procsFiles, logFile) {
          const p = new ControllerProcess(configFile, oursKubeconfig, logFile, metricsPort, env.controller, 'bench-controller', procsFiles);
          await p.waitForLog('starting to reconcile', 120_000);
          return { pid: p.pid, exited: () => p.exited, stop: () => p.stop() };
        },
      };
    };

    // node-readiness-controller: its chart's CRD, ServiceAccount, RBAC, arguments and limits.
    await core.createNamespace({ body: { metadata: { name: NRC_NAMESPACE } } });
    const objects = await renderNodeReadinessChart(state.binDir, NRC_NAMESPACE, NRC);
    await applyObjects({ state }, objects.filter((o) => o.kind !== 'Deployment'));
    const pod = (objects.find((o) => o.kind === 'Deployment') as k8s.V1Deployment).spec!.template.spec!;
    const theirsKubeconfig = join(env.sandboxDir, 'nrc.kubeconfig');
    await saKubeconfig(kc, state, undefined, NRC_NAMESPACE, pod.serviceAccountName!, theirsKubeconfig);
    const probePort = 18000 + 170 + env.slot;
    const args = (pod.containers[0]!.args ?? []).map((a) => (a.startsWith('--health-probe-bind-address=') ? `--health-probe-bind-address=127.0.0.1:${probePort}` : a));
    if (!args.some((a) => a.startsWith('--leader-election-namespace'))) args.push(`--leader-election-namespace=${NRC_NAMESPACE}`);
    // Its cni-readiness example's rule, bootstrap-only, for the race's nodes of its runs.
    const rule = parse(readFileSync(join(nodeReadinessDir(state.binDir), 'examples', 'cni-readiness', 'network-readiness-rule.yaml'), 'utf8')) as {
      spec: { taint: k8s.V1Taint; enforcementMode: string; nodeSelector: { matchLabels?: Record<string, string> } };
    };
    rule.spec.enforcementMode = 'bootstrap-only';
    rule.spec.nodeSelector.matchLabels = { ...rule.spec.nodeSelector.matchLabels, [SIDE_LABEL]: NRC };
    await kc.makeApiClient(k8s.CustomObjectsApi).createClusterCustomObject({ ...NODE_READINESS_RULES, body: rule });
    // Its reporter DaemonSet, on the same nodes.
    await applyObjects({ state }, renderCniReporter(state.binDir, { namespace: NRC_NAMESPACE, name: 'race', nodeSelector: { [SIDE_LABEL]: NRC } }));
    const theirs: Contestant = {
      contender: NRC,
      limits: pod.containers[0]!.resources?.limits ?? {},
      taint: rule.spec.taint,
      async start(procsFiles, logFile) {
        const p = new NrcProcess(join(nodeReadinessDir(state.binDir), 'manager'), args, theirsKubeconfig, logFile, procsFiles);
        await p.waitFor('Successfully acquired lease', 120_000);
        await p.waitFor('Starting workers', 60_000);
        return { pid: p.pid, exited: () => p.child.exitCode !== null || p.child.signalCode !== null, stop: () => p.stop() };
      },
    };

    const contestants = [ours('kube-node-ready', defaults), ...(tuned ? [ours('kube-node-ready-tuned', tuned)] : []), theirs];
    const settings: RaceResult['settings'] = {
      'kube-node-ready': { ...defaults, limits: chartLimits(env.root), nodeFlags: env.controller.nodeFlags, workerChecks: WORKER_CHECKS },
      ...(tuned ? { 'kube-node-ready-tuned': { ...tuned, limits: chartLimits(env.root) } } : {}),
      [NRC]: { args, limits: theirs.limits, reporter: 'examples/cni-readiness (CHECK_INTERVAL 5s, hostNetwork)', rule: 'examples/cni-readiness/network-readiness-rule.yaml, bootstrap-only' },
    };
    const runs: RaceRun[] = [];
    const result = (): RaceResult => ({ versions: { nodeReadinessController: NODE_READINESS_CONTROLLER_VERSION }, bringUp: RACE_BRING_UP, settings, runs, bySize: summarize(runs) });
    try {
      for (const [i, size] of sizes.entries()) {
        const order = i % 2 === 0 ? contestants : [...contestants].reverse();
        for (const [j, c] of order.entries()) {
          const r = await oneRun(env, state, kc, cgroups, c, size, j + 1);
          runs.push(r);
          onRun(result());
          env.out(
            `race ${size} ${c.contender}: ${r.opened}/${size} opened, Ready -> open p50 ${r.readyToOpenMs.p50 ?? '-'} ms p99 ${r.readyToOpenMs.p99 ?? '-'} ms, ` +
              `${r.writes.perNode} writes/node (${Object.entries(r.writes.byClient).map(([k, v]) => `${k} ${v}`).join(', ')}), ${r.controller.cpuSeconds} CPU-s, peak RSS ${r.controller.peakRssMiB} MiB` +
              (r.workerPod
                ? `; p50 Ready -> pod ${r.workerPod.readyToCreatedMs.p50 ?? '-'} ms, -> running ${r.workerPod.createdToRunningMs.p50 ?? '-'} ms, -> finished ${r.workerPod.runningToFinishedMs.p50 ?? '-'} ms, -> open ${r.workerPod.finishedToOpenMs.p50 ?? '-'} ms, ${r.workerPod.attemptsPerNode} pods/node`
                : ''),
          );
        }
      }
    } catch (err) {
      const stoppedEarly = err instanceof Error ? err.message : String(err);
      env.out(`race: stopped early: ${stoppedEarly}`);
      return { ...result(), stoppedEarly };
    }
    return result();
  } finally {
    await stopSandbox(env.sandboxDir, env.slot, () => {});
  }
}

async function oneRun(env: BenchEnv, state: SandboxState, kc: k8s.KubeConfig, cgroups: Cgroups, c: Contestant, size: number, order: number): Promise<RaceRun> {
  const tag = `race ${size} ${c.contender}`;
  const core = kc.makeApiClient(k8s.CoreV1Api);
  const runId = `race-${size}-${c.contender}`;
  const limits = { ...(c.limits.cpu ? { cpuMillis: Math.ceil(parseQuantity(c.limits.cpu) * 1000) } : {}), ...(c.limits.memory ? { memoryBytes: parseQuantity(c.limits.memory) } : {}) };
  const cgroup: ContainerCgroup | undefined = cgroups.create(`race-${size}-${order}`, c.contender, limits);
  const proc = await c.start(cgroup?.procsFiles ?? [], join(env.logDir, `${runId}.log`));
  const times = new Map<string, { added?: number; ready?: number; opened?: number; pods: Map<string, { created?: number; running?: number; finished?: number; passed?: boolean }> }>();
  let opened = 0;
  const nrc = c.contender === NRC;
  const obs = startObserver(env, state, `${RUN_LABEL}=${runId}`, (line) => {
    if (!line.node) return;
    let n = times.get(line.node);
    if (!n) times.set(line.node, (n = { pods: new Map() }));
    if (line.e === 'nodeAdded') n.added = line.t;
    else if (line.e === 'launchable') n.ready = line.t;
    else if (line.pod && (line.e === 'podCreated' || line.e === 'podRunning' || line.e === 'podFinished')) {
      let p = n.pods.get(line.pod);
      if (!p) n.pods.set(line.pod, (p = {}));
      if (line.e === 'podCreated') p.created = line.t;
      else if (line.e === 'podRunning') p.running = line.t;
      else {
        p.finished = line.t;
        p.passed = line.phase === 'Succeeded';
      }
    }
    else if (line.e === 'opened') {
      n.opened = line.t;
      opened++;
    }
  }, { taintKey: c.taint.key, verifiedLabel: nrc ? '' : VERIFIED_LABEL });
  const labels = { [RUN_LABEL]: runId, ...(nrc ? { [SIDE_LABEL]: NRC } : {}) };
  const names = Array.from({ length: size }, (_, i) => `${runId}-${String(i + 1).padStart(4, '0')}`);
  let reporters: RaceRun['reporters'];
  try {
    await obs.ready;
    const cpuBefore = sampleProcess(proc.pid)!;
    const machineBefore = machineCpu();
    const apiBefore = await apiserverSnapshot(kc);
    const sampler = new ProcessSampler(proc.pid, 250);
    const auditLog = auditLogPath(sandboxLayout(state.dir, state.slot));
    const auditOffset = existsSync(auditLog) ? statSync(auditLog).size : 0;
    const t0 = Date.now();
    await pool(names, 50, async (name) => {
      await core.createNode({ body: simulatedNode({ name, labels, taints: [c.taint], bringUp: { ...RACE_BRING_UP } }) });
    });
    await waitForOpened({
      tag,
      out: env.out,
      opened: () => opened,
      size,
      since: t0,
      timeoutMs: env.burstTimeoutMs ?? 300_000 + size * 600,
      everyMs: 10_000,
      gone: () => (proc.exited() ? `the controller exited (see ${join(env.logDir, `${runId}.log`)})` : undefined),
    });
    const tEnd = Date.now();
    // What the last opening set off (our worker pod's deletion, the kubelet's last status): then the audit log's batch is written.
    await sleep(10_000);
    const cpuAfter = sampler.stop() ?? cpuBefore;
    const machineAfter = machineCpu();
    const apiAfter = await apiserverSnapshot(kc);
    const apf = diffApf(apiAfter.apf, apiBefore.apf);
    const requests = diffCounts(apiAfter.requests, apiBefore.requests);
    const reads = {
      getNodesPerNode: round((requests['get nodes'] ?? 0) / size, 2),
      getsAndListsPerNode: round(Object.entries(requests).filter(([k]) => /^(get|list) /.test(k)).reduce((a, [, v]) => a + v, 0) / size, 2),
    };
    if (nrc) reporters = reporterProcesses(join(nodeReadinessDir(state.binDir), 'reporter'));
    await sleep(2_000);
    const writes = countWrites(auditLog, t0, tEnd + 10_000, size, auditOffset);
    const nodes = [...times.values()].filter((n) => n.added !== undefined);
    const readyToOpen = nodes.filter((n) => n.opened !== undefined && n.ready !== undefined).map((n) => n.opened! - n.ready!);
    const openedTimes = nodes.flatMap((n) => (n.opened !== undefined ? [n.opened] : []));
    return {
      contender: c.contender,
      size,
      order,
      opened,
      readyToOpenMs: distribution(readyToOpen),
      createdToOpenMs: distribution(nodes.filter((n) => n.opened !== undefined).map((n) => n.opened! - n.added!)),
      ...(openedTimes.length ? { totalMs: Math.max(...openedTimes) - t0 } : {}),
      writes,
      controller: {
        limits: c.limits,
        enforced: cgroup !== undefined,
        cpuSeconds: round(cpuAfter.cpuSeconds - cpuBefore.cpuSeconds, 2),
        cpuMsPerNode: round(((cpuAfter.cpuSeconds - cpuBefore.cpuSeconds) * 1000) / Math.max(1, opened), 1),
        peakRssMiB: round(Math.max(...sampler.samples.map((x) => x.rssMiB)), 1),
      },
      ...(reporters ? { reporters } : {}),
      ...(nrc ? {} : { workerPod: workerPodBreakdown(nodes) }),
      apf,
      reads,
      machineBusy: round((machineAfter.busy - machineBefore.busy) / Math.max(1, machineAfter.total - machineBefore.total), 2),
      samples: readyToOpen.sort((a, b) => a - b),
    };
  } finally {
    obs.child.kill('SIGTERM');
    await proc.stop();
    await cgroup?.remove();
    await cleanUp(env, kc, runId, names);
  }
}

/**
 * Deletes the run's nodes and waits until no pod or NodeVerification of theirs is left (kube-controller-manager's
 * garbage collectors delete them), so the next run's window holds none of it.
 */
async function cleanUp(env: BenchEnv, kc: k8s.KubeConfig, runId: string, names: string[]): Promise<void> {
  const core = kc.makeApiClient(k8s.CoreV1Api);
  const custom = kc.makeApiClient(k8s.CustomObjectsApi);
  await pool(names, 50, async (name) => {
    await core.deleteNode({ name }).catch(() => undefined);
  });
  const gone = new Set(names);
  const deadline = Date.now() + 300_000;
  let left = -1;
  while (Date.now() < deadline) {
    const pods = await core.listPodForAllNamespaces({ fieldSelector: 'spec.nodeName!=' });
    left = pods.items.filter((p) => gone.has(p.spec?.nodeName ?? '')).length;
    // kube-node-ready's NodeVerifications go with their nodes (owner references, kube-controller-manager's garbage collector).
    const records = (await custom.listClusterCustomObject({ ...NODE_VERIFICATIONS })) as { items: Array<{ metadata: { name: string } }> };
    left += records.items.filter((v) => gone.has(v.metadata.name)).length;
    if (left === 0) return;
    await sleep(2000);
  }
  env.out(`race: ${left} pods and NodeVerifications of ${runId}'s deleted nodes still there after 5 minutes; going on`);
}

interface AuditEvent {
  verb?: string;
  user?: { username?: string };
  userAgent?: string;
  objectRef?: { resource?: string; subresource?: string; apiGroup?: string };
  responseStatus?: { code?: number };
  requestReceivedTimestamp?: string;
}

/** Who made a write, by the identity and user agent the API server saw. */
export function auditClient(e: AuditEvent): string {
  const user = e.user?.username ?? '';
  const agent = e.userAgent ?? '';
  if (user === `system:serviceaccount:${NAMESPACE}:kube-node-ready-controller`) return 'controller';
  if (user.startsWith(`system:serviceaccount:${NRC_NAMESPACE}:`)) return user.endsWith(':cni-reporter') ? 'reporter pods' : 'controller';
  if (user.startsWith(`system:serviceaccount:${NAMESPACE}:`)) return 'worker pods';
  if (agent.startsWith('kube-scheduler/') || user === 'system:kube-scheduler') return 'kube-scheduler';
  if (agent.startsWith('kube-controller-manager/')) return 'kube-controller-manager';
  if (agent.toLowerCase().includes('karpenter')) return 'karpenter';
  // The rest is the sandbox's admin identity: the bench creates the nodes; everything else it does
  // in a run is the simulated kubelet's (node and pod status, its Events).
  if (e.verb === 'create' && e.objectRef?.resource === 'nodes' && !e.objectRef.subresource) return 'bench';
  return 'kubelet';
}

/**
 * The audit log's writes received in [from, to], per node of the run, by client (bench and Leases
 * left out), read from byte `offset` on: the log's size before the run, as the log holds every
 * earlier run too.
 */
export function countWrites(file: string, from: number, to: number, nodes: number, offset = 0): RaceWrites {
  const byRequest: Record<string, number> = {};
  let total = 0;
  let refused = 0;
  for (const line of readFrom(file, offset).split('\n')) {
    if (!line) continue;
    let e: AuditEvent;
    try {
      e = JSON.parse(line) as AuditEvent;
    } catch {
      continue; // a line the batch is still writing
    }
    const t = Date.parse(e.requestReceivedTimestamp ?? '');
    if (!(t >= from && t <= to)) continue;
    const resource = e.objectRef?.resource ?? '?';
    if (NOT_CAUSED.has(resource)) continue;
    const client = auditClient(e);
    if (client === 'bench') continue;
    const key = `${client}: ${e.verb} ${resource}${e.objectRef?.subresource ? `/${e.objectRef.subresource}` : ''}`;
    byRequest[key] = (byRequest[key] ?? 0) + 1;
    total++;
    if ((e.responseStatus?.code ?? 200) >= 400) refused++;
  }
  const byClient: Record<string, number> = {};
  for (const [k, v] of Object.entries(byRequest)) {
    const client = k.slice(0, k.indexOf(':'));
    byClient[client] = (byClient[client] ?? 0) + v;
  }
  const per = (n: number) => round(n / Math.max(1, nodes), 2);
  return {
    perNode: per(total),
    byClient: Object.fromEntries(Object.entries(byClient).sort(([, a], [, b]) => b - a).map(([k, v]) => [k, per(v)])),
    byRequest: Object.fromEntries(Object.entries(byRequest).sort(([a], [b]) => a.localeCompare(b))),
    refused,
  };
}

/** The file from byte `offset` to its end (a line cut at the offset does not parse and is skipped). */
function readFrom(file: string, offset: number): string {
  const fd = openSync(file, 'r');
  try {
    const buf = Buffer.alloc(Math.max(0, fstatSync(fd).size - offset));
    readSync(fd, buf, 0, buf.length, offset);
    return buf.toString('utf8');
  } finally {
    closeSync(fd);
  }
}

/** How many reporter processes run and their RSS together (from /proc). */
function reporterProcesses(binary: string): NonNullable<RaceRun['reporters']> {
  let processes = 0;
  let rss = 0;
  let anon = 0;
  for (const pid of readdirSync('/proc').filter((d) => /^\d+$/.test(d))) {
    try {
      const cmd = readFileSync(`/proc/${pid}/cmdline`, 'utf8').split('\0')[0];
      if (cmd !== binary) continue;
      const sample = sampleProcess(Number(pid));
      processes++;
      rss += sample?.rssMiB ?? 0;
      anon += sample?.anonMiB ?? 0;
    } catch {
      // gone meanwhile
    }
  }
  return { processes, rssMiBTotal: round(rss, 1), anonMiBTotal: round(anon, 1) };
}

export function summarize(runs: RaceRun[]): RaceResult['bySize'] {
  const side = (r: RaceRun | undefined): RaceSide | undefined =>
    r && {
      ...(r.readyToOpenMs.p50 !== undefined ? { readyToOpenP50: r.readyToOpenMs.p50 } : {}),
      ...(r.readyToOpenMs.p95 !== undefined ? { readyToOpenP95: r.readyToOpenMs.p95 } : {}),
      ...(r.readyToOpenMs.p99 !== undefined ? { readyToOpenP99: r.readyToOpenMs.p99 } : {}),
      writesPerNode: r.writes.perNode,
      ownWritesPerNode: round((r.writes.byClient.controller ?? 0) + (r.writes.byClient['worker pods'] ?? 0) + (r.writes.byClient['reporter pods'] ?? 0), 2),
      cpuSeconds: r.controller.cpuSeconds,
      peakRssMiB: r.controller.peakRssMiB,
    };
  const out: RaceResult['bySize'] = [];
  for (const size of [...new Set(runs.map((r) => r.size))]) {
    const ours = side(runs.find((r) => r.size === size && r.contender === 'kube-node-ready'));
    const tuned = side(runs.find((r) => r.size === size && r.contender === 'kube-node-ready-tuned'));
    const theirs = side(runs.find((r) => r.size === size && r.contender === NRC));
    if (!ours || !theirs) continue;
    const ratio: Partial<Record<keyof RaceSide, number>> = {};
    for (const k of Object.keys(ours) as Array<keyof RaceSide>) {
      const a = ours[k];
      const b = theirs[k];
      if (a !== undefined && b !== undefined && b !== 0) ratio[k] = round(a / b, 2);
    }
    out.push({ size, ours, ...(tuned ? { tuned } : {}), theirs, ratio });
  }
  return out;
}

/** The race's table, one row per size and figure, for the log and docs/performance.md. */
export function raceTable(r: RaceResult): string[] {
  const s = (ms: number | undefined) => (ms === undefined ? '-' : `${(ms / 1000).toFixed(1)} s`);
  const tuned = r.bySize.some((b) => b.tuned);
  const lines = [
    `| burst | figure | kube-node-ready (chart defaults) | node-readiness-controller + reporter | ratio (ours / theirs) |${tuned ? ' kube-node-ready tuned |' : ''}`,
    `| --- | --- | --- | --- | --- |${tuned ? ' --- |' : ''}`,
  ];
  for (const b of r.bySize) {
    const row = (label: string, k: keyof RaceSide, f: (v: number | undefined) => string) =>
      lines.push(`| ${b.size} | ${label} | ${f(b.ours[k])} | ${f(b.theirs[k])} | ${b.ratio[k] ?? '-'} |${tuned ? ` ${b.tuned ? f(b.tuned[k]) : '-'} |` : ''}`);
    row('node Ready -> open, p50', 'readyToOpenP50', s);
    row('node Ready -> open, p95', 'readyToOpenP95', s);
    row('node Ready -> open, p99', 'readyToOpenP99', s);
    row('API writes per node (all clients)', 'writesPerNode', String);
    row('of them by the controller and its worker or reporter pods', 'ownWritesPerNode', String);
    row('controller CPU seconds', 'cpuSeconds', String);
    row('controller peak RSS (MiB)', 'peakRssMiB', String);
  }
  return lines;
}

type NodeTimes = { ready?: number; opened?: number; pods: Map<string, { created?: number; running?: number; finished?: number; passed?: boolean }> };

function workerPodBreakdown(nodes: NodeTimes[]): NonNullable<RaceRun['workerPod']> {
  const parts = { readyToCreated: [] as number[], createdToRunning: [] as number[], runningToFinished: [] as number[], finishedToOpen: [] as number[] };
  let pods = 0;
  for (const n of nodes) {
    pods += n.pods.size;
    const pass = [...n.pods.values()].find((p) => p.passed && p.created !== undefined && p.running !== undefined && p.finished !== undefined);
    if (!pass || n.ready === undefined || n.opened === undefined) continue;
    parts.readyToCreated.push(pass.created! - n.ready);
    parts.createdToRunning.push(pass.running! - pass.created!);
    parts.runningToFinished.push(pass.finished! - pass.running!);
    parts.finishedToOpen.push(n.opened - pass.finished!);
  }
  return {
    readyToCreatedMs: distribution(parts.readyToCreated),
    createdToRunningMs: distribution(parts.createdToRunning),
    runningToFinishedMs: distribution(parts.runningToFinished),
    finishedToOpenMs: distribution(parts.finishedToOpen),
    attemptsPerNode: round(pods / Math.max(1, nodes.length), 2),
  };
}
