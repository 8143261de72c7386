import { Profiles } from '../../../config/profiles.js';
import { WorkerConfigMap } from './worker-config.js';
import type { V1Node, V1Pod } from '@kubernetes/client-node';
import { ApiException } from '@kubernetes/client-node';
import { silentLogger } from '@kube-node-ready/core';
import { Registry } from 'prom-client';
import { describe, expect, it } from 'vitest';
import { INSTALLATION_LABEL, newNodeVerification, type NodeVerification } from '../../../api/nodeverification.js';
import { LogEventRecorder } from '../../../events/recorder.js';
import type { InformerHandlers } from '../../../kube/informer.js';
import { ControllerMetrics } from '../../../metrics/metrics.js';
import { aNode, aWorkerPod, DEFAULT_TAINT, summaryText, testConfig } from '../../../testing/builders.js';
import { FakeClock } from '../../../testing/fake-clock.js';
import { applyJsonPatch, PatchTestFailed } from '../../../testing/json-patch.js';
import { ClusterWideFailures } from './cluster-wide.js';
import { VerificationController, type VerificationDeps } from './controller.js';
import { CONTROL_POLL_MS } from './decide.js';
import { VerificationSlots } from './slots.js';
import { workerNodeName } from './pod-spec.js';
import { NodeVerificationStore } from './store.js';
import { Outcome, Phase } from './types.js';

// The verification controller's dispatch and write order, with a recording fake of the API at the
// kube boundary (the real NodeVerificationStore on top of it). The behaviour against a real API
// server is proven by the sandbox tests beside this file (verification, stale-cache, store,
// cluster-wide, failures).

const T0 = Date.UTC(2025, 0, 1);
const DNS = '10.96.0.10:53';

/** The API as the controller uses it: nodes, worker pods and NodeVerifications in maps, every call recorded in order. */
class FakeApi {
  readonly nodes = new Map<string, V1Node>();
  readonly pods = new Map<string, V1Pod>();
  readonly verifications = new Map<string, NodeVerification>();
  readonly calls: string[] = [];
  /** Nodes the informer's cache still holds an older copy of. */
  readonly staleCache = new Map<string, V1Node>();
  private rv = 1000;

  async getNode(name: string): Promise<V1Node | undefined> {
    this.calls.push(`get node ${name}`);
    const node = this.nodes.get(name);
    return node && structuredClone(node);
  }
  async findNode(name: string): Promise<V1Node | undefined> {
    return this.getNode(name);
  }
  async patchNode(name: string, ops: readonly object[]): Promise<V1Node> {
    this.calls.push(`patch node ${name}`);
    const node = this.nodes.get(name);
    if (!node) throw new ApiException(404, 'NotFound', '{}', {});
    try {
      const patched = applyJsonPatch(node, ops as Parameters<typeof applyJsonPatch>[1]);
      patched.metadata!.resourceVersion = String(++this.rv);
      this.nodes.set(name, patched);
      return structuredClone(patched);
    } catch (err) {
      if (err instanceof PatchTestFailed) throw new ApiException(422, 'Unprocessable Entity', JSON.stringify({ reason: 'Invalid', message: 'the server rejected our request due to an error in our request' }), {});
      throw err;
    }
  }
  async patchNodeStatus(name: string): Promise<void> {
    this.calls.push(`patch node status ${name}`);
  }
  async createPod(pod: V1Pod): Promise<V1Pod | undefined> {
    const name = pod.metadata?.name ?? '';
    this.calls.push(`create pod ${name}`);
    if (this.pods.has(name)) return undefined;
    const created = { ...structuredClone(pod), metadata: { ...pod.metadata, creationTimestamp: new Date(T0) } };
    this.pods.set(name, created);
    return structuredClone(created);
  }
  async getPod(_namespace: string, name: string): Promise<V1Pod | undefined> {
    this.calls.push(`get pod ${name}`);
    return this.pods.get(name);
  }
  async deletePod(_namespace: string, name: string): Promise<void> {
    this.calls.push(`delete pod ${name}`);
    this.pods.delete(name);
  }
  async getNodeVerification(name: string): Promise<NodeVerification | undefined> {
    return this.verifications.get(name);
  }
  async createNodeVerification(nv: NodeVerification): Promise<NodeVerification> {
    this.calls.push(`create nodeverification ${nv.metadata?.name}${nv.status ? ` ${nv.status.phase}` : ''}`);
    const created = { ...structuredClone(nv), metadata: { ...nv.metadata, uid: `nv-${nv.metadata?.name}`, resourceVersion: String(++this.rv) } };
    this.verifications.set(nv.metadata?.name ?? '', created);
    return created;
  }
  async updateNodeVerification(nv: NodeVerification): Promise<NodeVerification> {
    this.calls.push(`update nodeverification ${nv.metadata?.name} ${nv.status?.phase}`);
    const updated = { ...structuredClone(nv), metadata: { ...nv.metadata, resourceVersion: String(++this.rv) } };
    this.verifications.set(nv.metadata?.name ?? '', updated);
    return updated;
  }
  async *listNodeVerificationPages(): AsyncGenerator<{ items: NodeVerification[] }> {
    yield { items: [...this.verifications.values()] };
  }
  async deleteNodeVerification(name: string): Promise<void> {
    this.verifications.delete(name);
  }

  /** Writes (and the live reads that follow a conflict) in order, without the reads the cache stands in for. */
  taken(): string[] {
    return this.calls.splice(0);
  }
}

function setup(opts: { config?: Parameters<typeof testConfig>[0]; clusterWide?: ClusterWideFailures; controlRuns?: VerificationDeps['controlRuns'] } = {}) {
  const config = testConfig(opts.config ?? {});
  const clock = new FakeClock(T0);
  const api = new FakeApi();
  const podSource = { list: () => [...api.pods.values()], on: (_handlers: InformerHandlers<V1Pod>) => undefined };
  const store = new NodeVerificationStore({ kube: api, config, clock, log: silentLogger(), cache: api.verifications });
  const deps: VerificationDeps = {
    config,
    clock,
    log: silentLogger(),
    kube: api,
    // The caches are the fake API's maps: every write is seen at once (the sandbox tests cover lagging caches).
    nodes: { get: (name) => api.staleCache.get(name) ?? api.nodes.get(name) },
    pods: { byIndex: (node) => [...api.pods.values()].filter((p) => workerNodeName(p) === node) },
    store,
    events: new LogEventRecorder(silentLogger()),
    metrics: new ControllerMetrics(new Registry(), { version: 'v', commit: 'c' }),
    slots: new VerificationSlots(podSource, clock),
    worker: { image: 'kube-node-ready:test', configs: new WorkerConfigMap(new Profiles(config)) },
    enqueue: () => undefined,
    ...(opts.clusterWide ? { clusterWide: opts.clusterWide } : {}),
    ...(opts.controlRuns ? { controlRuns: opts.controlRuns } : {}),
  };
  return { api, config, clock, controller: new VerificationController(deps) };
}

/** The node's worker pod of `attempt`, as the fake API holds it, finished by `finish`. */
function finishPod(api: FakeApi, node: V1Node, attempt: number, finish: (pod: ReturnType<typeof aWorkerPod>) => ReturnType<typeof aWorkerPod>): void {
  const built = finish(aWorkerPod(node, attempt)).build();
  const name = built.metadata?.name ?? '';
  const created = api.pods.get(name);
  expect(created, `worker pod ${name} was created`).toBeDefined();
  api.pods.set(name, { ...created!, status: built.status });
}

describe('VerificationController', () => {
  it('launches: the worker pod and nothing else (the pod is the record of the attempt in flight)', async () => {
    const { api, controller } = setup();
    api.nodes.set('n1', aNode('n1').tainted().createdAt(T0 - 60_000).build());
    const result = await controller.reconcile('n1');
    expect(api.taken()).toEqual([expect.stringMatching(/^create pod /)]);
    expect(result.requeueAfterMs).toBeGreaterThan(0);
    // The next reconcile follows that attempt: no second pod, nothing written.
    await controller.reconcile('n1');
    expect(api.taken()).toEqual([]);
  });

  it('a pass opens the node (its own guarded patch) before the pass is stored; the node then carries no verification taint', async () => {
    const { api, controller } = setup();
    api.nodes.set('n1', aNode('n1').tainted().registered().createdAt(T0 - 60_000).build());
    await controller.reconcile('n1');
    const node = api.nodes.get('n1')!;
    finishPod(api, node, 1, (p) => p.passed());
    api.taken();
    await controller.reconcile('n1');
    const calls = api.taken();
    expect(calls.filter((c) => !c.startsWith('patch node status'))).toEqual(['patch node n1', 'create nodeverification n1 Passed', expect.stringMatching(/^delete pod /)]);
    expect(api.nodes.get('n1')!.spec?.taints ?? []).not.toContainEqual(expect.objectContaining({ key: DEFAULT_TAINT.key }));
  });

  it('a worker pod is deleted once: a reconcile before the pod cache shows the deletion does not delete it again', async () => {
    const { api, controller } = setup();
    api.nodes.set('n1', aNode('n1').tainted().registered().createdAt(T0 - 60_000).build());
    await controller.reconcile('n1');
    finishPod(api, api.nodes.get('n1')!, 1, (p) => p.passed());
    const [name, pod] = [...api.pods.entries()][0]!;
    await controller.reconcile('n1');
    expect(api.taken().filter((c) => c.startsWith('delete pod '))).toEqual([`delete pod ${name}`]);
    // The cache still has it, without a deletionTimestamp (the watch has not delivered the delete).
    api.pods.set(name, pod);
    await controller.reconcile('n1');
    expect(api.taken().filter((c) => c.startsWith('delete pod '))).toEqual([]);
  });

  it('the verdict condition is patched once: a reconcile before the watch shows it does not patch it again', async () => {
    const { api, controller } = setup();
    api.nodes.set('n1', aNode('n1').tainted().registered().createdAt(T0 - 60_000).build());
    await controller.reconcile('n1');
    finishPod(api, api.nodes.get('n1')!, 1, (p) => p.passed());
    api.taken();
    await controller.reconcile('n1');
    expect(api.taken().filter((c) => c.startsWith('patch node status'))).toEqual(['patch node status n1']);
    // The fake's nodes never show the condition (a status patch returns no Node): the cache lags our write.
    await controller.reconcile('n1');
    expect(api.taken()).toEqual([]);
  });

  it('dry run: a pass is recorded but the node is not opened', async () => {
    const { api, controller } = setup({ config: { dryRun: true } });
    api.nodes.set('n1', aNode('n1').tainted().registered().createdAt(T0 - 60_000).build());
    await controller.reconcile('n1');
    finishPod(api, api.nodes.get('n1')!, 1, (p) => p.passed());
    api.taken();
    await controller.reconcile('n1');
    expect(api.taken().filter((c) => c.startsWith('patch node'))).toEqual([]);
    expect(api.nodes.get('n1')!.spec?.taints).toContainEqual(expect.objectContaining({ key: DEFAULT_TAINT.key }));
  });

  it('an open refused because the node changed (its taints moved) is a requeue after a live read; the next reconcile opens the live copy', async () => {
    const { api, controller } = setup();
    api.nodes.set('n1', aNode('n1').tainted().registered().createdAt(T0 - 60_000).build());
    await controller.reconcile('n1');
    finishPod(api, api.nodes.get('n1')!, 1, (p) => p.passed());
    // Another agent put its taint first: the cache still holds the copy without it, so the patch's index tests fail.
    const cached = structuredClone(api.nodes.get('n1')!);
    api.staleCache.set('n1', cached);
    const other = { key: 'other.example.com/agent', effect: 'NoSchedule' };
    api.nodes.set('n1', { ...cached, metadata: { ...cached.metadata, resourceVersion: '5000' }, spec: { taints: [other, ...(cached.spec?.taints ?? [])] } });
    api.taken();
    expect(await controller.reconcile('n1')).toEqual({ requeue: true });
    expect(api.taken().filter((c) => !c.startsWith('patch node status'))).toEqual(['patch node n1', 'get node n1']);
    // The informer still has the refused copy; the live read stands in for it.
    await controller.reconcile('n1');
    expect(api.taken().filter((c) => !c.startsWith('patch node status'))).toEqual(['patch node n1', 'create nodeverification n1 Passed', expect.stringMatching(/^delete pod /)]);
    expect(api.nodes.get('n1')!.spec?.taints).toEqual([other]);
  });

  it('an attempt failing dns the way most new nodes fail it is judged before the decision: inconclusive, not counted, the signal raised once stored', async () => {
    const clusterWide = new ClusterWideFailures(new FakeClock(T0));
    const dnsFailed = [{ name: 'dns', ok: false, durationMs: 1000, error: 'timeout', target: DNS }];
    clusterWide.record('other-1', dnsFailed);
    clusterWide.record('other-2', dnsFailed);
    const { api, controller } = setup({ clusterWide });
    api.nodes.set('n1', aNode('n1').tainted().createdAt(T0 - 60_000).build());
    await controller.reconcile('n1');
    finishPod(api, api.nodes.get('n1')!, 1, (p) => p.exited(1, summaryText(dnsFailed)));
    api.taken();
    const result = await controller.reconcile('n1');
    expect(api.verifications.get('n1')?.status).toMatchObject({ phase: Phase.Backoff, failures: 0 });
    expect(api.verifications.get('n1')?.status?.lastAttempt).toMatchObject({ reason: Outcome.ClusterWide });
    expect(result.requeueAfterMs).toBeGreaterThan(0);
    expect([...clusterWide.activeFaults().keys()]).toEqual(['dns']);
  });

  it('while a control run of the shared failure is under way, nothing is written and the node is looked at again soon', async () => {
    const clusterWide = new ClusterWideFailures(new FakeClock(T0));
    const dnsFailed = [{ name: 'dns', ok: false, durationMs: 1000, error: 'timeout', target: DNS }];
    clusterWide.record('other-1', dnsFailed);
    clusterWide.record('other-2', dnsFailed);
    const asked: string[][] = [];
    const controlRuns = { verdict: async (checks: readonly string[]) => (asked.push([...checks]), { kind: 'pending' as const, node: 'verified-1' }) };
    const { api, controller } = setup({ clusterWide, controlRuns });
    api.nodes.set('n1', aNode('n1').tainted().createdAt(T0 - 60_000).build());
    await controller.reconcile('n1');
    finishPod(api, api.nodes.get('n1')!, 1, (p) => p.exited(1, summaryText(dnsFailed)));
    api.taken();
    const result = await controller.reconcile('n1');
    expect(asked).toEqual([['dns']]);
    expect(api.taken().filter((c) => !c.startsWith('patch node status'))).toEqual([]);
    expect(result.requeueAfterMs).toBe(CONTROL_POLL_MS);
    expect(api.verifications.get('n1')).toBeUndefined();
    expect(clusterWide.activeFaults().size).toBe(0);
  });

  it('another installation\'s node is refused before any write of it: the node is not opened', async () => {
    const { api, controller } = setup();
    api.nodes.set('n1', aNode('n1').tainted().registered().createdAt(T0 - 60_000).build());
    await controller.reconcile('n1');
    finishPod(api, api.nodes.get('n1')!, 1, (p) => p.passed());
    // The other installation recorded its verdict of the node first.
    const theirs = newNodeVerification(api.nodes.get('n1')!, 'someone-else');
    api.verifications.set('n1', { ...theirs, metadata: { ...theirs.metadata, labels: { [INSTALLATION_LABEL]: 'someone-else' } } });
    api.taken();
    await expect(controller.reconcile('n1')).rejects.toThrow(/another installation/);
    expect(api.taken().filter((c) => c.startsWith('patch node '))).toEqual([]);
  });

  it('a new node that is only booting (NotReady, nothing else in the way) writes nothing until it is overdue; then it is reported', async () => {
    const { api, config, controller } = setup();
    // 60 s old: past the 10 s after which other waits are recorded, well before bringUpTimeout.
    api.nodes.set('n1', aNode('n1').tainted().createdAt(T0 - 60_000).notReady('KubeletNotReady', 'container runtime network not ready').build());
    const waiting = await controller.reconcile('n1');
    expect(api.taken()).toEqual([]);
    expect(api.verifications.get('n1')).toBeUndefined();
    expect(waiting.requeueAfterMs).toBe(config.nodeManagement.bringUpTimeout - 60_000);
    // Overdue: the NodeVerification records it and the Node carries the verdict.
    api.nodes.set('n1', aNode('n1').tainted().createdAt(T0 - config.nodeManagement.bringUpTimeout - 1_000).notReady('KubeletNotReady', 'container runtime network not ready').build());
    await controller.reconcile('n1');
    expect(api.taken()).toEqual(['create nodeverification n1 Waiting', 'patch node status n1']);
  });

  it("another installation's node gets no worker pod", async () => {
    const { api, controller } = setup();
    api.nodes.set('n1', aNode('n1').tainted().registered().createdAt(T0 - 60_000).build());
    const theirs = newNodeVerification(api.nodes.get('n1')!, 'someone-else');
    api.verifications.set('n1', { ...theirs, metadata: { ...theirs.metadata, labels: { [INSTALLATION_LABEL]: 'someone-else' } } });
    await expect(controller.reconcile('n1')).rejects.toThrow(/another installation/);
    expect(api.taken()).toEqual([]);
  });
});
