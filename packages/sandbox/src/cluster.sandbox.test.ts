// The sandbox behaves like a real cluster where the product meets one: kube-controller-manager runs
// Deployments, collects garbage and marks nodes whose kubelet stopped; the simulated kubelet
// registers Nodes of a real one's size and keeps their Leases; real Karpenter provisions nodes for
// pending pods through a NodePool with startup taints and replaces a node whose NodeClaim is deleted.
import { afterAll, describe, expect, it } from 'vitest';
import { addNode, core, createNamespace, deleteNode, sandbox, uniqueName, waitFor } from '../../../test/sandbox.js';
import { sandboxControl } from './control.js';
import { createNodePool, deleteNodePool, listNodeClaims, NODECLAIMS } from './karpenter.js';
import { k8s, statusCode } from './kube.js';

const nodes: string[] = [];
const pools: string[] = [];
afterAll(async () => {
  for (const n of nodes) await deleteNode(n);
  for (const p of pools) await deleteNodePool(sandbox().kc, p);
});

const sleeper = (name: string, extra: Partial<k8s.V1PodSpec> = {}): k8s.V1PodTemplateSpec => ({
  metadata: { labels: { app: name } },
  spec: {
    terminationGracePeriodSeconds: 1,
    containers: [{ name: 'main', image: 'sandbox-shell', command: ['/bin/sh', '-c', 'exec sleep 3600'] }],
    ...extra,
  },
});

const apps = () => sandbox().kc.makeApiClient(k8s.AppsV1Api);

describe('sandbox: kube-controller-manager', () => {
  it('runs a Deployment: its ReplicaSet creates the pods and they run on a node', async () => {
    const ns = await createNamespace('deploy');
    const node = await addNode({ prefix: 'deploy', labels: { 'test.kube-node-ready.io/pool': ns } });
    nodes.push(node);
    await apps().createNamespacedDeployment({
      namespace: ns,
      body: {
        metadata: { name: 'web' },
        spec: { replicas: 2, selector: { matchLabels: { app: 'web' } }, template: sleeper('web', { nodeSelector: { 'test.kube-node-ready.io/pool': ns } }) },
      },
    });
    const d = await waitFor(async () => {
      const d = await apps().readNamespacedDeployment({ namespace: ns, name: 'web' });
      return d.status?.availableReplicas === 2 ? d : undefined;
    }, 'the Deployment to have 2 available replicas', 60_000);
    expect(d.status?.readyReplicas).toBe(2);
    const pods = await core().listNamespacedPod({ namespace: ns, labelSelector: 'app=web' });
    expect(pods.items.map((p) => [p.spec?.nodeName, p.status?.phase])).toEqual([
      [node, 'Running'],
      [node, 'Running'],
    ]);
    expect(pods.items.every((p) => p.metadata?.ownerReferences?.[0]?.kind === 'ReplicaSet')).toBe(true);
  });

  it('garbage-collects a pod owned by a Node once the Node is deleted', async () => {
    const ns = await createNamespace('gc');
    const node = await addNode({ prefix: 'gc' });
    nodes.push(node);
    const uid = (await core().readNode({ name: node })).metadata!.uid!;
    await core().createNamespacedPod({
      namespace: ns,
      body: {
        metadata: { name: 'owned', ownerReferences: [{ apiVersion: 'v1', kind: 'Node', name: node, uid }] },
        spec: { ...sleeper('owned').spec!, nodeName: node, restartPolicy: 'Never' },
      },
    });
    await waitFor(async () => (await core().readNamespacedPod({ namespace: ns, name: 'owned' })).status?.phase === 'Running', 'the owned pod to run');
    await deleteNode(node);
    // The garbage collector's delete is graceful: with the node's kubelet gone nobody confirms the
    // termination, so the pod stays Terminating until the pod GC removes orphans after its 40 s
    // quarantine. The collector has acted once the pod is being deleted (or already gone).
    await waitFor(
      async () => {
        try {
          return (await core().readNamespacedPod({ namespace: ns, name: 'owned' })).metadata?.deletionTimestamp !== undefined;
        } catch (err) {
          return statusCode(err) === 404;
        }
      },
      'the garbage collector to delete the pod of the deleted Node',
      60_000,
    );
  });

  it('marks a node whose kubelet stopped Unknown and taints it unreachable, while a live node stays Ready', async () => {
    const stopped = await addNode({ prefix: 'silent' });
    const live = await addNode({ prefix: 'alive' });
    nodes.push(stopped, live);
    await waitFor(async () => (await core().readNode({ name: stopped })).status?.conditions?.find((c) => c.type === 'Ready')?.status === 'True', 'the node to be Ready');
    await sandboxControl(sandbox().state.dir, 'POST', `/stop-kubelet/${stopped}`);
    const n = await waitFor(
      async () => {
        const n = await core().readNode({ name: stopped });
        const keys = (n.spec?.taints ?? []).map((t) => `${t.key}:${t.effect}`);
        return keys.includes('node.kubernetes.io/unreachable:NoSchedule') && keys.includes('node.kubernetes.io/unreachable:NoExecute') ? n : undefined;
      },
      'the node lifecycle controller to taint the silent node unreachable',
      150_000,
      1000,
    );
    expect(n.status?.conditions?.find((c) => c.type === 'Ready')?.status).toBe('Unknown');
    const other = await core().readNode({ name: live });
    expect(other.status?.conditions?.find((c) => c.type === 'Ready')?.status).toBe('True');
    expect((other.spec?.taints ?? []).map((t) => t.key)).not.toContain('node.kubernetes.io/unreachable');
    await sandboxControl(sandbox().state.dir, 'POST', `/start-kubelet/${stopped}`);
  }, 200_000);
});

describe('sandbox: simulated kubelet, node side', () => {
  it('registers a Node of a real EKS node size and renews its Lease', async () => {
    const node = await addNode({ prefix: 'size' });
    nodes.push(node);
    const n = await waitFor(async () => {
      const n = await core().readNode({ name: node });
      return n.status?.daemonEndpoints?.kubeletEndpoint?.Port && n.status.images?.length ? n : undefined;
    }, 'the kubelet to post the node status');
    const bytes = Buffer.byteLength(JSON.stringify(n));
    expect(bytes).toBeGreaterThan(15_000);
    expect(bytes).toBeLessThan(25_000);
    expect(n.status?.images?.length).toBeGreaterThanOrEqual(50);
    expect(new Set((n.metadata?.managedFields ?? []).map((m) => m.manager)).size).toBeGreaterThanOrEqual(2);
    expect(n.status?.addresses?.find((a) => a.type === 'InternalIP')?.address).toMatch(/^10\.1\./);

    const coord = sandbox().kc.makeApiClient(k8s.CoordinationV1Api);
    const first = await waitFor(() => coord.readNamespacedLease({ namespace: 'kube-node-lease', name: node }), 'the node Lease');
    const renewed = await waitFor(
      async () => {
        const l = await coord.readNamespacedLease({ namespace: 'kube-node-lease', name: node });
        return new Date(l.spec!.renewTime!).getTime() > new Date(first.spec!.renewTime!).getTime() ? l : undefined;
      },
      'the Lease to be renewed',
      40_000,
      1000,
    );
    expect(renewed.metadata?.ownerReferences?.[0]?.uid).toBe(n.metadata?.uid);
  }, 90_000);

  it('plays bring-up: NotReady for a while, then Ready; another agent removes its startup taint later', async () => {
    const agentTaint = { key: 'node.cilium.io/agent-not-ready', value: 'true', effect: 'NoSchedule' };
    const node = await addNode({ prefix: 'bringup', taints: [agentTaint], bringUp: { notReadyFor: '6s', removeTaintsAfter: `${agentTaint.key}=10s` } });
    nodes.push(node);
    const ready = (n: k8s.V1Node) => n.status?.conditions?.find((c) => c.type === 'Ready');
    const early = await waitFor(async () => {
      const n = await core().readNode({ name: node });
      return ready(n) ? n : undefined;
    }, 'the first Ready condition');
    expect(ready(early)?.status).toBe('False');
    expect(ready(early)?.message).toMatch(/cni plugin not initialized/);
    const created = new Date(early.metadata!.creationTimestamp!).getTime();
    const readyNode = await waitFor(async () => {
      const n = await core().readNode({ name: node });
      return ready(n)?.status === 'True' ? n : undefined;
    }, 'the node to turn Ready', 30_000, 250);
    expect(new Date(ready(readyNode)!.lastTransitionTime!).getTime() - created).toBeGreaterThanOrEqual(5_000);
    await waitFor(async () => !(await core().readNode({ name: node })).spec?.taints?.some((t) => t.key === agentTaint.key), 'the agent to remove its taint', 30_000, 250);
    expect(Date.now() - created).toBeGreaterThanOrEqual(9_000);
  }, 60_000);
});

describe('sandbox: real Karpenter', () => {
  it('provisions a node with the NodePool startup taint for a pending pod, and replaces it when its NodeClaim is deleted', async () => {
    const ns = await createNamespace('karp');
    const pool = uniqueName('pool');
    pools.push(pool);
    // A dedicated pool: its taint keeps other tests' pending pods off it.
    const dedicated = { key: 'test.kube-node-ready.io/pool', value: pool, effect: 'NoSchedule' };
    const startup = { key: 'node-ready/unverified', value: 'true', effect: 'NoSchedule' };
    await createNodePool(sandbox().kc, { name: pool, taints: [dedicated], startupTaints: [startup] });
    await apps().createNamespacedDeployment({
      namespace: ns,
      body: {
        metadata: { name: 'app' },
        spec: {
          replicas: 1,
          selector: { matchLabels: { app: 'app' } },
          template: sleeper('app', {
            nodeSelector: { 'karpenter.sh/nodepool': pool },
            tolerations: [{ key: dedicated.key, operator: 'Equal', value: pool, effect: 'NoSchedule' }],
            containers: [{ name: 'main', image: 'sandbox-shell', command: ['/bin/sh', '-c', 'exec sleep 3600'], resources: { requests: { cpu: '1', memory: '1Gi' } } }],
          }),
        },
      },
    });
    const kc = sandbox().kc;
    const nodeOf = async (claimName?: string) => {
      const claims = (await listNodeClaims(kc, pool)).filter((c) => !c.metadata.deletionTimestamp && (!claimName || c.metadata.name !== claimName));
      const name = claims[0]?.status?.nodeName;
      if (!name) return undefined;
      const n = await core().readNode({ name }).catch(() => undefined);
      return n?.metadata?.labels?.['karpenter.sh/registered'] === 'true' ? { claim: claims[0]!.metadata.name, node: n } : undefined;
    };
    const first = await waitFor(() => nodeOf(), `Karpenter to launch and register a node in NodePool ${pool}`, 90_000, 500);
    expect(first.node.metadata?.labels?.['sandbox.kube-node-ready.io/simulated']).toBe('true');
    expect(first.node.spec?.taints?.map((t) => t.key)).toContain(startup.key);
    // The simulated kubelet plays it: Ready. The pod waits for the startup taint to go.
    await waitFor(async () => (await core().readNode({ name: first.node.metadata!.name! })).status?.conditions?.find((c) => c.type === 'Ready')?.status === 'True', 'the Karpenter node to be Ready', 60_000);
    const pending = (await core().listNamespacedPod({ namespace: ns, labelSelector: 'app=app' })).items;
    expect(pending.map((p) => p.spec?.nodeName)).toEqual([undefined]);

    // Whoever verifies the node removes the startup taint: the pod runs there.
    const n = await core().readNode({ name: first.node.metadata!.name! });
    const idx = n.spec!.taints!.findIndex((t) => t.key === startup.key);
    await core().patchNode(
      { name: n.metadata!.name!, body: [{ op: 'test', path: `/spec/taints/${idx}`, value: n.spec!.taints![idx] }, { op: 'remove', path: `/spec/taints/${idx}` }] },
      k8s.setHeaderOptions('Content-Type', k8s.PatchStrategy.JsonPatch),
    );
    await waitFor(async () => {
      const pods = (await core().listNamespacedPod({ namespace: ns, labelSelector: 'app=app' })).items;
      return pods.some((p) => p.spec?.nodeName === n.metadata!.name && p.status?.phase === 'Running');
    }, 'the pod to run on the opened node', 60_000, 500);

    // Deleting the NodeClaim drains and removes the node; the evicted pod brings a replacement.
    await kc.makeApiClient(k8s.CustomObjectsApi).deleteClusterCustomObject({ ...NODECLAIMS, name: first.claim });
    await waitFor(async () => !(await core().readNode({ name: n.metadata!.name! }).catch(() => undefined)), 'Karpenter to delete the node of the deleted NodeClaim', 90_000, 500);
    const second = await waitFor(() => nodeOf(first.claim), 'Karpenter to launch a replacement node', 90_000, 500);
    expect(second.node.metadata?.name).not.toBe(n.metadata?.name);
    expect(second.node.spec?.taints?.map((t) => t.key)).toContain(startup.key);
  }, 300_000);
});
