// Memory with many Nodes, the controller run as the Helm chart runs it (its NODE_OPTIONS, its memory
// limit enforced by a cgroup, restarted when it exits: limited.ts). `count` realistic Nodes, verified
// long ago (nodes.ts: as a kubelet on EKS registers them), are in the cluster before the controller starts.
// Three phases, each with its peak RSS, OOM kills and restarts:
//   startup  controller start -> caches synced and leading (the first list of every Node)
//   steady   RSS sampled every second for a while (min/mean/max)
//   relist   the Node watch is answered 410 Expired (the fault proxy, as after etcd compaction), so
//            the informer lists every Node again while it still holds its cache
// With `gates` (--gates): two DaemonSets run a pod on every Node (kube-controller-manager creates
// them, the scheduler binds them), and the controller's config requires one of them (gates.
// requireDaemonSets): its gate caches hold that DaemonSet's pods, one per Node, and none of the other's.
import { writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { stringify } from 'yaml';
import { k8s, sandboxLayout, stopSandbox, type FaultProxy } from '@kube-node-ready/sandbox';
import { controllerMetrics, freshSandbox, type BenchEnv } from './burst.js';
import { applyChartRbac, BENCH_WORKER_IMAGE, benchConfig, ControllerProcess, controllerKubeconfig, describeRuntime, startProxy } from './controller.js';
import { apiserverRequestCounts, diffCounts } from './apiserver.js';
import { LimitedController, PeakSampler, type MemoryLimit } from './limited.js';
import { createRealisticNodes } from './nodes.js';
import { ProcessSampler, sampleProcess } from './proc.js';
import { round, sleep } from './util.js';
import { runImageBench } from './image.js';
import { runWorkerBench, runWorkerFootprint, type WorkerResult } from './worker.js';

export interface MemoryPhase {
  phase: 'startup' | 'steady' | 'relist';
  ms: number;
  /** The highest RSS sampled (every 100 ms) during the phase, over every process that ran in it. */
  peakRssMiB: number;
  /** The highest anonymous RSS (ProcSample.anonMiB): what the kernel cannot take back short of a kill. */
  peakAnonMiB: number;
  /** The highest memory charged to its cgroup (what the limit is held against; 0 without one). */
  peakChargedMiB: number;
  oomKills: number;
  restarts: number;
}

export interface SteadyResult {
  nodes: number;
  createMs: number;
  nodeObjectBytes: number;
  limit: MemoryLimit;
  nodeFlags: string[];
  /** The rest of its environment (the chart's malloc tuning). */
  controllerEnv: Record<string, string>;
  /** Controller start to "starting to reconcile" (both caches synced, leading). */
  syncMs: number;
  sampleWindowMs: number;
  rssMiB: { min: number; mean: number; max: number };
  /** VmHWM of the process running at the end: its own peak since it started. */
  peakRssMiB: number;
  phases: MemoryPhase[];
  /** Over all phases. */
  oomKills: number;
  restarts: number;
  /** Lists of nodes the relist phase caused (at the proxy; 500 Nodes a page). */
  relistPages: number;
  cpuSecondsStartup: number;
  cpuSecondsWindow: number;
  /** apiserver_request_total over the steady window (every client; the simulated kubelet plays none of these nodes). */
  requestsDuringWindowAllClients: Record<string, number>;
  /** The controller's own figures at the end (heap spaces from its process metrics). */
  controllerMetrics: Record<string, number>;
  /** --gates: the DaemonSets and their pods in the cluster while the controller ran. */
  gates?: { namespace: string; required: string; requiredPods: number; otherPods: number; createMs: number };
}

/** --gates: the namespace and DaemonSets. */
const GATES_NAMESPACE = 'knr-gates';
const REQUIRED_DS = 'node-agent';
const OTHER_DS = 'other-agent';

export async function runSteady(env: BenchEnv, count: number, windowMs: number, workerRuns: number, opts: { gates?: boolean } = {}): Promise<{ steady: SteadyResult; worker: WorkerResult }> {
  const tag = `memory ${count}${opts.gates ? ' with gates' : ''}`;
  const { state, kc } = await freshSandbox(env, tag);
  const layout = sandboxLayout(env.sandboxDir, env.slot);
  let controller: LimitedController | undefined;
  let peaks: PeakSampler | undefined;
  let proxy: FaultProxy | undefined;
  try {
    // The worker bench first, on the idle sandbox, then where its memory and start-up go.
    const worker = await runWorkerBench(env, workerRuns);
    const footprint = await runWorkerFootprint(env, workerRuns);
    if (Array.isArray(footprint)) worker.footprint = footprint;
    else env.out(`worker: no footprint: ${footprint.error}`);
    // The same worker from the container image, under containerd (what a new node pays for it).
    worker.image = await runImageBench(env, state, kc, workerRuns);

    // The gates' namespace first: the chart's Role for the gates goes in it.
    if (opts.gates) await kc.makeApiClient(k8s.CoreV1Api).createNamespace({ body: { metadata: { name: GATES_NAMESPACE } } });
    const gateValues = opts.gates ? [`config.gates.requireDaemonSets[0].namespace=${GATES_NAMESPACE}`, `config.gates.requireDaemonSets[0].name=${REQUIRED_DS}`] : [];
    await applyChartRbac(state, BENCH_WORKER_IMAGE, gateValues);
    // Through the fault proxy: the relist phase has it expire the Node watch.
    proxy = await startProxy(layout);
    const kubeconfig = join(env.sandboxDir, 'controller.kubeconfig');
    await controllerKubeconfig(kc, layout, proxy, kubeconfig);
    const { ms: createMs, nodeObjectBytes } = await createRealisticNodes(kc, 'steady', 0, count, (line) => env.out(`${tag}: ${line}`));
    env.out(`${tag}: ${count} realistic verified nodes and their NodeVerifications created in ${(createMs / 1000).toFixed(1)}s (${nodeObjectBytes} bytes each node); starting the controller`);
    const gates = opts.gates ? await daemonSetsOnEveryNode(kc, count, (line) => env.out(`${tag}: ${line}`)) : undefined;

    const metricsPort = 18000 + 100 + env.slot;
    const configFile = join(env.sandboxDir, 'controller.yaml');
    const config = benchConfig(env.tuning, metricsPort);
    if (gates) config['gates'] = { requireDaemonSets: [{ namespace: GATES_NAMESPACE, name: REQUIRED_DS }] };
    writeFileSync(configFile, stringify(config));
    const started = Date.now();
    const limited = (controller = new LimitedController(env, (procsFiles, run) =>
      new ControllerProcess(configFile, kubeconfig, join(env.logDir, `controller-steady${run ? `-restart${run}` : ''}.log`), metricsPort, env.controller, undefined, procsFiles),
    ));
    env.out(`${tag}: memory limit ${limited.limit.memory} (${limited.limit.enforced ? 'enforced' : 'NOT enforced'}: ${limited.limit.cgroups}), ${describeRuntime(env.controller)}`);
    peaks = new PeakSampler(limited);
    const phases: MemoryPhase[] = [];
    let phaseStart = Date.now();
    let before = { oomKills: 0, restarts: 0 };
    const endPhase = (phase: MemoryPhase['phase']) => {
      const peak = peaks!.peak();
      const p: MemoryPhase = { phase, ms: Date.now() - phaseStart, peakRssMiB: round(peak.rssMiB, 1), peakAnonMiB: round(peak.anonMiB, 1), peakChargedMiB: round(peak.chargedMiB, 1), oomKills: limited.oomKills() - before.oomKills, restarts: limited.restarts - before.restarts };
      phases.push(p);
      env.out(`${tag}: ${phase}: peak RSS ${p.peakRssMiB} MiB (anonymous ${p.peakAnonMiB}), charged to its cgroup ${p.peakChargedMiB} MiB of ${limited.limit.memory}, ${p.oomKills} OOM kills, ${p.restarts} restarts, ${(p.ms / 1000).toFixed(1)}s`);
      phaseStart = Date.now();
      before = { oomKills: limited.oomKills(), restarts: limited.restarts };
      peaks!.reset();
    };

    // 1. Start-up: the first list of every Node.
    await limited.waitForLog('starting to reconcile', 300_000);
    const syncMs = Date.now() - started;
    await sleep(2000); // the initial pass over every node (all verified: nothing to do)
    endPhase('startup');
    const startup = sampleProcess(limited.pid)!;

    // 2. Steady: RSS every second.
    env.out(`${tag}: synced and leading after ${(syncMs / 1000).toFixed(1)}s; sampling RSS for ${windowMs / 1000}s`);
    const apiBefore = await apiserverRequestCounts(kc);
    const sampler = new ProcessSampler(limited.pid, 1000);
    const end = Date.now() + windowMs;
    while (Date.now() < end) {
      await sleep(Math.min(10_000, end - Date.now()));
      const s = sampler.samples.at(-1);
      if (s && Date.now() < end) env.out(`${tag}: RSS ${s.rssMiB.toFixed(1)} MiB, ${Math.round((end - Date.now()) / 1000)}s left`);
    }
    const last = sampler.stop()!;
    const requestsDuringWindowAllClients = diffCounts(await apiserverRequestCounts(kc), apiBefore);
    endPhase('steady');

    // 3. Relist: the Node watch expires, the informer lists every Node again.
    const relistPages = await forceNodeRelist(proxy, (line) => env.out(`${tag}: ${line}`));
    await sleep(5000);
    endPhase('relist');

    const metrics = controllerMetrics(await limited.current.metrics().catch(() => ''));
    const rss = sampler.samples.map((s) => s.rssMiB);
    return {
      worker,
      steady: {
        nodes: count,
        createMs,
        nodeObjectBytes,
        limit: limited.limit,
        nodeFlags: env.controller.nodeFlags,
        controllerEnv: env.controller.env,
        syncMs,
        sampleWindowMs: windowMs,
        rssMiB: { min: round(Math.min(...rss), 1), mean: round(rss.reduce((a, b) => a + b, 0) / rss.length, 1), max: round(Math.max(...rss), 1) },
        peakRssMiB: round(sampleProcess(limited.pid)?.hwmMiB ?? 0, 1),
        phases,
        oomKills: limited.oomKills(),
        restarts: limited.restarts,
        relistPages,
        cpuSecondsStartup: round(startup.cpuSeconds, 2),
        cpuSecondsWindow: round(last.cpuSeconds - startup.cpuSeconds, 2),
        requestsDuringWindowAllClients,
        controllerMetrics: metrics,
        ...(gates ? { gates } : {}),
      },
    };
  } finally {
    peaks?.stop();
    await controller?.stop();
    await proxy?.close();
    await stopSandbox(env.sandboxDir, env.slot, () => {});
  }
}

/**
 * Two DaemonSets that run a pod on every Node (they tolerate every taint), created and bound by
 * kube-controller-manager and the scheduler; waits until each has a pod on `count` Nodes.
 */
async function daemonSetsOnEveryNode(kc: k8s.KubeConfig, count: number, progress: (line: string) => void): Promise<NonNullable<SteadyResult['gates']>> {
  const apps = kc.makeApiClient(k8s.AppsV1Api);
  const started = Date.now();
  for (const name of [REQUIRED_DS, OTHER_DS]) {
    await apps.createNamespacedDaemonSet({
      namespace: GATES_NAMESPACE,
      body: {
        metadata: { name, labels: { 'app.kubernetes.io/name': name } },
        spec: {
          selector: { matchLabels: { 'app.kubernetes.io/name': name } },
          template: {
            metadata: { labels: { 'app.kubernetes.io/name': name, 'app.kubernetes.io/part-of': 'bench' } },
            spec: { tolerations: [{ operator: 'Exists' }], containers: [{ name: 'agent', image: 'registry.k8s.io/pause:3.10', resources: { requests: { cpu: '1m', memory: '4Mi' } } }] },
          },
        },
      },
    });
  }
  progress(`DaemonSets ${REQUIRED_DS} (required by the gates) and ${OTHER_DS} (not) created in ${GATES_NAMESPACE}: waiting for a pod of each on every node`);
  const scheduled = async (name: string) => (await apps.readNamespacedDaemonSet({ namespace: GATES_NAMESPACE, name })).status?.currentNumberScheduled ?? 0;
  const deadline = Date.now() + 20 * 60_000;
  for (;;) {
    const [required, other] = [await scheduled(REQUIRED_DS), await scheduled(OTHER_DS)];
    if (required >= count && other >= count) {
      const createMs = Date.now() - started;
      progress(`${required} + ${other} DaemonSet pods on the nodes after ${(createMs / 1000).toFixed(1)}s`);
      return { namespace: GATES_NAMESPACE, required: REQUIRED_DS, requiredPods: required, otherPods: other, createMs };
    }
    if (Date.now() > deadline) throw new Error(`timed out after 20 min waiting for the DaemonSets' pods: ${REQUIRED_DS} on ${required} of ${count} nodes, ${OTHER_DS} on ${other}`);
    progress(`DaemonSet pods on the nodes: ${REQUIRED_DS} ${required} of ${count}, ${OTHER_DS} ${other} of ${count} (${Math.round((Date.now() - started) / 1000)}s)`);
    await sleep(10_000);
  }
}

/**
 * Expires the Node watch at the proxy (410, as after etcd compaction) and breaks the open one, so the
 * informer lists again; lifts the fault once the list has begun and waits for the watch that follows
 * it (the list is done). Returns the list pages requested.
 */
async function forceNodeRelist(proxy: FaultProxy, progress: (line: string) => void): Promise<number> {
  const count = (kind: string) => proxy.requestsByKind()[kind] ?? 0;
  const listsBefore = count('list nodes');
  proxy.set({ expireWatches: ['nodes'] });
  proxy.cutAll();
  progress('the Node watch answers 410 Expired: waiting for the relist');
  await waitUntil(() => count('list nodes') > listsBefore, 60_000, 'the controller to list nodes after its watch expired');
  proxy.set({});
  const watchesAfterList = count('watch nodes');
  await waitUntil(() => count('watch nodes') > watchesAfterList, 180_000, 'the controller to watch nodes again after its relist');
  return count('list nodes') - listsBefore;
}

async function waitUntil(ok: () => boolean, timeoutMs: number, what: string): Promise<void> {
  const deadline = Date.now() + timeoutMs;
  while (!ok()) {
    if (Date.now() > deadline) throw new Error(`timed out after ${timeoutMs / 1000}s waiting for ${what}`);
    await sleep(100);
  }
}
