// How the controller's cost grows with the cluster (issue 15, goal 4). In one sandbox, the cluster
// grows to each of `counts` realistic verified Nodes (nodes.ts: as on EKS, with their
// NodeVerifications). At each size a fresh controller starts as the chart runs it (limited.ts: its
// NODE_OPTIONS, its memory limit), and the bench records:
//   start-up  controller start -> synced and leading: the CPU of listing every Node and NodeVerification
//   steady    RSS, anonymous RSS and cgroup charge, sampled every second for a while, and the V8
//             heap in use at its end (the controller's own process metrics)
//   burst     `burstSize` new nodes verified by the instant worker (slots for all), so the CPU per
//             verified node is the controller's, at that cluster size
// then stops the controller and deletes the burst's nodes. A straight-line fit over the sizes gives
// the slope per cached node, and what the steady state would need at tens of thousands of nodes.
import { writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { stringify } from 'yaml';
import { k8s, sandboxLayout, simulatedNode, stopSandbox, type FaultProxy } from '@kube-node-ready/sandbox';
import { controllerMetrics, freshSandbox, RUN_LABEL, settle, type BenchEnv } from './burst.js';
import { applyChartRbac, benchConfig, ControllerProcess, controllerKubeconfig, INSTANT_WORKER_IMAGE, startProxy, TAINT, VERIFIED_LABEL } from './controller.js';
import { LimitedController, type MemoryLimit } from './limited.js';
import { createRealisticNodes } from './nodes.js';
import { ProcessSampler, sampleProcess } from './proc.js';
import { pool, round, sleep } from './util.js';

export interface ScalePoint {
  /** Realistic verified Nodes (each with its NodeVerification) in the cluster. */
  nodes: number;
  /** Controller start to "starting to reconcile" (every cache synced, leading). */
  syncMs: number;
  /** CPU over that start-up: listing N Nodes and N NodeVerifications, the first pass over them. */
  startupCpuSeconds: number;
  /** Over the steady window, MiB. */
  rssMiB: { min: number; mean: number; max: number };
  anonMiB: { min: number; mean: number; max: number };
  chargedMiB: { min: number; mean: number; max: number };
  /**
   * V8's heap in use at the end of the steady window (nodejs_heap_size_used_bytes): the caches and
   * what the last collection left. RSS is that plus the heap V8 keeps reserved, which it sizes to the
   * limit and to its recent allocation, not to the node count (so RSS is no straight line in N).
   */
  heapUsedMiB: number;
  /** CPU over the steady window (nothing to do: the resyncs, the Lease, the watches). */
  steadyCpuSeconds: number;
  /**
   * cpuSeconds: the controller's CPU from the burst's first create until it has been quiet for 3 s
   * (everything it did meanwhile, idle work included); cpuMsPerNode: that per verified node.
   */
  burst: { size: number; verified: number; ms: number; cpuSeconds: number; cpuMsPerNode: number; writesPerNode: number; nodeWritesPerNode: number; peakRssMiB: number };
  oomKills: number;
  restarts: number;
}

export interface ScaleResult {
  counts: number[];
  nodeObjectBytes: number;
  windowMs: number;
  limit: MemoryLimit;
  nodeFlags: string[];
  /** The rest of its environment (the chart's malloc tuning). */
  controllerEnv: Record<string, string>;
  points: ScalePoint[];
  /** Least-squares lines over the points: what one more cached node costs. */
  slope: { heapUsedBytesPerNode: number; rssBytesPerNode: number; anonBytesPerNode: number; chargedBytesPerNode: number; startupCpuMsPerThousandNodes: number; burstCpuMsPerNodePerThousandNodes: number };
  /** The fitted lines extended to larger clusters (steady state; a relist adds its own peak). */
  projection: Array<{ nodes: number; heapUsedMiB: number; rssMiB: number; anonMiB: number; chargedMiB: number; startupCpuSeconds: number }>;
}

const PROJECT_TO = [10_000, 20_000, 50_000];

export async function runScale(env: BenchEnv, counts: readonly number[], burstSize: number, windowMs: number): Promise<ScaleResult> {
  const tag = 'scale';
  const { state, kc } = await freshSandbox(env, tag);
  const layout = sandboxLayout(env.sandboxDir, env.slot);
  const core = kc.makeApiClient(k8s.CoreV1Api);
  let proxy: FaultProxy | undefined;
  let controller: LimitedController | undefined;
  try {
    await applyChartRbac(state, INSTANT_WORKER_IMAGE);
    proxy = await startProxy(layout);
    const kubeconfig = join(env.sandboxDir, 'controller.kubeconfig');
    await controllerKubeconfig(kc, layout, proxy, kubeconfig);
    const metricsPort = 18000 + 100 + env.slot;
    const configFile = join(env.sandboxDir, 'controller.yaml');
    // Slots for the whole burst: its CPU is the controller's, not the wait for a slot.
    const tuning = { ...env.tuning, maxConcurrentVerifications: Math.max(env.tuning.maxConcurrentVerifications, burstSize) };
    writeFileSync(configFile, stringify(benchConfig(tuning, metricsPort, INSTANT_WORKER_IMAGE)));

    const points: ScalePoint[] = [];
    let created = 0;
    let nodeObjectBytes = 0;
    let limit: MemoryLimit | undefined;
    for (const [k, count] of [...counts].sort((a, b) => a - b).entries()) {
      if (count > created) {
        const made = await createRealisticNodes(kc, 'scale', created, count, (line) => env.out(`${tag}: ${line}`));
        nodeObjectBytes = made.nodeObjectBytes;
        created = count;
      }
      env.out(`${tag} ${count}: ${count} realistic nodes and NodeVerifications in the cluster; starting the controller`);
      const started = Date.now();
      const limited = (controller = new LimitedController(env, (procsFiles, run) =>
        new ControllerProcess(configFile, kubeconfig, join(env.logDir, `controller-scale-${count}${run ? `-restart${run}` : ''}.log`), metricsPort, env.controller, undefined, procsFiles),
      ));
      limit = limited.limit;
      await limited.waitForLog('starting to reconcile', 300_000);
      const syncMs = Date.now() - started;
      await sleep(2000); // the first pass over every node (all verified: nothing to do)
      const startup = sampleProcess(limited.pid)!;

      // Steady: RSS, anonymous RSS and the cgroup's charge every second.
      const sampler = new ProcessSampler(limited.pid, 1000);
      const charged: number[] = [];
      const end = Date.now() + windowMs;
      while (Date.now() < end) {
        charged.push(limited.chargedMiB() ?? 0);
        await sleep(1000);
      }
      const steadyEnd = sampler.stop()!;
      const heapUsedMiB = controllerMetrics(await limited.current.metrics().catch(() => '')).heapUsedMiB ?? 0;
      const stats = (values: number[]) => ({
        min: round(Math.min(...values), 1),
        mean: round(values.reduce((a, b) => a + b, 0) / Math.max(1, values.length), 1),
        max: round(Math.max(0, ...values), 1),
      });

      // Burst: `burstSize` new tainted nodes, verified by the instant worker.
      const runId = `scale-${count}`;
      const proxyBefore = proxy.requestsByKind();
      const burstSampler = new ProcessSampler(limited.pid, 250);
      const burstStart = Date.now();
      const names = Array.from({ length: burstSize }, (_, i) => `bench-${runId}-${String(i + 1).padStart(4, '0')}`);
      await pool(names, 50, async (name) => {
        await core.createNode({ body: simulatedNode({ name, labels: { [RUN_LABEL]: runId }, taints: [TAINT] }) });
      });
      const timeoutMs = 120_000 + burstSize * 600;
      let verified = 0;
      let lastReport = 0;
      while (verified < burstSize && Date.now() - burstStart < timeoutMs) {
        await sleep(1000);
        const list = await core.listNode({ labelSelector: `${RUN_LABEL}=${runId},${VERIFIED_LABEL}=true` });
        verified = list.items.length;
        if (Date.now() - lastReport >= 5000) {
          lastReport = Date.now();
          env.out(`${tag} ${count}: burst ${verified}/${burstSize} verified, ${((Date.now() - burstStart) / 1000).toFixed(1)}s`);
        }
      }
      const burstMs = Date.now() - burstStart;
      await settle(proxy, 3000, 30_000);
      const burstEnd = burstSampler.stop()!;
      const byKind = Object.fromEntries(Object.entries(proxy.requestsByKind()).map(([kind, v]) => [kind, v - (proxyBefore[kind] ?? 0)]));
      const sum = (pred: (kind: string) => boolean) => Object.entries(byKind).filter(([kind]) => pred(kind) && !kind.includes('leases.')).reduce((a, [, v]) => a + v, 0);
      const per = (n: number) => round(n / Math.max(1, verified), 2);
      const burstCpu = burstEnd.cpuSeconds - steadyEnd.cpuSeconds;
      const point: ScalePoint = {
        nodes: count,
        syncMs,
        startupCpuSeconds: round(startup.cpuSeconds, 2),
        rssMiB: stats(sampler.samples.map((s) => s.rssMiB)),
        anonMiB: stats(sampler.samples.map((s) => s.anonMiB)),
        chargedMiB: stats(charged),
        heapUsedMiB,
        steadyCpuSeconds: round(steadyEnd.cpuSeconds - startup.cpuSeconds, 2),
        burst: {
          size: burstSize,
          verified,
          ms: burstMs,
          cpuSeconds: round(burstCpu, 2),
          cpuMsPerNode: round((burstCpu * 1000) / Math.max(1, verified), 1),
          writesPerNode: per(sum((kind) => /^(create|update|patch|delete) /.test(kind))),
          nodeWritesPerNode: per(sum((kind) => /^(update|patch|apply) nodes(\/status)?$/.test(kind))),
          peakRssMiB: round(Math.max(...burstSampler.samples.map((s) => s.rssMiB)), 1),
        },
        oomKills: limited.oomKills(),
        restarts: limited.restarts,
      };
      points.push(point);
      env.out(
        `${tag} ${count} (${k + 1}/${counts.length}): synced in ${(syncMs / 1000).toFixed(1)}s (${point.startupCpuSeconds} CPU-s); steady RSS ${point.rssMiB.mean} MiB, anonymous ${point.anonMiB.mean}, charged ${point.chargedMiB.mean}, heap used ${heapUsedMiB}; ` +
          `burst of ${burstSize}: ${verified} verified in ${(burstMs / 1000).toFixed(1)}s, ${point.burst.cpuMsPerNode} ms CPU per node, ${point.burst.writesPerNode} writes per node; ${point.oomKills} OOM kills`,
      );
      await limited.stop();
      controller = undefined;
      const left = await core.listNode({ labelSelector: `${RUN_LABEL}=${runId}` });
      await pool(left.items, 50, async (n) => {
        await core.deleteNode({ name: n.metadata!.name! }).catch(() => undefined);
      });
    }
    return { counts: points.map((p) => p.nodes), nodeObjectBytes, windowMs, limit: limit!, nodeFlags: env.controller.nodeFlags, controllerEnv: env.controller.env, points, ...fit(points) };
  } finally {
    await controller?.stop();
    await proxy?.close();
    await stopSandbox(env.sandboxDir, env.slot, () => {});
  }
}

/** Least squares y = a + b x over the points. */
export function line(xs: readonly number[], ys: readonly number[]): { a: number; b: number } {
  const n = xs.length;
  if (n < 2) return { a: ys[0] ?? 0, b: 0 };
  const mx = xs.reduce((s, x) => s + x, 0) / n;
  const my = ys.reduce((s, y) => s + y, 0) / n;
  const sxx = xs.reduce((s, x) => s + (x - mx) ** 2, 0);
  const b = sxx === 0 ? 0 : xs.reduce((s, x, i) => s + (x - mx) * (ys[i]! - my), 0) / sxx;
  return { a: my - b * mx, b };
}

function fit(points: readonly ScalePoint[]): Pick<ScaleResult, 'slope' | 'projection'> {
  const xs = points.map((p) => p.nodes);
  const heap = line(xs, points.map((p) => p.heapUsedMiB));
  const rss = line(xs, points.map((p) => p.rssMiB.mean));
  const anon = line(xs, points.map((p) => p.anonMiB.mean));
  const charged = line(xs, points.map((p) => p.chargedMiB.mean));
  const startup = line(xs, points.map((p) => p.startupCpuSeconds));
  const burst = line(xs, points.map((p) => p.burst.cpuMsPerNode));
  const bytes = (mibPerNode: number) => Math.round(mibPerNode * 2 ** 20);
  return {
    slope: {
      heapUsedBytesPerNode: bytes(heap.b),
      rssBytesPerNode: bytes(rss.b),
      anonBytesPerNode: bytes(anon.b),
      chargedBytesPerNode: bytes(charged.b),
      startupCpuMsPerThousandNodes: round(startup.b * 1000 * 1000, 0),
      burstCpuMsPerNodePerThousandNodes: round(burst.b * 1000, 2),
    },
    projection: PROJECT_TO.map((nodes) => ({
      nodes,
      heapUsedMiB: round(heap.a + heap.b * nodes, 0),
      rssMiB: round(rss.a + rss.b * nodes, 0),
      anonMiB: round(anon.a + anon.b * nodes, 0),
      chargedMiB: round(charged.a + charged.b * nodes, 0),
      startupCpuSeconds: round(startup.a + startup.b * nodes, 1),
    })),
  };
}
