// A burst of nodes joining at once (KNR_SCALE_NODES, default 20; the figure is for 100):
// every node is verified and opened, and the latencies that matter are measured from the test's
// own watches (millisecond clock, unlike the API's second-precision timestamps):
//   pod created - node created      how fast a worker is launched
//   taint removed - worker finished  how fast a passing result opens the node
// Run: KNR_SCALE_NODES=100 npx vitest run --project sandbox packages/controller/src/controllers/node/verification/scale.sandbox.test.ts
import { afterAll, beforeAll, expect, it } from 'vitest';
import { silentLogger } from '@kube-node-ready/core';
import { k8s } from '@kube-node-ready/sandbox';
import { realClock } from '../../../clock.js';
import { SelfHealingInformer } from '../../../kube/informer.js';
import { harness, type Harness } from '../../../../test/harness.js';
import { parseConfig } from '../../../config/load.js';
import { sandbox, waitFor } from '../../../../../../test/sandbox.js';

const COUNT = Number(process.env.KNR_SCALE_NODES ?? '20');
let h: Harness;

beforeAll(async () => {
  h = await harness('ctlscale');
});

afterAll(async () => {
  await h?.cleanup();
});

interface Times {
  created?: number;
  podCreated?: number;
  workerFinished?: number;
  opened?: number;
}

it(`opens ${COUNT} nodes joining at once, and reports the launch and open latencies`, async () => {
  const times = new Map<string, Times>();
  const get = (node: string): Times => {
    let t = times.get(node);
    if (!t) times.set(node, (t = {}));
    return t;
  };
  // The test's own caches, healing like the controller's, record when each change is seen.
  const log = silentLogger();
  const kubeConfig = sandbox().kc;
  const core = kubeConfig.makeApiClient(k8s.CoreV1Api);
  const pods = new SelfHealingInformer<k8s.V1Pod>({
    resource: 'pods',
    path: `/api/v1/namespaces/${h.namespace}/pods`,
    list: async function* () {
      yield await core.listNamespacedPod({ namespace: h.namespace });
    },
    kubeConfig,
    clock: realClock,
    log,
  });
  const onPod = (pod: k8s.V1Pod): void => {
    const node = pod.metadata?.annotations?.['kube-node-ready.io/node-name'];
    if (!node) return;
    const t = get(node);
    t.podCreated ??= Date.now();
    // The worker that passed (earlier attempts may have failed on a loaded machine).
    if (pod.status?.containerStatuses?.[0]?.state?.terminated?.exitCode === 0) t.workerFinished ??= Date.now();
  };
  pods.on({ add: onPod, update: onPod });
  const selector = `${h.selector.key}=${h.selector.value}`;
  const nodes = new SelfHealingInformer<k8s.V1Node>({
    resource: 'nodes',
    path: '/api/v1/nodes',
    list: async function* () {
      yield await core.listNode({ labelSelector: selector });
    },
    labelSelector: selector,
    kubeConfig,
    clock: realClock,
    log,
  });
  const onNode = (node: k8s.V1Node): void => {
    const open = !(node.spec?.taints ?? []).some((t) => t.key === h.taint.key) && node.metadata?.labels?.[h.verifiedLabel.key] === 'true';
    if (open) get(node.metadata?.name ?? '').opened ??= Date.now();
  };
  nodes.on({ add: onNode, update: onNode });
  await Promise.all([pods.start(), nodes.start()]);

  // The product's defaults for throughput (reconcile workers, concurrency bound, client QPS and
  // burst); generous worker deadlines, because 2 cores run every worker process of the burst at once.
  const defaults = parseConfig({});
  const ctl = await h.start({
    reconciliation: {
      workers: defaults.reconciliation.workers,
      maxConcurrentVerifications: defaults.reconciliation.maxConcurrentVerifications,
      maxRetries: defaults.reconciliation.maxRetries,
      initialBackoff: '2s',
    },
    kubernetes: { qps: defaults.kubernetes.qps, burst: defaults.kubernetes.burst },
    // Per-check timeouts too: 20 workers start at once, each a Node.js process, beside the sandbox's
    // simulated kubelet on the same two cores.
    worker: { timeout: '60s', scheduleTimeout: '2m', startTimeout: '2m', checks: { checkTimeout: '30s' } },
    // The product's leader election timing, not the harness's 3 s renew deadline: a 20-pod burst on a
    // busy 2-core machine (the controller runs in this test's process) can hold a renewal past 3 s.
    leaderElection: { leaseDuration: '15s', renewDeadline: '10s', retryPeriod: '2s' },
  });
  const started = Date.now();
  const names = await Promise.all(
    Array.from({ length: COUNT }, async () => {
      const name = await h.addNode();
      get(name).created = Date.now();
      return name;
    }),
  );
  await waitFor(async () => names.every((n) => times.get(n)?.opened !== undefined), `all ${COUNT} nodes to open`, Number(process.env.KNR_SCALE_WAIT_MS ?? 480_000), 250).catch((err: Error) => {
    const tail = [...ctl.logs.filter((l) => l.level !== 'debug' && l.level !== 'info').slice(-15), ...ctl.logs.slice(-10)].map((l) => JSON.stringify(l).slice(0, 400));
    throw new Error(`${err.message}\nthe controller's last log lines:\n${tail.join('\n')}`, { cause: err });
  });
  const total = Date.now() - started;
  const metricsBefore = await ctl.metrics();
  await Promise.all([pods.stop(), nodes.stop()]);

  const launch = names.map((n) => (times.get(n)?.podCreated ?? NaN) - (times.get(n)?.created ?? NaN));
  const open = names.map((n) => (times.get(n)?.opened ?? NaN) - (times.get(n)?.workerFinished ?? NaN));
  const report = {
    nodes: COUNT,
    allOpenAfterMs: total,
    podCreatedMinusNodeCreatedMs: summary(launch),
    taintRemovedMinusWorkerFinishedMs: summary(open),
    /** Nodes that needed more than one attempt (workers starved of CPU on a loaded machine). */
    retried: names.filter((n) => (metricsBefore.match(new RegExp(`retry_attempts_total\\{node="${n}"\\} (\\d+)`)) ?? [])[1]).length,
  };
  console.log(`scale: ${JSON.stringify(report)}`);
  const requests = (await ctl.metrics()).split('\n').filter((l) => l.startsWith('kube_node_ready_api_requests_total') || l.startsWith('kube_node_ready_api_throttled'));
  console.log(`scale: API ${requests.join('; ')}`);

  expect(launch.every(Number.isFinite)).toBe(true);
  expect(open.every(Number.isFinite)).toBe(true);
  // The counter moves when the controller has the opening's response; this test's watch may be
  // first. Summed over the controller's instances: on a loaded machine it can miss a Lease renewal,
  // exit and be started again (the harness does what its Deployment would), and each instance
  // counts what it opened.
  const success = 'kube_node_ready_verifications_total{status="success",profile="default"}';
  let successes = 0;
  await waitFor(async () => {
    successes = await ctl.counter(success);
    return successes === COUNT || undefined;
  }, `${success} to add up to ${COUNT}`).catch(() => undefined);
  expect(successes, `${success} over ${(await ctl.metricsOfEach()).length} controller instance(s)`).toBe(COUNT);
  expect(await ctl.counter('kube_node_ready_controller_reconcile_errors_total')).toBe(0);
}, 600_000);

function summary(values: number[]): { median: number; p99: number; max: number } {
  const sorted = [...values].sort((a, b) => a - b);
  const at = (q: number) => sorted[Math.min(sorted.length - 1, Math.ceil(q * sorted.length) - 1)] ?? NaN;
  return { median: at(0.5), p99: at(0.99), max: sorted.at(-1) ?? NaN };
}
