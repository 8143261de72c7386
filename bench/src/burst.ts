// Scenario 1-3 for one burst: a fresh sandbox, the controller (through the counting fault proxy),
// the observer process, then `size` tainted simulated nodes created at once. Measures per-node
// latencies from the observer's milestones, API requests by verb and resource (controller side and
// the apiserver's own counters), and the controller's CPU and memory during the burst.
import { spawn, type ChildProcess } from 'node:child_process';
import { mkdirSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { createInterface } from 'node:readline';
import { stringify } from 'yaml';
import { k8s, loadKubeConfig, sandboxLayout, simulatedNode, startSandbox, stopSandbox, type FaultProxy, type SandboxState } from '@kube-node-ready/sandbox';
import { apiserverRequestCounts, diffCounts } from './apiserver.js';
import { applyChartRbac, benchConfig, ControllerProcess, controllerKubeconfig, type ControllerRuntime, histogramQuantile, histogramShareUnder, metricSum, NAMESPACE, startProxy, TAINT, VERIFIED_LABEL, type ControllerTuning } from './controller.js';
import { LimitedController, PeakSampler, type MemoryLimit } from './limited.js';
import type { Milestone, ObservedLine } from './observer.js';
import { busyFraction, machineCpu, ProcessSampler, sampleProcess } from './proc.js';
import { distribution, type Distribution } from './stats.js';
import { pool, round, sleep, track } from './util.js';

export const RUN_LABEL = 'bench.kube-node-ready.io/run';

export interface BenchEnv {
  root: string;
  bundle: string;
  slot: number;
  sandboxDir: string;
  logDir: string;
  tuning: ControllerTuning;
  out: (line: string) => void;
  /** Run the controller straight against the apiserver, without the counting proxy (a control experiment). */
  direct: boolean;
  /** The controller's Node.js flags and environment: the Helm chart's, unless --controller-node-flags or --controller-env say otherwise. */
  controller: ControllerRuntime;
  /** The worker image of the bursts: the real worker, or INSTANT_WORKER_IMAGE (--instant-worker). */
  workerImage: { repository: string; tag: string };
  /** The controller's memory limit: the chart's `controller.resources.limits.memory` unless --controller-memory-limit says otherwise. */
  controllerMemoryLimit: string;
  /** How long a burst may take, from its first node's creation (default: 120 s + 600 ms per node). */
  burstTimeoutMs?: number;
  /** From the sandbox's state, once one has started. */
  kubernetesVersion?: string;
}

/** One worker pod's milestones (observer clock, ms). */
export interface PodTimes {
  created?: number;
  scheduled?: number;
  running?: number;
  finished?: number;
  phase?: string;
  checksMs?: number;
}

/** One node's milestones (observer clock, ms), and its worker pods, one per attempt. */
export interface NodeTimes {
  nodeAdded?: number;
  launchable?: number;
  opened?: number;
  pods: Map<string, PodTimes>;
}

export interface BurstResult {
  size: number;
  repetition: number;
  verified: number;
  /** Worker pods (attempts) in all, and those that failed (the node was retried after a backoff). */
  workerPods: number;
  failedWorkerPods: number;
  nodesRetried: number;
  /** Time the bench took to create every Node (the "at once" spread). */
  createSpreadMs: number;
  /** First node observed to last node opened. */
  totalMs?: number;
  latencyMs: {
    podCreatedAfterNodeCreated: Distribution;
    /**
     * The controller's own reaction: node launchable (Ready, no taint the worker does not tolerate)
     * to its first worker pod created. Without the node's bring-up in it; with slots for all nodes,
     * without the wait for a slot either.
     */
    podCreatedAfterLaunchable: Distribution;
    /**
     * What users see: node launchable (Ready, no taint the worker does not tolerate) to the node
     * open, the verification's whole cost without the node's own bring-up.
     */
    taintRemovedAfterLaunchable: Distribution;
    workerFinishedAfterPodCreated: Distribution;
    taintRemovedAfterWorkerFinished: Distribution;
    taintRemovedAfterNodeCreated: Distribution;
    /** podCreatedAfterNodeCreated for the first maxConcurrentVerifications nodes: a slot was free. */
    podCreatedAfterNodeCreatedFreeSlot: Distribution;
    podScheduledAfterPodCreated: Distribution;
    podRunningAfterPodScheduled: Distribution;
  };
  /** The worker's own checks duration (its summary), under the burst's load. */
  workerChecksMs: Distribution;
  api: ApiCost;
  /**
   * Run as the chart runs it (limited.ts). CPU and RSS at the end are the process the burst began
   * with: after a restart, up to its last sample. Peaks span restarts (sampled every 100 ms).
   */
  controller: { cpuSeconds: number; cpuMsPerNode: number; peakRssMiB: number; peakAnonMiB: number; peakChargedMiB: number; rssMiBAtEnd: number; startupRssMiB: number; memoryLimit: MemoryLimit; oomKills: number; restarts: number };
  controllerMetrics: Record<string, number>;
  machine: { busyFraction: number; loadavg: number[] };
  /**
   * Per node: [node added, first worker pod created, passing worker pod finished, taint removed,
   * passing worker pod created] in ms from the first node observed. Worker durations and "taint removed - worker finished" use the
   * attempt that passed; the reaction uses the node's first worker pod.
   */
  samples: Array<[number | null, number | null, number | null, number | null, number | null]>;
}

export interface ApiCost {
  /** Controller requests (at the proxy) during the burst window, by verb and resource (empty with --direct). */
  byKind: Record<string, number>;
  perVerifiedNode: Record<string, number>;
  /** Writes (create/update/patch/delete) per verified node, leader-election Lease writes excluded. */
  writesPerNode: number;
  /** Writes to the Node object itself (patch nodes, patch nodes/status) per verified node. */
  nodeWritesPerNode: number;
  leaseRequests: number;
  windowMs: number;
  /** The apiserver's apiserver_request_total over the same window: every client, not only the controller. */
  apiserverAllClients: Record<string, number>;
  crossCheck: Array<{ kind: string; controller: number; apiserver: number }>;
}

const WRITE = /^(create|update|patch|delete|deletecollection|apply) /;

export async function runBurst(env: BenchEnv, size: number, repetition: number): Promise<BurstResult> {
  const tag = `burst ${size} (run ${repetition})`;
  const runId = `b${size}-r${repetition}`;
  const { state, kc } = await freshSandbox(env, tag);
  let proxy: FaultProxy | undefined;
  let observer: ChildProcess | undefined;
  let controller: LimitedController | undefined;
  try {
    const layout = sandboxLayout(env.sandboxDir, env.slot);
    const core = kc.makeApiClient(k8s.CoreV1Api);
    await applyChartRbac(state, env.workerImage);
    if (!env.direct) proxy = await startProxy(layout);
    const kubeconfig = join(env.sandboxDir, 'controller.kubeconfig');
    await controllerKubeconfig(kc, layout, proxy, kubeconfig);

    // The observer, in a process of its own.
    const milestones = new Map<string, NodeTimes>();
    let opened = 0;
    const obs = startObserver(env, state, `${RUN_LABEL}=${runId}`, (line) => {
      if (!line.node) return;
      let n = milestones.get(line.node);
      if (!n) milestones.set(line.node, (n = { pods: new Map() }));
      if (line.e === 'nodeAdded') n.nodeAdded = line.t;
      else if (line.e === 'launchable') n.launchable = line.t;
      else if (line.e === 'opened') {
        n.opened = line.t;
        opened++;
      } else if (line.pod) {
        let p = n.pods.get(line.pod);
        if (!p) n.pods.set(line.pod, (p = {}));
        const field: Record<string, keyof PodTimes> = { podCreated: 'created', podScheduled: 'scheduled', podRunning: 'running', podFinished: 'finished' };
        (p as Record<string, unknown>)[field[line.e as Milestone]!] = line.t;
        if (line.e === 'podFinished') {
          p.phase = line.phase;
          if (line.checksMs !== undefined) p.checksMs = line.checksMs;
        }
      }
    });
    observer = obs.child;
    await obs.ready;

    // The controller, through the proxy; reconciling once it leads.
    const metricsPort = 18000 + 100 + env.slot;
    const configFile = join(env.sandboxDir, 'controller.yaml');
    writeFileSync(configFile, stringify(benchConfig(env.tuning, metricsPort, env.workerImage)));
    const limited = (controller = new LimitedController(env, (procsFiles, run) =>
      new ControllerProcess(configFile, kubeconfig, join(env.logDir, `controller-${runId}${run ? `-restart${run}` : ''}.log`), metricsPort, env.controller, undefined, procsFiles),
    ));
    await controller.waitForLog('starting to reconcile', 90_000);
    await sleep(1000);
    const startupRss = sampleProcess(controller.pid)?.rssMiB ?? 0;

    const proxyBefore = proxy?.requestsByKind() ?? {};
    const apiBefore = await apiserverRequestCounts(kc);
    const cpuBefore = sampleProcess(controller.pid)!;
    const machineBefore = machineCpu();
    const sampler = new ProcessSampler(controller.pid, 250);
    const peaks = new PeakSampler(limited);
    const windowStart = Date.now();

    // The burst: every node created at once (at most 50 requests in flight from the bench).
    const names = Array.from({ length: size }, (_, i) => `bench-${runId}-${String(i + 1).padStart(4, '0')}`);
    const createStart = Date.now();
    await pool(names, 50, async (name) => {
      await core.createNode({ body: simulatedNode({ name, labels: { [RUN_LABEL]: runId }, taints: [TAINT] }) });
    });
    const createSpreadMs = Date.now() - createStart;

    await waitForOpened({
      tag,
      out: env.out,
      opened: () => opened,
      size,
      since: createStart,
      timeoutMs: env.burstTimeoutMs ?? 120_000 + size * 600,
      everyMs: 5000,
      detail: () => {
        const pods = [...milestones.values()].flatMap((m) => [...m.pods.values()]);
        const inFlight = pods.filter((p) => p.finished === undefined).length;
        const failed = pods.filter((p) => p.phase === 'Failed').length;
        const restarts = limited.restarts ? `, controller restarted ${limited.restarts} times (${limited.oomKills()} OOM kills)` : '';
        return `${inFlight} workers in flight, ${failed} failed attempts${restarts}`;
      },
    });
    env.out(`${tag}: ${opened}/${size} opened in ${((Date.now() - createStart) / 1000).toFixed(1)}s`);
    // Let the tail of the work finish (worker pod deletions, the condition write) before counting.
    if (proxy) await settle(proxy, 3000, 30_000);
    else await sleep(3000);
    const windowMs = Date.now() - windowStart;
    // The process the burst began with: after a restart, its last sample before it exited.
    const cpuAfter = sampler.stop() ?? sampler.samples.at(-1) ?? cpuBefore;
    const peak = peaks.peak();
    peaks.stop();
    const machineAfter = machineCpu();
    const proxyDelta = diffCounts(proxy?.requestsByKind() ?? {}, proxyBefore);
    const apiDelta = diffCounts(await apiserverRequestCounts(kc), apiBefore);
    const metricsText = await controller.current.metrics().catch(() => '');

    const verified = opened;
    return {
      size,
      repetition,
      verified,
      workerPods: [...milestones.values()].reduce((a, m) => a + m.pods.size, 0),
      failedWorkerPods: [...milestones.values()].reduce((a, m) => a + [...m.pods.values()].filter((p) => p.phase === 'Failed').length, 0),
      nodesRetried: [...milestones.values()].filter((m) => [...m.pods.values()].some((p) => p.phase === 'Failed')).length,
      createSpreadMs,
      ...latencies(milestones, env.tuning.maxConcurrentVerifications),
      api: apiCost(proxyDelta, apiDelta, verified, windowMs),
      controller: {
        cpuSeconds: round(cpuAfter.cpuSeconds - cpuBefore.cpuSeconds, 2),
        cpuMsPerNode: round(((cpuAfter.cpuSeconds - cpuBefore.cpuSeconds) * 1000) / Math.max(1, verified), 1),
        peakRssMiB: round(Math.max(peak.rssMiB, cpuAfter.hwmMiB), 1),
        peakAnonMiB: round(peak.anonMiB, 1),
        peakChargedMiB: round(peak.chargedMiB, 1),
        memoryLimit: limited.limit,
        oomKills: limited.oomKills(),
        restarts: limited.restarts,
        rssMiBAtEnd: round(cpuAfter.rssMiB, 1),
        startupRssMiB: round(startupRss, 1),
      },
      controllerMetrics: controllerMetrics(metricsText),
      machine: { busyFraction: round(busyFraction(machineBefore, machineAfter), 2), loadavg: (await import('node:os')).loadavg().map((x) => round(x, 2)) },
    };
  } finally {
    await controller?.stop();
    observer?.kill('SIGTERM');
    await proxy?.close();
    await stopSandbox(env.sandboxDir, env.slot, () => {});
  }
}

/**
 * Waits until `opened()` reaches `size`: a progress line every `everyMs`; at `timeoutMs` after
 * `since` it says so and returns (the run reports what opened); when the controller is gone
 * (`gone()` says why) it throws.
 */
export async function waitForOpened(w: {
  tag: string;
  out: (line: string) => void;
  opened: () => number;
  size: number;
  since: number;
  timeoutMs: number;
  everyMs: number;
  /** Added to each progress line. */
  detail?: () => string;
  gone?: () => string | undefined;
}): Promise<void> {
  let lastReport = 0;
  while (w.opened() < w.size) {
    const elapsed = Date.now() - w.since;
    if (elapsed > w.timeoutMs) {
      w.out(`${w.tag}: timed out after ${(elapsed / 1000).toFixed(0)}s with ${w.opened()}/${w.size} opened`);
      return;
    }
    const gone = w.gone?.();
    if (gone) throw new Error(`${w.tag}: ${gone}`);
    if (Date.now() - lastReport >= w.everyMs) {
      lastReport = Date.now();
      w.out(`${w.tag}: ${w.opened()}/${w.size} opened${w.detail ? `, ${w.detail()}` : ''}, ${(elapsed / 1000).toFixed(1)}s`);
    }
    await sleep(200);
  }
}

export async function freshSandbox(env: BenchEnv, tag: string, opts: { auditWrites?: boolean } = {}): Promise<{ state: SandboxState; kc: k8s.KubeConfig }> {
  mkdirSync(env.logDir, { recursive: true });
  const started = Date.now();
  // Node leases are renewed every 30 s instead of a kubelet's 10 s: the simulated kubelet's lease
  // loop is sandbox overhead (real kubelets run on their own machines), not work of the controller,
  // and 30 s stays inside kube-controller-manager's 50 s grace, so nodes do not go Unknown.
  const state = await startSandbox({ dir: env.sandboxDir, slot: env.slot, leaseRenewMs: 30_000, progress: () => {}, ...opts });
  env.kubernetesVersion = state.kubernetesVersion;
  env.out(`${tag}: sandbox ready in ${((Date.now() - started) / 1000).toFixed(1)}s (${state.kubernetesVersion}, slot ${env.slot})`);
  return { state, kc: loadKubeConfig(state.kubeconfig) };
}

export function startObserver(
  env: BenchEnv,
  state: SandboxState,
  nodeSelector: string,
  onLine: (line: ObservedLine) => void,
  watch: { taintKey: string; verifiedLabel: string; conditionType?: string } = { taintKey: TAINT.key, verifiedLabel: VERIFIED_LABEL },
): { child: ChildProcess; ready: Promise<void> } {
  const child = track(spawn(
    process.execPath,
    [
      env.bundle,
      'observe',
      '--kubeconfig',
      state.kubeconfig,
      '--node-selector',
      nodeSelector,
      '--namespace',
      NAMESPACE,
      '--taint-key',
      watch.taintKey,
      '--verified-label',
      watch.verifiedLabel,
      ...(watch.conditionType ? ['--condition-type', watch.conditionType] : []),
    ],
    { stdio: ['ignore', 'pipe', 'inherit'] },
  ));
  let markReady: () => void = () => {};
  const ready = new Promise<void>((resolve, reject) => {
    markReady = resolve;
    child.once('exit', (code) => reject(new Error(`the observer exited (${code})`)));
    setTimeout(() => reject(new Error('the observer did not start watching within 30s')), 30_000).unref();
  });
  createInterface({ input: child.stdout! }).on('line', (text) => {
    let line: ObservedLine;
    try {
      line = JSON.parse(text) as ObservedLine;
    } catch {
      return;
    }
    if (line.e === 'ready') markReady();
    else if (line.e === 'error') env.out(`observer: ${line.message}`);
    else onLine(line);
  });
  return { child, ready };
}

/** Waits until the proxy has seen no request for `quietMs` (at most maxMs), ignoring Lease renewals. */
export async function settle(proxy: FaultProxy, quietMs: number, maxMs: number): Promise<void> {
  const count = () => Object.entries(proxy.requestsByKind()).filter(([k]) => !k.includes('leases.')).reduce((a, [, v]) => a + v, 0);
  const deadline = Date.now() + maxMs;
  let last = count();
  let quietSince = Date.now();
  while (Date.now() < deadline && Date.now() - quietSince < quietMs) {
    await sleep(250);
    const now = count();
    if (now !== last) {
      last = now;
      quietSince = Date.now();
    }
  }
}

function latencies(milestones: Map<string, NodeTimes>, freeSlots: number): Pick<BurstResult, 'latencyMs' | 'workerChecksMs' | 'totalMs' | 'samples'> {
  interface Derived {
    added: number;
    launchable?: number;
    firstPod?: number;
    passed?: PodTimes;
    opened?: number;
  }
  const nodes: Derived[] = [...milestones.values()]
    .filter((m) => m.nodeAdded !== undefined)
    .map((m) => {
      const pods = [...m.pods.values()];
      const created = pods.map((p) => p.created).filter((t): t is number => t !== undefined);
      return {
        added: m.nodeAdded!,
        ...(m.launchable !== undefined ? { launchable: m.launchable } : {}),
        ...(created.length ? { firstPod: Math.min(...created) } : {}),
        ...(pods.some((p) => p.phase === 'Succeeded') ? { passed: pods.filter((p) => p.phase === 'Succeeded').at(-1)! } : {}),
        ...(m.opened !== undefined ? { opened: m.opened } : {}),
      };
    })
    .sort((a, b) => a.added - b.added);
  const allPods = [...milestones.values()].flatMap((m) => [...m.pods.values()]);
  const between = <T,>(items: T[], pick: (x: T) => [number | undefined, number | undefined]) =>
    distribution(
      items
        .map(pick)
        .filter((p): p is [number, number] => p[0] !== undefined && p[1] !== undefined)
        .map(([a, b]) => b - a),
    );
  const t0 = nodes[0]?.added ?? 0;
  const openedTimes = nodes.map((n) => n.opened).filter((t): t is number => t !== undefined);
  const rel = (t: number | undefined) => (t === undefined ? null : t - t0);
  return {
    totalMs: openedTimes.length ? Math.max(...openedTimes) - t0 : undefined,
    latencyMs: {
      podCreatedAfterNodeCreated: between(nodes, (n) => [n.added, n.firstPod]),
      podCreatedAfterLaunchable: between(nodes, (n) => [n.launchable, n.firstPod]),
      taintRemovedAfterLaunchable: between(nodes, (n) => [n.launchable, n.opened]),
      workerFinishedAfterPodCreated: between(nodes, (n) => [n.passed?.created, n.passed?.finished]),
      taintRemovedAfterWorkerFinished: between(nodes, (n) => [n.passed?.finished, n.opened]),
      taintRemovedAfterNodeCreated: between(nodes, (n) => [n.added, n.opened]),
      podCreatedAfterNodeCreatedFreeSlot: between(nodes.slice(0, freeSlots), (n) => [n.added, n.firstPod]),
      podScheduledAfterPodCreated: between(allPods, (p) => [p.created, p.scheduled]),
      podRunningAfterPodScheduled: between(allPods, (p) => [p.scheduled, p.running]),
    },
    workerChecksMs: distribution(allPods.filter((p) => p.phase === 'Succeeded' && p.checksMs !== undefined).map((p) => p.checksMs!)),
    samples: nodes.map((n) => [rel(n.added), rel(n.firstPod), rel(n.passed?.finished), rel(n.opened), rel(n.passed?.created)]),
  };
}

function apiCost(byKind: Record<string, number>, apiserver: Record<string, number>, verified: number, windowMs: number): ApiCost {
  const per = (n: number) => round(n / Math.max(1, verified), 2);
  const perVerifiedNode = Object.fromEntries(Object.entries(byKind).filter(([k]) => !k.includes('leases.')).map(([k, v]) => [k, per(v)]));
  const sum = (pred: (k: string) => boolean) => Object.entries(byKind).filter(([k]) => pred(k)).reduce((a, [, v]) => a + v, 0);
  return {
    byKind,
    perVerifiedNode,
    writesPerNode: per(sum((k) => WRITE.test(k) && !k.includes('leases.'))),
    nodeWritesPerNode: per(sum((k) => /^(update|patch|apply) nodes(\/status)?$/.test(k))),
    leaseRequests: sum((k) => k.includes('leases.')),
    windowMs,
    apiserverAllClients: apiserver,
    crossCheck: Object.keys(byKind)
      .filter((k) => !k.startsWith('get /') && !k.startsWith('watch '))
      .map((kind) => ({ kind, controller: byKind[kind]!, apiserver: apiserver[kind] ?? 0 })),
  };
}

const mib = (bytes: number) => round(bytes / 2 ** 20, 1);

export function controllerMetrics(text: string): Record<string, number> {
  if (!text) return {};
  return {
    reconciles: metricSum(text, 'kube_node_ready_reconcile_duration_seconds_count'),
    reconcileErrors: metricSum(text, 'kube_node_ready_controller_reconcile_errors_total'),
    queueAdds: metricSum(text, 'kube_node_ready_queue_adds_total'),
    queueRetries: metricSum(text, 'kube_node_ready_queue_retries_total'),
    watchRestarts: metricSum(text, 'kube_node_ready_watch_restarts_total'),
    reconcileSecondsP50: histogramQuantile(text, 'kube_node_ready_reconcile_duration_seconds', 0.5),
    reconcileSecondsP99: histogramQuantile(text, 'kube_node_ready_reconcile_duration_seconds', 0.99),
    // How long nodes waited for a free reconcile worker (the controller's own queue).
    queueWaitSecondsP50: histogramQuantile(text, 'kube_node_ready_queue_wait_seconds', 0.5),
    queueWaitSecondsP99: histogramQuantile(text, 'kube_node_ready_queue_wait_seconds', 0.99),
    // Time the controller's API calls waited for its client-side rate limit (kubernetes.qps, burst), summed over calls.
    throttledSeconds: Math.round(metricSum(text, 'kube_node_ready_api_throttled_seconds_total') * 10) / 10,
    // The controller's own reaction, timed by the controller from the watch event to its write
    // acknowledged (bucket upper bounds), and the share of nodes it served within 1 s.
    ...Object.fromEntries(
      (['launch', 'open'] as const).flatMap((step) => {
        const of = (labels: string) => labels.includes(`step="${step}"`);
        const name = 'kube_node_ready_reaction_seconds';
        const Step = step[0]!.toUpperCase() + step.slice(1);
        return [
          [`reaction${Step}Count`, metricSum(text, `${name}_count`, of)],
          [`reaction${Step}SecondsP50`, histogramQuantile(text, name, 0.5, of)],
          [`reaction${Step}SecondsP99`, histogramQuantile(text, name, 0.99, of)],
          [`reaction${Step}ShareUnder1s`, histogramShareUnder(text, name, 1, of) ?? 0],
        ];
      }),
    ),
    attemptsPassed: metricSum(text, 'kube_node_ready_attempt_outcomes_total', (l) => l.includes('outcome="Passed"')),
    attemptsTotal: metricSum(text, 'kube_node_ready_attempt_outcomes_total'),
    // prom-client's default process metrics, at the end of the burst: where the memory is.
    heapTotalMiB: mib(metricSum(text, 'nodejs_heap_size_total_bytes')),
    heapUsedMiB: mib(metricSum(text, 'nodejs_heap_size_used_bytes')),
    externalMiB: mib(metricSum(text, 'nodejs_external_memory_bytes')),
    newSpaceMiB: mib(metricSum(text, 'nodejs_heap_space_size_total_bytes', (l) => l.includes('space="new"'))),
    oldSpaceMiB: mib(metricSum(text, 'nodejs_heap_space_size_total_bytes', (l) => l.includes('space="old"'))),
    largeObjectSpaceMiB: mib(metricSum(text, 'nodejs_heap_space_size_total_bytes', (l) => l.includes('space="large_object"'))),
    codeSpaceMiB: mib(metricSum(text, 'nodejs_heap_space_size_total_bytes', (l) => l.includes('space="code"'))),
  };
}
