// Footprint at rest: `count` Nodes that were verified long ago (the verified label, no taint) are
// in the cluster before the controller starts; the controller lists and watches them all. Measures
// the time to a synced cache, the RSS once synced (sampled every second for a while), peak RSS, CPU
// and the API requests it makes while idle.
import { writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { stringify } from 'yaml';
import { k8s, sandboxLayout, simulatedNode, stopSandbox } from '@kube-node-ready/sandbox';
import { RUN_LABEL, controllerMetrics, freshSandbox, type BenchEnv } from './burst.js';
import { applyChartRbac, BENCH_WORKER_IMAGE, benchConfig, ControllerProcess, controllerKubeconfig, VERIFIED_LABEL } from './controller.js';
import { apiserverRequestCounts, diffCounts } from './apiserver.js';
import { ProcessSampler, sampleProcess } from './proc.js';
import { round, sleep, pool } from './util.js';
import { runWorkerBench, type WorkerResult } from './worker.js';

export interface SteadyResult {
  nodes: number;
  createMs: number;
  /** Controller start to "starting to reconcile" (both caches synced, leading). */
  syncMs: number;
  sampleWindowMs: number;
  rssMiB: { min: number; mean: number; max: number };
  peakRssMiB: number;
  cpuSecondsStartup: number;
  cpuSecondsWindow: number;
  /** apiserver_request_total over the sampling window (every client; the simulated kubelet plays none of these nodes). */
  requestsDuringWindowAllClients: Record<string, number>;
  nodeObjectBytes: number;
  /** The controller's own figures at the end of the window (heap spaces from its process metrics). */
  controllerMetrics: Record<string, number>;
}

/** A node as a managed cluster registers it, so the cached objects have a realistic size. */
function verifiedNode(name: string, i: number): k8s.V1Node {
  const zone = ['a', 'b', 'c'][i % 3]!;
  const node = simulatedNode({
    name,
    labels: {
      [RUN_LABEL]: 'steady',
      [VERIFIED_LABEL]: 'true',
      'node.kubernetes.io/instance-type': 'm7i.xlarge',
      'topology.kubernetes.io/region': 'us-east-1',
      'topology.kubernetes.io/zone': `us-east-1${zone}`,
      'karpenter.sh/nodepool': 'default',
      'karpenter.sh/registered': 'true',
      'karpenter.sh/initialized': 'true',
      'karpenter.sh/capacity-type': 'on-demand',
      'karpenter.k8s.aws/instance-family': 'm7i',
      'karpenter.k8s.aws/instance-cpu': '4',
      'karpenter.k8s.aws/instance-memory': '16384',
    },
    annotations: {
      'node.alpha.kubernetes.io/ttl': '0',
      'volumes.kubernetes.io/controller-managed-attach-detach': 'true',
      'karpenter.sh/nodeclaim-min-values-relaxed': 'false',
      'alpha.kubernetes.io/provided-node-ip': `10.1.${(i >> 8) & 255}.${i & 255}`,
    },
    providerID: `aws:///us-east-1${zone}/i-0${i.toString(16).padStart(16, '0')}`,
  });
  // Not played by the simulated kubelet: these nodes only need to exist (no Lease churn).
  delete node.metadata!.labels!['sandbox.kube-node-ready.io/simulated'];
  const now = new Date();
  node.status!.conditions = ['MemoryPressure', 'DiskPressure', 'PIDPressure'].map((type) => ({ type, status: 'False', reason: `KubeletHasNo${type}`, message: `kubelet has no ${type}`, lastHeartbeatTime: now, lastTransitionTime: now }));
  node.status!.conditions.push({ type: 'Ready', status: 'True', reason: 'KubeletReady', message: 'kubelet is posting ready status', lastHeartbeatTime: now, lastTransitionTime: now });
  node.status!.addresses = [
    { type: 'InternalIP', address: `10.1.${(i >> 8) & 255}.${i & 255}` },
    { type: 'InternalDNS', address: name },
    { type: 'Hostname', address: name },
  ];
  return node;
}

export async function runSteady(env: BenchEnv, count: number, windowMs: number, workerRuns: number): Promise<{ steady: SteadyResult; worker: WorkerResult }> {
  const tag = `steady ${count}`;
  const { state, kc } = await freshSandbox(env, tag);
  const layout = sandboxLayout(env.sandboxDir, env.slot);
  let controller: ControllerProcess | undefined;
  try {
    // 4. The worker bench first, on the idle sandbox.
    const worker = await runWorkerBench(env, workerRuns);

    await applyChartRbac(state, BENCH_WORKER_IMAGE);
    const kubeconfig = join(env.sandboxDir, 'controller.kubeconfig');
    // Straight to the apiserver: through the fault proxy an idle watch takes 30 s to start, which
    // would be counted as sync time (see docs/benchmarks.md).
    await controllerKubeconfig(kc, layout, undefined, kubeconfig);
    const core = kc.makeApiClient(k8s.CoreV1Api);
    const createStart = Date.now();
    let created = 0;
    let lastReport = Date.now();
    await pool(
      Array.from({ length: count }, (_, i) => i),
      50,
      async (i) => {
        await core.createNode({ body: verifiedNode(`ip-10-1-${(i >> 8) & 255}-${i & 255}.ec2.internal`, i) });
        created++;
        if (Date.now() - lastReport > 5000) {
          lastReport = Date.now();
          env.out(`${tag}: ${created}/${count} verified nodes created, ${((Date.now() - createStart) / 1000).toFixed(1)}s`);
        }
      },
    );
    const createMs = Date.now() - createStart;
    env.out(`${tag}: ${count} verified nodes created in ${(createMs / 1000).toFixed(1)}s; starting the controller`);
    const sample = await core.readNode({ name: 'ip-10-1-0-0.ec2.internal' });
    const nodeObjectBytes = JSON.stringify(sample).length;

    const metricsPort = 18000 + 100 + env.slot;
    const configFile = join(env.sandboxDir, 'controller.yaml');
    writeFileSync(configFile, stringify(benchConfig(env.tuning, metricsPort)));
    const started = Date.now();
    controller = new ControllerProcess(configFile, kubeconfig, join(env.logDir, 'controller-steady.log'), metricsPort, env.controllerNodeFlags);
    await controller.waitForLog('starting to reconcile', 180_000);
    const syncMs = Date.now() - started;
    env.out(`${tag}: controller synced and leading after ${(syncMs / 1000).toFixed(1)}s; sampling RSS for ${windowMs / 1000}s`);
    // Let the initial pass over every node (all ignored: verified) finish before sampling.
    await sleep(2000);
    const startup = sampleProcess(controller.pid)!;
    const before = await apiserverRequestCounts(kc);
    const sampler = new ProcessSampler(controller.pid, 1000);
    const end = Date.now() + windowMs;
    while (Date.now() < end) {
      await sleep(Math.min(10_000, end - Date.now()));
      const s = sampler.samples.at(-1);
      if (s && Date.now() < end) env.out(`${tag}: RSS ${s.rssMiB.toFixed(1)} MiB, ${Math.round((end - Date.now()) / 1000)}s left`);
    }
    const last = sampler.stop()!;
    const metrics = controllerMetrics(await controller.metrics().catch(() => ''));
    const rss = sampler.samples.map((s) => s.rssMiB);
    return {
      worker,
      steady: {
        nodes: count,
        createMs,
        syncMs,
        sampleWindowMs: windowMs,
        rssMiB: { min: round(Math.min(...rss), 1), mean: round(rss.reduce((a, b) => a + b, 0) / rss.length, 1), max: round(Math.max(...rss), 1) },
        peakRssMiB: round(last.hwmMiB, 1),
        cpuSecondsStartup: round(startup.cpuSeconds, 2),
        cpuSecondsWindow: round(last.cpuSeconds - startup.cpuSeconds, 2),
        requestsDuringWindowAllClients: diffCounts(await apiserverRequestCounts(kc), before),
        nodeObjectBytes,
        controllerMetrics: metrics,
      },
    };
  } finally {
    await controller?.stop();
    await stopSandbox(env.sandboxDir, env.slot, () => {});
  }
}
