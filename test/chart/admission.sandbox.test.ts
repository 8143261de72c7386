// The chart's ValidatingAdmissionPolicies against the sandbox's real kube-apiserver, with the
// controller ServiceAccount's own token: the writes the product makes (built by its own code) pass;
// a pod that is not our worker, a Node write outside our taints, label and condition, and the
// deletion of a node (or Karpenter NodeClaim) that opened are refused, each with a message naming
// the field; other users are not affected. The controller's RBAC covers its NodeVerification calls,
// and the CRD (installed by the sandbox from the chart's crds/) takes what the product writes and
// refuses what its schema and CEL rules forbid. In DaemonSet mode, an agent's pod-bound token writes
// only its own node's NodeVerification. The policies are rendered by `helm template` with the
// release's values and applied with its ServiceAccounts and RBAC, as `helm install` would.
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { parse as parseYaml } from 'yaml';
import { createNodePool, deleteNodePool, k8s, listNodeClaims } from '@kube-node-ready/sandbox';
import { installationOf, MAX_MESSAGE, NodeVerificationApi, newNodeVerification as buildNodeVerification, statusOf, VERIFIED_CONDITION, type NodeVerification } from '../../packages/controller/src/api/nodeverification.js';
import { parseConfig } from '../../packages/controller/src/config/load.js';
import type { ControllerConfig } from '../../packages/controller/src/config/schema.js';
import { conditionPatch, nodePatch, type JsonPatchOp } from '../../packages/controller/src/controllers/node/verification/node-patch.js';
import { containerCheckSchema } from '../../packages/controller/src/controllers/node/verification/container-checks.js';
import { buildWorkerPod, workerImage } from '../../packages/controller/src/controllers/node/verification/pod-spec.js';
import { Outcome, Phase, type VerificationState } from '../../packages/controller/src/controllers/node/verification/types.js';
import { addNode, core, createNamespace, deleteNode, outcome, pendingWorkloadFor, podBoundTokens, sandbox, serviceAccountKubeConfig, tokenKubeConfig, waitFor } from '../sandbox.js';
import { find, kubectl, template, type KubeObject } from './helm.js';

const KINDS = new Set(['ServiceAccount', 'ClusterRole', 'ClusterRoleBinding', 'Role', 'RoleBinding', 'ValidatingAdmissionPolicy', 'ValidatingAdmissionPolicyBinding']);
const JSON_PATCH = k8s.setHeaderOptions('Content-Type', k8s.PatchStrategy.JsonPatch);
const MERGE_PATCH = k8s.setHeaderOptions('Content-Type', k8s.PatchStrategy.MergePatch);
const STATUS_PATCH = k8s.setHeaderOptions('Content-Type', k8s.PatchStrategy.StrategicMergePatch);
const NV = { group: NodeVerificationApi.group, version: NodeVerificationApi.version, plural: NodeVerificationApi.plural };

let namespace = '';
let workerNamespace = '';
let id = '';
let release = '';
let applied: KubeObject[] = [];
let config: ControllerConfig;
/** The release's chart values. */
let values: { config: Record<string, unknown> & { worker: Record<string, unknown> } } & Record<string, unknown>;
/** The API as the controller's ServiceAccount. */
let asController: k8s.CoreV1Api;
let asControllerCustom: k8s.CustomObjectsApi;
const nodes: string[] = [];
/** NodeVerifications this file created (each also goes with its Node, by garbage collection). */
const verifications = new Set<string>();
let pool = '';

const taint = () => ({ key: `vap-${id}.kube-node-ready.io/unverified`, value: 'true', effect: 'NoSchedule' as const });
const otherTaint = () => ({ key: `vap-${id}.example.com/other`, value: 'true', effect: 'NoSchedule' as const });
const verifiedLabel = () => ({ key: `vap-${id}.kube-node-ready.io/verified`, value: 'true' });
const conditionType = () => `vap-${id}.kube-node-ready.io/NetworkVerified`;

beforeAll(async () => {
  namespace = await createNamespace('vap');
  id = namespace.split('-').pop() as string;
  release = `knr-${id}`;
  // The workers' namespace is a plain one here, without Pod Security labels: every refusal below
  // is the policies' own (the chart's dedicated namespace adds Pod Security "restricted" on top).
  workerNamespace = await createNamespace('vapw');
  values = {
    image: { repository: 'kube-node-ready', tag: 'dev' },
    config: {
      worker: { namespace: workerNamespace, serviceAccountName: `${release}-worker`, configMapName: `${release}-worker`, priorityClassName: '' },
      nodeManagement: { taints: [taint()], verifiedLabel: verifiedLabel(), condition: { type: conditionType() }, deleteFailedNodes: true },
      leaderElection: { leaseName: release },
    },
  };
  const objects = await template(values, { namespace, release });
  applied = objects.filter((o) => KINDS.has(o.kind));
  const result = await kubectl(['apply', '--server-side', '--field-manager=knr-vap-test'], applied.map((o) => `---\n${JSON.stringify(o)}\n`).join(''));
  if (result.code !== 0) throw new Error(`applying the chart's RBAC and policies: ${result.stderr}`);
  const rendered = find(objects, 'ConfigMap', `${release}-kube-node-ready-config`) as KubeObject & { data: Record<string, string> };
  config = parseConfig(parseYaml(rendered.data['config.yaml'] ?? '')) as ControllerConfig;
  const kc = await serviceAccountKubeConfig(namespace, `${release}-kube-node-ready-controller`);
  asController = kc.makeApiClient(k8s.CoreV1Api);
  asControllerCustom = kc.makeApiClient(k8s.CustomObjectsApi);
}, 120_000);

afterAll(async () => {
  const custom = sandbox().kc.makeApiClient(k8s.CustomObjectsApi);
  await Promise.all([...verifications].map((name) => custom.deleteClusterCustomObject({ ...NV, name }).catch(() => undefined)));
  await Promise.all(nodes.map((n) => deleteNode(n)));
  if (pool) await deleteNodePool(sandbox().kc, pool);
  // Cluster-scoped objects of this release (the namespaced ones go with the namespaces).
  const clusterScoped = applied.filter((o) => !o.metadata.namespace && o.kind !== 'ServiceAccount');
  if (clusterScoped.length) await kubectl(['delete', '--ignore-not-found', '--wait=false'], clusterScoped.map((o) => `---\n${JSON.stringify(o)}\n`).join(''));
});

async function newNode(opts: { taints?: k8s.V1Taint[]; labels?: Record<string, string>; annotations?: Record<string, string> } = {}): Promise<k8s.V1Node> {
  const name = await addNode({ prefix: `vap-${id}`, taints: opts.taints ?? [taint(), otherTaint()], labels: { [`vap-${id}.example.com/other`]: 'x', ...opts.labels } });
  nodes.push(name);
  if (opts.annotations) await core().patchNode({ name, body: { metadata: { annotations: opts.annotations } } }, MERGE_PATCH);
  return core().readNode({ name });
}

const patchAsController = (name: string, ops: JsonPatchOp[]) => asController.patchNode({ name, body: ops, dryRun: 'All' }, JSON_PATCH);
const statusAsController = (name: string, body: object) => asController.patchNodeStatus({ name, body, dryRun: 'All' }, STATUS_PATCH);

describe('the policies are in force', () => {
  it('a refused request names its policy; it may take the API server a moment to load them', async () => {
    const node = await newNode();
    const message = await waitFor(
      async () => {
        const m = await outcome(patchAsController(node.metadata!.name!, [{ op: 'add', path: '/spec/unschedulable', value: true }]));
        return m.includes('ValidatingAdmissionPolicy') ? m : undefined;
      },
      'the node-writes policy to refuse a cordon by the controller',
      30_000,
      250,
    );
    expect(message).toContain(`${release}-kube-node-ready-controller-node-writes`);
    expect(message).toContain('spec.unschedulable');
  });
});

describe('pods the controller creates', () => {
  let node: k8s.V1Node;
  let worker: k8s.V1Pod;
  beforeAll(async () => {
    node = await newNode();
    worker = buildWorkerPod({ node, attempt: 1, podName: `knr-worker-vap-${id}`, config, image: workerImage(config.worker.image, 'dev'), configHash: 'test' });
  });
  const create = (mutate: (p: k8s.V1Pod) => void = () => {}) => {
    const pod = structuredClone(worker);
    mutate(pod);
    return outcome(asController.createNamespacedPod({ namespace: workerNamespace, body: pod, dryRun: 'All' }));
  };

  it('the worker pod the controller builds is admitted', async () => {
    expect(worker.spec?.containers[0]?.image).toBe('kube-node-ready:dev');
    expect(await create()).toBe('allowed');
  });

  it.each([
    ['another ServiceAccount', 'spec.serviceAccountName', (p: k8s.V1Pod) => void (p.spec!.serviceAccountName = 'default')],
    ['another image', 'spec.containers', (p: k8s.V1Pod) => void (p.spec!.containers[0]!.image = 'kube-node-ready:other')],
    ['its own command', 'spec.containers', (p: k8s.V1Pod) => void (p.spec!.containers[0]!.command = ['/nodejs/bin/node', '-e', '1'])],
    ['a second container', 'spec.containers', (p: k8s.V1Pod) => void p.spec!.containers.push({ ...p.spec!.containers[0]!, name: 'second' })],
    ['host networking', 'spec.hostNetwork', (p: k8s.V1Pod) => void (p.spec!.hostNetwork = true)],
    ['the host PID namespace', 'spec.hostPID', (p: k8s.V1Pod) => void (p.spec!.hostPID = true)],
    ['a hostPath volume', 'spec.volumes', (p: k8s.V1Pod) => void p.spec!.volumes!.push({ name: 'host', hostPath: { path: '/' } })],
    ['a Secret volume', 'spec.volumes', (p: k8s.V1Pod) => void p.spec!.volumes!.push({ name: 'secret', secret: { secretName: 'any' } })],
    // (privileged: true itself is refused before admission here: the sandbox's kube-apiserver runs without --allow-privileged)
    ['privilege escalation', 'securityContext', (p: k8s.V1Pod) => void (p.spec!.containers[0]!.securityContext!.allowPrivilegeEscalation = true)],
    ['an added capability', 'securityContext', (p: k8s.V1Pod) => void (p.spec!.containers[0]!.securityContext!.capabilities = { add: ['NET_ADMIN'] })],
    ['a Secret in its environment', 'env', (p: k8s.V1Pod) => void p.spec!.containers[0]!.env!.push({ name: 'S', valueFrom: { secretKeyRef: { name: 'any', key: 'k' } } })],
    ['no owner Node', 'metadata.ownerReferences', (p: k8s.V1Pod) => void (p.metadata!.ownerReferences = [])],
    ['not labelled as our worker', 'metadata.labels', (p: k8s.V1Pod) => void (p.metadata!.labels = { app: 'other' })],
  ])('refused: %s (%s)', async (_what, field, mutate) => {
    const message = await create(mutate);
    expect(message).toContain('denied request');
    expect(message).toContain(field);
  });

  it('deletes only worker pods; other users are not affected', async () => {
    const other: k8s.V1Pod = { metadata: { name: `other-${id}`, labels: { app: 'other' } }, spec: { containers: [{ name: 'main', image: 'sandbox-shell', command: ['/bin/sh', '-c', 'exec sleep 3600'] }], nodeSelector: { 'no-such-node': 'x' } } };
    // The admin may create a pod the controller may not (hostPath, another image): the policies match the controller only.
    expect(await outcome(core().createNamespacedPod({ namespace: workerNamespace, body: { ...other, spec: { ...other.spec!, volumes: [{ name: 'h', hostPath: { path: '/' } }] } }, dryRun: 'All' }))).toBe('allowed');
    await core().createNamespacedPod({ namespace: workerNamespace, body: other });
    await core().createNamespacedPod({ namespace: workerNamespace, body: worker });
    const deleteAsController = (name: string) => outcome(asController.deleteNamespacedPod({ name, namespace: workerNamespace, dryRun: 'All' }));
    expect(await deleteAsController(worker.metadata!.name!)).toBe('allowed');
    expect(await deleteAsController(other.metadata!.name!)).toContain('metadata.labels');
  });
});

describe('container checks beside the worker', () => {
  const GPU_IMAGE = 'registry.example.com/cuda:12.4.1';
  const DISK_IMAGE = 'registry.example.com/busybox:1.36';
  let node: k8s.V1Node;
  const podWith = (checks: Array<{ name: string; image: string }>, name: string) =>
    buildWorkerPod({ node, attempt: 1, podName: name, config, image: workerImage(config.worker.image, 'dev'), configHash: 'test', containerChecks: checks.map((c) => containerCheckSchema.parse(c)) });
  const create = (pod: k8s.V1Pod) => outcome(asController.createNamespacedPod({ namespace: workerNamespace, body: pod, dryRun: 'All' }));

  beforeAll(async () => {
    node = await newNode();
    // The release again, with a container check at the top level and one in a profile: only its
    // pods policy changes (it admits more than before, so the other tests' refusals hold). The
    // values schema is generated from config/schema.ts, which wires worker.containerChecks in
    // separately: not validated here.
    const withChecks = {
      ...values,
      config: {
        ...values.config,
        worker: { ...values.config.worker, containerChecks: [{ name: 'gpu', image: GPU_IMAGE }] },
        profiles: [{ name: 'storage', nodeSelector: { matchLabels: { pool: 'storage' } }, worker: { containerChecks: [{ name: 'disk', image: DISK_IMAGE }] } }],
      },
    };
    const objects = await template(withChecks, { namespace, release });
    const policy = find(objects, 'ValidatingAdmissionPolicy', `${release}-kube-node-ready-controller-pods`);
    const result = await kubectl(['apply', '--server-side', '--field-manager=knr-vap-test'], `---\n${JSON.stringify(policy)}\n`);
    if (result.code !== 0) throw new Error(`applying the pods policy with container checks: ${result.stderr}`);
    // The API server loads the changed policy a moment later.
    await waitFor(async () => ((await create(podWith([{ name: 'gpu', image: GPU_IMAGE }], `knr-cc-wait-${id}`))) === 'allowed' ? true : undefined), 'the pods policy to admit the listed container check image', 30_000, 250);
  }, 120_000);

  it('a worker pod with the container checks of the configuration (top level and a profile\'s) is admitted', async () => {
    const pod = podWith([{ name: 'gpu', image: GPU_IMAGE }, { name: 'disk', image: DISK_IMAGE }], `knr-cc-ok-${id}`);
    expect(pod.spec!.containers.map((c) => c.image)).toEqual(['kube-node-ready:dev', GPU_IMAGE, DISK_IMAGE]);
    expect(await create(pod)).toBe('allowed');
  });

  it.each([
    ['an image no container check lists', (p: k8s.V1Pod) => void (p.spec!.containers[1]!.image = 'registry.example.com/other:1')],
    ['the worker image as a check', (p: k8s.V1Pod) => void (p.spec!.containers[1]!.image = 'kube-node-ready:dev')],
    ['a listed image first, the worker second', (p: k8s.V1Pod) => void p.spec!.containers.reverse()],
  ])('refused: %s (spec.containers)', async (_what, mutate) => {
    const pod = podWith([{ name: 'gpu', image: GPU_IMAGE }], `knr-cc-no-${id}`);
    mutate(pod);
    const message = await create(pod);
    expect(message).toContain('denied request');
    expect(message).toContain('spec.containers');
  });
});

describe('Node writes of the controller', () => {
  it('the patches the controller makes to open a node (taint, label, condition) are admitted', async () => {
    const node = await newNode();
    const name = node.metadata!.name!;
    const state = { uid: node.metadata!.uid!, attempt: 1, failures: 0, phase: Phase.Passed, lastOutcome: 'Passed' as const, verifiedAt: Date.now() };
    expect(await outcome(patchAsController(name, nodePatch({ node, config, state, open: true })))).toBe('allowed');
    const condition = conditionPatch(node, { type: conditionType(), status: 'True', reason: 'Passed', message: 'every check passed' }, Date.now());
    expect(await outcome(statusAsController(name, condition!))).toBe('allowed');
    // A failed verification: the failed taint.
    const failed = { uid: node.metadata!.uid!, attempt: 3, failures: 3, phase: Phase.Failed, lastOutcome: 'ChecksFailed' as const, lastMessage: 'dns: timeout' };
    expect(await outcome(patchAsController(name, nodePatch({ node, config, state: failed, open: false })))).toBe('allowed');
  });

  it.each([
    ['add another taint', 'spec.taints', (): JsonPatchOp[] => [{ op: 'add', path: '/spec/taints/-', value: { key: 'evil.example.com/x', value: 'y', effect: 'NoSchedule' } }]],
    ['remove another taint', 'spec.taints', (n: k8s.V1Node): JsonPatchOp[] => [{ op: 'remove', path: `/spec/taints/${n.spec!.taints!.findIndex((t) => t.key === otherTaint().key)}` }]],
    ['cordon', 'spec.unschedulable', (): JsonPatchOp[] => [{ op: 'add', path: '/spec/unschedulable', value: true }]],
    ['change another label', 'metadata.labels', (): JsonPatchOp[] => [{ op: 'add', path: `/metadata/labels/vap-${id}.example.com~1other`, value: 'changed' }]],
    ['add another label', 'metadata.labels', (): JsonPatchOp[] => [{ op: 'add', path: '/metadata/labels/node-role.kubernetes.io~1ingress', value: '' }]],
    ['opt the node back into remediation', 'metadata.annotations', (): JsonPatchOp[] => [{ op: 'add', path: '/metadata/annotations/kube-node-ready.io~1remediation', value: 'enabled' }]],
    ['add a finalizer', 'metadata.finalizers', (): JsonPatchOp[] => [{ op: 'add', path: '/metadata/finalizers', value: ['evil.example.com/hold'] }]],
  ])('refused: %s (%s)', async (_what, field, ops) => {
    const node = await newNode({ annotations: { 'kube-node-ready.io/remediation': 'disabled' } });
    const message = await outcome(patchAsController(node.metadata!.name!, ops(node)));
    expect(message).toContain('denied request');
    expect(message).toContain(field);
  });

  it('refused: adding a verification taint to a node (so it cannot be made deletable), removing the verified label', async () => {
    const open = await newNode({ taints: [otherTaint()], labels: { [verifiedLabel().key]: 'true' } });
    const name = open.metadata!.name!;
    expect(await outcome(patchAsController(name, [{ op: 'add', path: '/spec/taints/-', value: taint() }]))).toContain('never add one');
    expect(await outcome(patchAsController(name, [{ op: 'remove', path: `/metadata/labels/${verifiedLabel().key.replace('/', '~1')}` }]))).toContain('never removes the verified label');
  });

  it('refused on the status: another condition, the capacity', async () => {
    const node = await newNode();
    const name = node.metadata!.name!;
    const ready = { type: 'Ready', status: 'False', reason: 'Evil', message: 'set by the controller', lastHeartbeatTime: new Date().toISOString(), lastTransitionTime: new Date().toISOString() };
    expect(await outcome(statusAsController(name, { status: { conditions: [ready] } }))).toContain('status.conditions');
    expect(await outcome(statusAsController(name, { status: { capacity: { pods: '0' }, allocatable: { pods: '0' } } }))).toContain('status: ');
  });

  it('other users are not affected: the admin adds a taint and cordons', async () => {
    const node = await newNode();
    const ops: JsonPatchOp[] = [
      { op: 'add', path: '/spec/taints/-', value: { key: 'admin.example.com/x', value: 'y', effect: 'NoSchedule' } },
      { op: 'add', path: '/spec/unschedulable', value: true },
    ];
    expect(await outcome(core().patchNode({ name: node.metadata!.name!, body: ops, dryRun: 'All' }, JSON_PATCH))).toBe('allowed');
  });
});

/** A verification state with every field NodeVerification status carries, for `node`. */
function fullState(node: k8s.V1Node, phase: Phase = Phase.Backoff): VerificationState {
  const now = Date.now();
  return {
    uid: node.metadata!.uid!,
    attempt: 3,
    failures: 2,
    phase,
    nextAttemptAt: now + 30_000,
    lastOutcome: Outcome.ChecksFailed,
    lastMessage: 'checks failed: dns (10.96.0.10:53: timeout)',
    lastAttempt: 3,
    lastChecks: [
      { name: 'dns', ok: false, durationMs: 5000.4, error: `timeout <&> ${'x'.repeat(2 * MAX_MESSAGE)}`, target: '10.96.0.10:53' },
      { name: 'api', ok: true, durationMs: 12.6 },
    ],
    lastFinishedAt: now,
    pod: `${workerNamespace}/knr-worker-${node.metadata!.name!}-3`,
    launchableAt: now - 240_000,
    firstLaunchAt: now - 200_000,
    verifiedAt: now - 100_000,
    failedAt: now - 50_000,
    failing: { since: now - 200_000, at: now, checks: { dns: '10.96.0.10:53' } },
  };
}

/** `node`'s NodeVerification as the product builds it (labelled with this release's installation). */
const newNodeVerification = (node: k8s.V1Node) => buildNodeVerification(node, installationOf(config.nodeManagement.condition.type));

const failedCondition = { type: VERIFIED_CONDITION, status: 'False' as const, reason: 'ChecksFailed', message: `attempt 3 of 6 failed: ${'y'.repeat(2 * MAX_MESSAGE)}` };

/** Creates `node`'s NodeVerification as the admin (the product's own object). */
async function adminNodeVerification(node: k8s.V1Node): Promise<NodeVerification> {
  verifications.add(node.metadata!.name!);
  return (await sandbox().kc.makeApiClient(k8s.CustomObjectsApi).createClusterCustomObject({ ...NV, body: newNodeVerification(node) })) as NodeVerification;
}

describe('NodeVerifications of the controller: its RBAC, the CRD\'s validation', () => {
  it('creates, gets, lists, replaces (its status with it: no status subresource) and deletes (with a UID precondition) the NodeVerification the product builds', async () => {
    const node = await newNode();
    const name = node.metadata!.name!;
    verifications.add(name);
    const created = (await asControllerCustom.createClusterCustomObject({ ...NV, body: newNodeVerification(node) })) as NodeVerification;
    expect(created.spec).toEqual({ nodeName: name, nodeUID: node.metadata!.uid });
    expect(created.metadata?.ownerReferences).toEqual([{ apiVersion: 'v1', kind: 'Node', name, uid: node.metadata!.uid }]);
    const read = (await asControllerCustom.getClusterCustomObject({ ...NV, name })) as NodeVerification;
    const list = (await asControllerCustom.listClusterCustomObject({ ...NV, fieldSelector: `metadata.name=${name}` })) as { items: NodeVerification[] };
    expect(list.items.map((i) => i.metadata?.name)).toEqual([name]);
    // Every field, messages at the limit, errors with characters JSON escapes: the API server keeps it as written.
    const status = statusOf(fullState(node), node, failedCondition, read, Date.now());
    const updated = (await asControllerCustom.replaceClusterCustomObject({ ...NV, name, body: { ...read, status } })) as NodeVerification;
    expect(updated.status).toEqual(status);
    // Guarded by resourceVersion: a write from a stale copy is refused.
    expect(await outcome(asControllerCustom.replaceClusterCustomObject({ ...NV, name, body: { ...read, status: { ...status, attempt: 4 } } }))).toContain('the object has been modified');
    expect(await outcome(asControllerCustom.deleteClusterCustomObject({ ...NV, name, body: { preconditions: { uid: 'another-uid' } } }))).toContain('the UID in the precondition (another-uid) does not match');
    expect(await outcome(asControllerCustom.deleteClusterCustomObject({ ...NV, name, body: { preconditions: { uid: created.metadata!.uid! } } }))).toBe('allowed');
  });

  it('the CRD refuses a NodeVerification not named after its node, and a change of its spec', async () => {
    const admin = sandbox().kc.makeApiClient(k8s.CustomObjectsApi);
    const node = await newNode();
    const misnamed = newNodeVerification(node);
    misnamed.metadata!.name = `${node.metadata!.name!}-other`;
    expect(await outcome(admin.createClusterCustomObject({ ...NV, body: misnamed, dryRun: 'All' }))).toContain('metadata.name must equal spec.nodeName');
    const nv = await adminNodeVerification(node);
    expect(await outcome(admin.replaceClusterCustomObject({ ...NV, name: node.metadata!.name!, body: { ...nv, spec: { ...nv.spec!, nodeUID: 'another-uid' } }, dryRun: 'All' }))).toContain('spec is immutable');
  });

  it.each([
    ['an unknown phase', (s: Record<string, unknown>) => ({ ...s, phase: 'Running' }), 'Unsupported value'],
    ['phase Backoff without nextAttemptAt', (s: Record<string, unknown>) => ({ ...s, phase: 'Backoff', nextAttemptAt: undefined }), 'nextAttemptAt is required in phase Backoff'],
    ['a negative attempt', (s: Record<string, unknown>) => ({ ...s, attempt: -1 }), 'status.attempt'],
    ['a time that is not RFC 3339', (s: Record<string, unknown>) => ({ ...s, verifiedAt: 'yesterday' }), 'status.verifiedAt'],
    ['a message over the limit', (s: Record<string, unknown>) => ({ ...s, lastAttempt: { ...(s.lastAttempt as object), message: 'm'.repeat(MAX_MESSAGE + 1) } }), 'status.lastAttempt.message'],
    ['two conditions of one type', (s: Record<string, unknown>) => ({ ...s, conditions: [...(s.conditions as object[]), ...(s.conditions as object[])] }), 'status.conditions'],
  ])('the CRD refuses a status with %s', async (_what, mutate, text) => {
    const node = await newNode();
    const nv = await adminNodeVerification(node);
    const status = JSON.parse(JSON.stringify(mutate(statusOf(fullState(node), node, failedCondition, nv, Date.now()) as Record<string, unknown>))) as object;
    const message = await outcome(asControllerCustom.replaceClusterCustomObject({ ...NV, name: node.metadata!.name!, body: { ...nv, status }, dryRun: 'All' }));
    expect(message).toContain('is invalid');
    expect(message).toContain(text);
  });
});

describe('DaemonSet mode: an agent writes only its own node\'s NodeVerification', () => {
  const dsRelease = () => `${release}-ds`;
  let mine: k8s.V1Node;
  let other: k8s.V1Node;
  /** The API as an agent pod on `mine`, with its pod-bound token (which names its node). */
  let asAgent: k8s.CustomObjectsApi;
  /** The same ServiceAccount with a token bound to no pod (no node in it). */
  let unbound: k8s.CustomObjectsApi;

  const customWithToken = (token: string): k8s.CustomObjectsApi => tokenKubeConfig(token, 'agent').makeApiClient(k8s.CustomObjectsApi);

  beforeAll(async () => {
    // The DaemonSet-mode release's agent ServiceAccount, ClusterRole(Binding) and policies (its
    // worker Roles are not needed here).
    const objects = await template({ deploymentMode: 'daemonset', image: { repository: 'kube-node-ready', tag: 'dev' }, config: { nodeManagement: { taints: [taint()], verifiedLabel: verifiedLabel(), condition: { type: conditionType() } } } }, { namespace, release: dsRelease() });
    const agentObjects = objects.filter((o) => KINDS.has(o.kind) && o.kind !== 'Role' && o.kind !== 'RoleBinding');
    applied.push(...agentObjects);
    const result = await kubectl(['apply', '--server-side', '--field-manager=knr-vap-test'], agentObjects.map((o) => `---\n${JSON.stringify(o)}\n`).join(''));
    if (result.code !== 0) throw new Error(`applying the DaemonSet mode's RBAC and policies: ${result.stderr}`);
    mine = await newNode();
    other = await newNode();
    // A pod of the agent's ServiceAccount on `mine` (it need not run), and a token bound to it, as
    // its kubelet would get one: the API server puts the pod's node in it.
    const sa = `${dsRelease()}-kube-node-ready-agent`;
    const pod = await core().createNamespacedPod({
      namespace,
      body: {
        metadata: { name: `agent-${id}` },
        spec: { serviceAccountName: sa, automountServiceAccountToken: false, nodeName: mine.metadata!.name!, containers: [{ name: 'main', image: 'sandbox-shell', command: ['/bin/sh', '-c', 'exec sleep 3600'] }] },
      },
    });
    const tokens = await podBoundTokens(namespace, sa, pod);
    asAgent = customWithToken(tokens.bound);
    unbound = customWithToken(tokens.unbound);
    // The policy is loaded by the API server a moment after its binding is created.
    await waitFor(
      async () => (await outcome(asAgent.createClusterCustomObject({ ...NV, body: newNodeVerification(other), dryRun: 'All' }))).includes('ValidatingAdmissionPolicy') || undefined,
      'the agent NodeVerification policy to refuse a write to another node\'s',
      30_000,
      250,
    );
  }, 180_000);

  it('its own node\'s: created, replaced with its status, deleted (with a UID precondition)', async () => {
    const name = mine.metadata!.name!;
    verifications.add(name);
    const created = (await asAgent.createClusterCustomObject({ ...NV, body: newNodeVerification(mine) })) as NodeVerification;
    const read = (await asAgent.getClusterCustomObject({ ...NV, name })) as NodeVerification;
    expect(read.metadata?.uid).toBe(created.metadata?.uid);
    const status = statusOf(fullState(mine, Phase.Verifying), mine, { type: VERIFIED_CONDITION, status: 'Unknown', reason: 'Verifying', message: 'attempt 3 of 6 running' }, read, Date.now());
    expect(await outcome(asAgent.replaceClusterCustomObject({ ...NV, name, body: { ...read, status } }))).toBe('allowed');
    expect(await outcome(asAgent.deleteClusterCustomObject({ ...NV, name, body: { preconditions: { uid: created.metadata!.uid! } } }))).toBe('allowed');
  });

  it('another node\'s is refused: create, update and delete', async () => {
    const name = other.metadata!.name!;
    const refused = (message: string) => {
      expect(message).toContain(`${dsRelease()}-kube-node-ready-agent-nodeverification-writes`);
      expect(message).toContain('only the NodeVerification of the node its own pod runs on');
    };
    refused(await outcome(asAgent.createClusterCustomObject({ ...NV, body: newNodeVerification(other), dryRun: 'All' })));
    const nv = await adminNodeVerification(other);
    const status = statusOf(fullState(other, Phase.Verifying), other, { type: VERIFIED_CONDITION, status: 'Unknown', reason: 'Verifying', message: 'x' }, nv, Date.now());
    refused(await outcome(asAgent.replaceClusterCustomObject({ ...NV, name, body: { ...nv, status }, dryRun: 'All' })));
    refused(await outcome(asAgent.deleteClusterCustomObject({ ...NV, name, dryRun: 'All' })));
    // The admin (and the controller) are not affected.
    expect(await outcome(sandbox().kc.makeApiClient(k8s.CustomObjectsApi).deleteClusterCustomObject({ ...NV, name, dryRun: 'All' }))).toBe('allowed');
  });

  it('a token not bound to a pod names no node, and is refused even for that node\'s', async () => {
    expect(await outcome(unbound.createClusterCustomObject({ ...NV, body: newNodeVerification(mine), dryRun: 'All' }))).toContain('only the NodeVerification of the node its own pod runs on');
  });
});

describe('Node deletion by the controller', () => {
  const remove = (name: string) => outcome(asController.deleteNode({ name, dryRun: 'All' }));

  it('allowed: a node that still carries the verification taint and has no verified label', async () => {
    const node = await newNode();
    expect(await remove(node.metadata!.name!)).toBe('allowed');
  });

  type NodeOpts = Parameters<typeof newNode>[0];
  it.each([
    ['a node without the verification taint (it opened)', 'still carries a verification taint', (): NodeOpts => ({ taints: [otherTaint()] })],
    ['a node with the verified label', 'verified label', (): NodeOpts => ({ labels: { [verifiedLabel().key]: 'true' } })],
    ['a control-plane node', 'control-plane', (): NodeOpts => ({ labels: { 'node-role.kubernetes.io/control-plane': '' } })],
    ['an opted-out node', 'opted out', (): NodeOpts => ({ annotations: { 'kube-node-ready.io/remediation': 'disabled' } })],
  ])('refused: %s', async (_what, text, opts) => {
    const node = await newNode(opts());
    const message = await remove(node.metadata!.name!);
    expect(message).toContain('denied request');
    expect(message).toContain(text);
  });
});

describe('Karpenter NodeClaim deletion by the controller', () => {
  it('allowed while the node has not initialized (our startup taint on it); refused once Karpenter marks it Initialized', async () => {
    pool = `vap-${id}`;
    const dedicated = { key: 'test.kube-node-ready.io/pool', value: pool, effect: 'NoSchedule' as const };
    await createNodePool(sandbox().kc, { name: pool, taints: [dedicated], startupTaints: [taint()], labels: { [`vap-${id}.example.com/pool`]: 'true' } });
    // A workload for the pool: Karpenter launches a node for it.
    await pendingWorkloadFor(pool, namespace, dedicated);
    const claim = await waitFor(
      async () => (await listNodeClaims(sandbox().kc, pool)).find((c) => c.status?.nodeName),
      `a NodeClaim of NodePool ${pool} with its node (claims: ${JSON.stringify(await listNodeClaims(sandbox().kc, pool).catch(() => []))})`,
      120_000,
      500,
    );
    const nodeName = claim.status!.nodeName!;
    nodes.push(nodeName);
    const removeClaim = () => outcome(asControllerCustom.deleteClusterCustomObject({ group: 'karpenter.sh', version: 'v1', plural: 'nodeclaims', name: claim.metadata.name, dryRun: 'All' }));
    // Karpenter's registration puts our startup taint on the node: not initialized.
    await waitFor(async () => (await core().readNode({ name: nodeName })).spec?.taints?.some((t) => t.key === taint().key), `the startup taint on ${nodeName}`, 60_000, 250);
    expect(await removeClaim()).toBe('allowed');

    // The node opens (as the controller would): Karpenter then initializes it.
    const node = await core().readNode({ name: nodeName });
    const index = node.spec!.taints!.findIndex((t) => t.key === taint().key);
    await core().patchNode({ name: nodeName, body: [{ op: 'remove', path: `/spec/taints/${index}` }] }, JSON_PATCH);
    await waitFor(
      async () => (await listNodeClaims(sandbox().kc, pool)).find((c) => c.metadata.name === claim.metadata.name)?.status?.conditions?.some((c) => c.type === 'Initialized' && c.status === 'True'),
      `NodeClaim ${claim.metadata.name} Initialized`,
      120_000,
      500,
    );
    const message = await removeClaim();
    expect(message).toContain('denied request');
    expect(message).toContain('never initialized');
    await sandbox().kc.makeApiClient(k8s.AppsV1Api).deleteNamespacedDeployment({ name: 'app', namespace });
  });
});

describe('the chart\'s own worker namespace', () => {
  it('enforces Pod Security "restricted": a hostPath pod is refused there for anyone', async () => {
    const objects = await template({}, { namespace, release: `${release}-ns` });
    const ns = find(objects, 'Namespace', `${release}-ns-kube-node-ready-worker`) as KubeObject;
    const created = await kubectl(['apply', '--server-side', '--field-manager=knr-vap-test'], `---\n${JSON.stringify(ns)}\n`);
    expect(created.code, created.stderr).toBe(0);
    try {
      const pod: k8s.V1Pod = { metadata: { name: 'host' }, spec: { containers: [{ name: 'main', image: 'sandbox-shell' }], volumes: [{ name: 'h', hostPath: { path: '/' } }] } };
      const message = await outcome(core().createNamespacedPod({ namespace: ns.metadata.name, body: pod, dryRun: 'All' }));
      expect(message).toContain('violates PodSecurity "restricted');
    } finally {
      await core().deleteNamespace({ name: ns.metadata.name }).catch(() => undefined);
    }
  });
});
