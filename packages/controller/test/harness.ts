// Runs the controller in-process (startController, real clock) against the shared sandbox, with a
// configuration isolated per test: its own node selector label, taint key, verified label, condition
// type, worker namespace and Lease, so tests running side by side never touch each other's nodes.
import { Writable } from 'node:stream';
import { createLogger, type Logger } from '@kube-node-ready/core';
import { k8s, type NodeSpecOptions } from '@kube-node-ready/sandbox';
import { Registry } from 'prom-client';
import { realClock } from '../src/clock.js';
import { parseConfig } from '../src/config/load.js';
import type { ControllerConfig, ControllerConfigInput } from '../src/config/schema.js';
import { startController, type RunningController } from '../src/controllers.js';
import type { NodeVerification, NodeVerificationStatus } from '../src/api/nodeverification.js';
import { KubeClient } from '../src/kube/client.js';
import { addNode, core, createNamespace, describeNodesOnTimeout, readVerification, sandbox, serviceAccountKubeConfig, uniqueName, waitFor } from '../../../test/sandbox.js';
import { deepMerge } from '../../core/src/testing/merge.js';
import { certPaths } from '../../sandbox/src/certs.js';
import { startFaultProxy, type FaultProxy } from '../../sandbox/src/fault-proxy.js';

export interface Harness {
  id: string;
  namespace: string;
  taint: k8s.V1Taint;
  verifiedLabel: { key: string; value: string };
  conditionType: string;
  /** Label every node of this test carries (nodeManagement.nodeSelector). */
  selector: { key: string; value: string };
  config(overrides?: ControllerConfigInput): ControllerConfig;
  /** A simulated node of this test, tainted with its verification taint unless `taints` says otherwise. */
  addNode(opts?: Partial<NodeSpecOptions> & { prefix?: string }): Promise<string>;
  /** Waits until every one of `nodes` carries this test's verified label (a timeout describes the nodes). */
  waitForOpen(nodes: readonly string[], what: string, timeoutMs: number): Promise<void>;
  /**
   * Starts a controller in this process. One that loses its Lease (a renewal held up past
   * renewDeadline on a busy machine) stops working, as a deposed leader does; like its Deployment
   * would, the harness then starts it again under the same name (logs kept, a new registry), unless
   * `restartOnLoss` is false (tests of the loss itself).
   */
  start(overrides?: ControllerConfigInput, name?: string, opts?: { kubeConfig?: k8s.KubeConfig; restartOnLoss?: boolean }): Promise<TestController>;
  /** Stops every controller this harness started. */
  stopAll(): Promise<void>;
  /** Stops the controllers, then deletes this test's nodes and worker pods (the sandbox is shared). */
  cleanup(): Promise<void>;
}

export interface TestController {
  name: string;
  running: RunningController;
  registry: Registry;
  logs: Array<Record<string, unknown>>;
  stop(): Promise<void>;
  /** Prometheus text of the running instance. */
  metrics(): Promise<string>;
  /**
   * Prometheus text of every instance this controller ran, oldest first: the harness starts it
   * again when it loses its leadership (as its Deployment would), which a loaded machine can cause, and
   * a counter of the whole run is the sum over them.
   */
  metricsOfEach(): Promise<string[]>;
  /** One series' value summed over every instance (a counter of the whole run), e.g. `kube_node_ready_verifications_total{status="success"}`. */
  counter(series: string): Promise<number>;
}

export async function harness(prefix = 'ctl'): Promise<Harness> {
  const namespace = await createNamespace(prefix);
  const id = namespace.split('-').pop() as string;
  await core().createNamespacedServiceAccount({ namespace, body: { metadata: { name: 'kube-node-ready-worker' } } });
  const rbac = sandbox().kc.makeApiClient(k8s.RbacAuthorizationV1Api);
  await rbac
    .createClusterRole({
      body: {
        metadata: { name: 'knr-ctl-test-worker' },
        rules: [
          { apiGroups: [''], resources: ['services'], verbs: ['get', 'list'] },
          { apiGroups: ['discovery.k8s.io'], resources: ['endpointslices'], verbs: ['get', 'list'] },
        ],
      },
    })
    .catch(() => undefined); // shared by every harness
  await rbac.createClusterRoleBinding({
    body: {
      metadata: { name: `knr-ctl-worker-${namespace}` },
      roleRef: { apiGroup: 'rbac.authorization.k8s.io', kind: 'ClusterRole', name: 'knr-ctl-test-worker' },
      subjects: [{ kind: 'ServiceAccount', name: 'kube-node-ready-worker', namespace }],
    },
  });

  const taint = { key: `test-${id}.kube-node-ready.io/unverified`, value: 'true', effect: 'NoSchedule' as const };
  const verifiedLabel = { key: `test-${id}.kube-node-ready.io/verified`, value: 'true' };
  const selector = { key: 'knr-test', value: id };
  describeNodesOnTimeout(`${selector.key}=${selector.value}`);
  const conditionType = `test-${id}.kube-node-ready.io/NetworkVerified`;
  const base: ControllerConfigInput = {
    worker: {
      image: { repository: 'kube-node-ready', tag: 'dev' },
      namespace,
      priorityClassName: '',
      timeout: '30s',
      scheduleTimeout: '4s',
      startTimeout: '4s',
      // Generous per-check timeouts: the sandbox runs every worker on the same two cores.
      checks: { checkTimeout: '10s' },
    },
    reconciliation: { initialBackoff: '1s', maxBackoff: '2s', maxRetries: 1, resyncInterval: '30s', workers: 4 },
    nodeManagement: { taints: [taint], verifiedLabel, condition: { type: conditionType }, nodeSelector: `${selector.key}=${selector.value}` },
    // Timings that hold on a busy 2-core machine: a controller that loses its Lease stops working
    // for good (as a deposed leader does; its pod would be restarted), and the test would wait in vain.
    leaderElection: { leaseName: `knr-${id}`, namespace, leaseDuration: '15s', renewDeadline: '10s', retryPeriod: '2s' },
    metrics: { bindAddress: '127.0.0.1:0' },
    kubernetes: { qps: 100, burst: 200 },
  };
  const started: TestController[] = [];
  const stopAll = async (): Promise<void> => {
    await Promise.all(started.splice(0).map((c) => c.stop()));
  };

  const config = (overrides: ControllerConfigInput = {}): ControllerConfig =>
    parseConfig(deepMerge(base as Record<string, unknown>, overrides as Record<string, unknown>)) as ControllerConfig;

  return {
    id,
    namespace,
    taint,
    verifiedLabel,
    conditionType,
    selector,
    config,
    async waitForOpen(nodes, what, timeoutMs) {
      await waitFor(
        async () => {
          const open = await Promise.all(nodes.map(async (n) => (await readNode(n))?.metadata?.labels?.[verifiedLabel.key] === verifiedLabel.value));
          return open.every(Boolean) || undefined;
        },
        what,
        timeoutMs,
      );
    },
    async addNode(opts = {}) {
      const name = opts.name ?? uniqueName(opts.prefix ?? `n${id}`);
      const taints = opts.taints ?? [taint];
      return addNode({ ...opts, name, taints, labels: { ...opts.labels, [selector.key]: selector.value } });
    },
    async start(overrides = {}, name = uniqueName('controller'), opts = {}) {
      const logs: Array<Record<string, unknown>> = [];
      const log = await captureLogger(logs, name);
      const cfg = config(overrides);
      const launch = async (): Promise<{ running: RunningController; registry: Registry }> => {
        const kube = new KubeClient(opts.kubeConfig ?? sandbox().kc, { qps: cfg.kubernetes.qps, burst: cfg.kubernetes.burst, clock: realClock, log });
        const registry = new Registry();
        const running = await startController({ config: cfg, kube, clock: realClock, log, registry, identity: `${name}_test`, version: 'dev', commit: 'test' });
        return { running, registry };
      };
      let current = await launch();
      const instances = [current];
      let stopped = false;
      const restartOnLoss = (instance: typeof current): void => {
        // A controller that failed to start leading ends `finished` with that error; the test that
        // started it sees it in the logs and in running.finished, so here it only ends the watch.
        void instance.running.finished.catch(() => 'failed' as const).then(async (result) => {
          if (result !== 'lost' || stopped) return;
          const restart = opts.restartOnLoss !== false;
          process.stderr.write(`harness: controller ${name} lost its leadership${restart ? '; starting it again, as its Deployment would' : ' and stopped working'}\n`);
          if (!restart) return;
          await instance.running.stop();
          if (stopped) return;
          current = await launch();
          instances.push(current);
          if (stopped) await current.running.stop();
          else restartOnLoss(current);
        });
      };
      restartOnLoss(current);
      const controller: TestController = {
        name,
        get running() {
          return current.running;
        },
        get registry() {
          return current.registry;
        },
        logs,
        stop: async () => {
          stopped = true;
          await current.running.stop();
        },
        metrics: () => current.registry.metrics(),
        metricsOfEach: () => Promise.all(instances.map((i) => i.registry.metrics())),
        counter: async (series) => {
          let sum = 0;
          for (const text of await Promise.all(instances.map((i) => i.registry.metrics()))) {
            const line = text.split('\n').find((l) => l.startsWith(`${series} `));
            sum += Number(line?.slice(series.length + 1) ?? 0);
          }
          return sum;
        },
      };
      started.push(controller);
      return controller;
    },
    stopAll,
    async cleanup() {
      await stopAll();
      const nodes = await core().listNode({ labelSelector: `${selector.key}=${selector.value}` });
      await Promise.all(nodes.items.map((n) => core().deleteNode({ name: n.metadata?.name ?? '' }).catch(() => undefined)));
      await core().deleteCollectionNamespacedPod({ namespace, gracePeriodSeconds: 0 }).catch(() => undefined);
    },
  };
}

/** A logger whose JSON lines land in `logs` (and on stderr with KNR_TEST_LOG=1). */
async function captureLogger(logs: Array<Record<string, unknown>>, name: string): Promise<Logger> {
  const echo = process.env.KNR_TEST_LOG === '1';
  const destination = new Writable({
    write(chunk: Buffer, _enc, done) {
      for (const line of chunk.toString().split('\n')) {
        if (!line.trim()) continue;
        try {
          logs.push(JSON.parse(line) as Record<string, unknown>);
        } catch {
          // not JSON: ignore
        }
        if (echo) process.stderr.write(`[${name}] ${line}\n`);
      }
      done();
    },
  });
  return createLogger({ level: 'debug', base: { controller: name }, destination });
}

/**
 * The sandbox's fault proxy in front of the apiserver, and a kubeconfig for a controller that
 * talks through it (pass it to `h.start(..., { kubeConfig })`): faults then hit only that
 * controller's connections, while the test's own client goes straight to the apiserver. The
 * controller gets its own ServiceAccount token (cluster-admin), which the proxy forwards.
 */
export async function throughFaultProxy(h: Harness): Promise<{ proxy: FaultProxy; kubeConfig: k8s.KubeConfig }> {
  const { layout } = sandbox();
  const certs = certPaths(layout.paths.certs);
  const proxy = await startFaultProxy({ upstreamHost: layout.apiHost, upstreamPort: layout.apiPort, caFile: certs.caCert, certFile: certs.serverCert, keyFile: certs.serverKey });
  await core().createNamespacedServiceAccount({ namespace: h.namespace, body: { metadata: { name: 'controller' } } });
  await sandbox()
    .kc.makeApiClient(k8s.RbacAuthorizationV1Api)
    .createClusterRoleBinding({
      body: {
        metadata: { name: `knr-ctl-${h.namespace}` },
        roleRef: { apiGroup: 'rbac.authorization.k8s.io', kind: 'ClusterRole', name: 'cluster-admin' },
        subjects: [{ kind: 'ServiceAccount', name: 'controller', namespace: h.namespace }],
      },
    });
  const kubeConfig = await serviceAccountKubeConfig(h.namespace, 'controller', proxy.url);
  return { proxy, kubeConfig };
}


// ---------------------------------------------------------------------------------------------
// Reading the cluster

export async function readNode(name: string): Promise<k8s.V1Node | undefined> {
  try {
    return await core().readNode({ name });
  } catch {
    return undefined;
  }
}

export async function workerPods(namespace: string, node: string): Promise<k8s.V1Pod[]> {
  const list = await core().listNamespacedPod({ namespace, labelSelector: `kube-node-ready.io/node=${node}` });
  return list.items;
}

/** The node's Events written by kube-node-ready (kube-controller-manager and the kubelet write their own about nodes). */
export async function nodeEvents(node: string): Promise<k8s.CoreV1Event[]> {
  const list = await core().listNamespacedEvent({ namespace: 'default', fieldSelector: `involvedObject.kind=Node,involvedObject.name=${node}` });
  return list.items.filter((e) => (e.reportingComponent ?? e.source?.component ?? '').startsWith('kube-node-ready'));
}

/**
 * The node's Events once `ready` holds for them. The controller creates Events after the write
 * they report, without waiting for them, so a test that has seen the write must wait for them too.
 */
export async function nodeEventsWhen(node: string, ready: (events: k8s.CoreV1Event[]) => boolean, what: string, timeoutMs?: number): Promise<k8s.CoreV1Event[]> {
  return waitFor(async () => {
    const events = await nodeEvents(node);
    return ready(events) ? events : undefined;
  }, what, timeoutMs);
}

/** The reasons of `events`, counted (an aggregated Event counts `count` times). */
export function countReasons(events: k8s.CoreV1Event[]): Record<string, number> {
  const counts: Record<string, number> = {};
  for (const e of events) counts[e.reason ?? ''] = (counts[e.reason ?? ''] ?? 0) + (e.count ?? 1);
  return counts;
}

export function annotations(node: k8s.V1Node | undefined): Record<string, string> {
  return node?.metadata?.annotations ?? {};
}

/** The node's NodeVerification, if it has one of its current UID. */
export async function verificationOf(name: string): Promise<NodeVerification | undefined> {
  const nv = await readVerification(name);
  if (!nv) return undefined;
  const node = await readNode(name);
  return nv.spec?.nodeUID === node?.metadata?.uid ? nv : undefined;
}

/** The one condition of the node's NodeVerification status (type Verified: every step, not only final verdicts). */
export async function verificationCondition(name: string): Promise<NonNullable<NodeVerificationStatus['conditions']>[number] | undefined> {
  return (await verificationOf(name))?.status?.conditions?.[0];
}

/**
 * A node's verification progress as its NodeVerification status says it, flattened for tests:
 * phase, attempt, failures, last-outcome, last-message, failing (JSON), next-attempt-at, verified-at. Fields the
 * status lacks are absent; no NodeVerification (or one of an earlier node of that name) is {}.
 */
export async function progressOf(name: string): Promise<Record<string, string>> {
  const nv = await verificationOf(name);
  if (!nv) return {};
  const s = nv.status ?? {};
  const fields: Record<string, string | undefined> = {
    phase: s.phase,
    attempt: s.attempt === undefined ? undefined : String(s.attempt),
    failures: s.failures === undefined ? undefined : String(s.failures),
    'last-outcome': s.lastAttempt?.reason,
    'last-message': s.lastAttempt?.message,
    failing: s.failing === undefined ? undefined : JSON.stringify(s.failing),
    'next-attempt-at': s.nextAttemptAt,
    'verified-at': s.verifiedAt,
  };
  return Object.fromEntries(Object.entries(fields).filter((e): e is [string, string] => e[1] !== undefined));
}

export { waitFor };
