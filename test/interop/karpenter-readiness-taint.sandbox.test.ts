// kube-node-ready with a readiness.k8s.io/ verification taint that the Karpenter NodePool does not
// list (examples/karpenter-nodepool-readiness-taint.yaml with examples/values-readiness-taint.yaml),
// against real Karpenter v1.15.0 (kwok provider): the example's MutatingAdmissionPolicy puts the taint
// on each Node as it is created, as a kubelet's --register-with-taints would. Karpenter treats the
// key as a known ephemeral taint: it launches no second node for the pending pod while the first
// carries the taint, and keeps the NodeClaim uninitialized until kube-node-ready has verified the
// node and removed the taint; the pod then runs there. The same setup with a key outside
// readiness.k8s.io/ shows what the prefix is for: Karpenter launches another node for the same pod.
import { readFileSync } from 'node:fs';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { parse, parseAllDocuments } from 'yaml';
import { createNodePool, deleteNodePool, k8s, listNodeClaims, statusCode, type NodeClaim } from '@kube-node-ready/sandbox';
import type { ControllerConfigInput } from '../../packages/controller/src/config/schema.js';
import { harness, readNode, type Harness } from '../../packages/controller/test/harness.js';
import { core, describeNodesOnTimeout, pendingWorkloadFor, sandbox, uniqueName, waitFor } from '../sandbox.js';

interface Taint {
  key: string;
  value?: string;
  effect: string;
}
interface KubeObject {
  apiVersion: string;
  kind: string;
  metadata: { name: string };
  spec: Record<string, unknown>;
}
interface NodePoolDoc extends KubeObject {
  spec: { template: { metadata: { labels: Record<string, string> }; spec: { startupTaints?: Taint[]; taints?: Taint[] } } };
}

const EXAMPLE = new URL('../../examples/karpenter-nodepool-readiness-taint.yaml', import.meta.url);
const VALUES = new URL('../../examples/values-readiness-taint.yaml', import.meta.url);
const exampleDocs = parseAllDocuments(readFileSync(EXAMPLE, 'utf8')).map((d) => d.toJS() as KubeObject);
const byKind = <T extends KubeObject>(kind: string): T => {
  const doc = exampleDocs.find((d) => d.kind === kind);
  if (!doc) throw new Error(`${EXAMPLE.pathname} has no ${kind}`);
  return doc as T;
};
const examplePool = byKind<NodePoolDoc>('NodePool');
const examplePolicyText = JSON.stringify(byKind('MutatingAdmissionPolicy'));
const exampleBinding = byKind('MutatingAdmissionPolicyBinding');
/** The taint of the example values, the one the example's policy puts on (checked below). */
const TAINT = (parse(readFileSync(VALUES, 'utf8')) as { config: { nodeManagement: { taints: Taint[] } } }).config.nodeManagement.taints[0]!;
/** The label the example's policy selects the pool's Nodes by (its NodePool template's). */
const POOL_LABEL = Object.keys(examplePool.spec.template.metadata.labels)[0]!;

const POLICIES = { group: 'admissionregistration.k8s.io', version: 'v1', plural: 'mutatingadmissionpolicies' } as const;
const BINDINGS = { group: 'admissionregistration.k8s.io', version: 'v1', plural: 'mutatingadmissionpolicybindings' } as const;
const custom = () => sandbox().kc.makeApiClient(k8s.CustomObjectsApi);

/** How long the taint stays on a registered node before kube-node-ready starts: Karpenter's pod controller re-triggers provisioning for a pending pod every 10 s. */
const HOLD_MS = 30_000;

const hasTaint = (n: k8s.V1Node | undefined, t: Taint) => (n?.spec?.taints ?? []).some((x) => x.key === t.key && x.effect === t.effect);
const initialized = (c: NodeClaim | undefined) => c?.status?.conditions?.find((x) => x.type === 'Initialized');
const liveClaims = async (pool: string) => (await listNodeClaims(sandbox().kc, pool)).filter((c) => !c.metadata.deletionTimestamp);
const claimSpec = (c: NodeClaim) => (c as unknown as { spec?: { taints?: Taint[]; startupTaints?: Taint[] } }).spec ?? {};

/**
 * The example's policy and binding, as written but for their names, the pool label value they select
 * (this test's pool) and, for the wrong-key case, the taint key they put on.
 */
async function applyExamplePolicy(name: string, pool: string, taintKey = TAINT.key): Promise<void> {
  const policy = JSON.parse(examplePolicyText.replaceAll(TAINT.key, taintKey)) as KubeObject & { spec: { matchConstraints: { objectSelector: { matchLabels: Record<string, string> } } } };
  policy.metadata = { name };
  policy.spec.matchConstraints.objectSelector.matchLabels = { [POOL_LABEL]: pool };
  await custom().createClusterCustomObject({ ...POLICIES, body: policy });
  await custom().createClusterCustomObject({ ...BINDINGS, body: { ...exampleBinding, metadata: { name }, spec: { ...exampleBinding.spec, policyName: name } } });
  // Policies take effect once the apiserver has loaded them: a bare Node with the pool's label
  // (no kubelet plays it) is created until one comes back tainted.
  await waitFor(
    async () => {
      const probe = await core().createNode({ body: { metadata: { name: uniqueName('probe'), labels: { [POOL_LABEL]: pool } } } });
      await core().deleteNode({ name: probe.metadata!.name! });
      return hasTaint(probe, { key: taintKey, effect: TAINT.effect });
    },
    `the admission policy ${name} to taint a new Node labelled ${POOL_LABEL}=${pool}`,
    60_000,
    500,
  );
}

async function deletePolicy(name: string): Promise<void> {
  const ignore404 = (err: unknown) => {
    if (statusCode(err) !== 404) throw err;
  };
  await custom().deleteClusterCustomObject({ ...BINDINGS, name }).catch(ignore404);
  await custom().deleteClusterCustomObject({ ...POLICIES, name }).catch(ignore404);
}

async function runningPodOn(namespace: string, app: string, node: string): Promise<boolean> {
  const pods = (await core().listNamespacedPod({ namespace, labelSelector: `app=${app}` })).items;
  return pods.some((p) => p.spec?.nodeName === node && p.status?.phase === 'Running');
}

describe('a readiness.k8s.io/ verification taint that the Karpenter NodePool does not list', () => {
  let h: Harness;
  const pools: string[] = [];
  const policies: string[] = [];

  beforeAll(async () => {
    h = await harness('rdy');
  }, 60_000);

  afterAll(async () => {
    await h?.stopAll();
    for (const pool of pools) await deleteNodePool(sandbox().kc, pool).catch(() => undefined);
    for (const name of policies) await deletePolicy(name).catch(() => undefined);
    await h?.cleanup();
  }, 120_000);

  it('the examples agree: the NodePool lists the taint nowhere, the policy puts on the values file\'s taint', () => {
    const spec = examplePool.spec.template.spec;
    expect(TAINT.key.startsWith('readiness.k8s.io/')).toBe(true);
    expect([...(spec.startupTaints ?? []), ...(spec.taints ?? [])].map((t) => t.key)).not.toContain(TAINT.key);
    expect(examplePolicyText).toContain(`key: '${TAINT.key}', value: '${TAINT.value}', effect: '${TAINT.effect}'`);
  });

  it('Karpenter launches one node, keeps it uninitialized while tainted, and the pod runs there once kube-node-ready removed the taint', async () => {
    const pool = `rdy-${h.id}`;
    const dedicated = { key: 'test.kube-node-ready.io/pool', value: pool, effect: 'NoSchedule' };
    pools.push(pool);
    policies.push(pool);
    await applyExamplePolicy(pool, pool);
    await createNodePool(sandbox().kc, {
      name: pool,
      // The pool's own taint keeps other tests' pending pods off it; the worker tolerates it.
      taints: [dedicated],
      ...(examplePool.spec.template.spec.startupTaints ? { startupTaints: examplePool.spec.template.spec.startupTaints } : {}),
      labels: { [POOL_LABEL]: pool, [h.selector.key]: h.selector.value },
      cpuLimit: '64',
    });
    await pendingWorkloadFor(pool, h.namespace, dedicated, '1', 'app');

    const first = await waitFor(
      async () => {
        const c = (await liveClaims(pool)).find((x) => x.status?.nodeName);
        return c && (await readNode(c.status!.nodeName!))?.metadata?.labels?.['karpenter.sh/registered'] === 'true' ? c : undefined;
      },
      `Karpenter to launch and register a node in ${pool}`,
      120_000,
      250,
    );
    const node = first.status!.nodeName!;
    expect(hasTaint(await readNode(node), TAINT), `${node} carries ${TAINT.key} (the admission policy's)`).toBe(true);
    expect([...(claimSpec(first).taints ?? []), ...(claimSpec(first).startupTaints ?? [])].map((t) => t.key)).not.toContain(TAINT.key);

    // No controller yet: the node stays tainted, registered and Ready, for longer than Karpenter
    // takes to launch another node for a pod that does not fit it (the second test).
    const claimsSeen = new Set<string>();
    const reasonsSeen = new Set<string>();
    const until = Date.now() + HOLD_MS;
    while (Date.now() < until) {
      const claims = await liveClaims(pool);
      for (const c of claims) claimsSeen.add(c.metadata.name);
      const mine = claims.find((c) => c.metadata.name === first.metadata.name);
      const cond = initialized(mine);
      if (cond) reasonsSeen.add(`${cond.status}/${cond.reason ?? ''}`);
      expect(hasTaint(await readNode(node), TAINT)).toBe(true);
      await new Promise((r) => setTimeout(r, 500));
    }
    expect([...claimsSeen], 'Karpenter launched only one node for the pending pod while the first carried the taint').toEqual([first.metadata.name]);
    expect([...reasonsSeen].filter((r) => r.startsWith('True/')), 'the NodeClaim was never Initialized while the node carried the taint').toEqual([]);
    expect([...reasonsSeen]).toContain('Unknown/KnownEphemeralTaintsExist');

    await h.start({
      nodeManagement: { taints: [TAINT] },
      worker: { tolerations: [{ key: dedicated.key, operator: 'Equal', value: pool, effect: 'NoSchedule' }] },
    } as unknown as ControllerConfigInput);
    await h.waitForOpen([node], `${node} verified`, 120_000);
    const opened = await readNode(node);
    expect(hasTaint(opened, TAINT)).toBe(false);
    await waitFor(async () => initialized((await liveClaims(pool)).find((c) => c.metadata.name === first.metadata.name))?.status === 'True', `NodeClaim ${first.metadata.name} Initialized once the taint is gone`, 60_000, 250);
    await waitFor(() => runningPodOn(h.namespace, 'app', node), `the pending pod to run on ${node}`, 60_000, 250);
    expect((await liveClaims(pool)).map((c) => c.metadata.name)).toEqual([first.metadata.name]);
  }, 360_000);

  it('the same setup with a key outside readiness.k8s.io/: Karpenter initializes the tainted node and launches another one for the pod', async () => {
    await h.stopAll();
    const pool = `rdyctl-${h.id}`;
    const dedicated = { key: 'test.kube-node-ready.io/pool', value: pool, effect: 'NoSchedule' };
    const other = { key: h.taint.key, effect: TAINT.effect };
    describeNodesOnTimeout(`karpenter.sh/nodepool=${pool}`);
    pools.push(pool);
    policies.push(pool);
    await applyExamplePolicy(pool, pool, other.key);
    await createNodePool(sandbox().kc, { name: pool, taints: [dedicated], labels: { [POOL_LABEL]: pool }, cpuLimit: '16' });
    await pendingWorkloadFor(pool, h.namespace, dedicated, '1', 'ctl');

    const first = await waitFor(async () => (await liveClaims(pool)).find((x) => x.status?.nodeName), `Karpenter to launch a node in ${pool}`, 120_000, 250);
    const node = first.status!.nodeName!;
    expect(hasTaint(await readNode(node), other)).toBe(true);
    const second = await waitFor(
      async () => (await liveClaims(pool)).find((c) => c.metadata.name !== first.metadata.name),
      `Karpenter to launch another node in ${pool} for the pod that does not tolerate ${other.key}`,
      120_000,
      500,
    );
    expect(second.metadata.name).not.toBe(first.metadata.name);
    const claim = await waitFor(
      async () => (await liveClaims(pool)).find((c) => c.metadata.name === first.metadata.name && initialized(c)?.status === 'True'),
      `NodeClaim ${first.metadata.name} Initialized`,
      60_000,
      250,
    );
    expect(initialized(claim)?.status).toBe('True');
    expect(hasTaint(await readNode(node), other), `${node} still carries ${other.key}: Karpenter initialized it tainted`).toBe(true);
  }, 360_000);
});
