// DaemonSet mode against the sandbox: `helm install --set deploymentMode=daemonset`, the
// DaemonSet controller of the real kube-controller-manager places a pod on each unverified node,
// the pod (`kube-node-ready agent`) verifies its own node and opens it, and the DaemonSet controller
// removes it. A node with broken DNS keeps its taint, with the condition and Events naming dns; a
// pod deleted mid-verification is replaced and its successor continues the count (kept in the
// node's NodeVerification); the admission policy lets an agent's token write only its own node, and
// only our fields there (its NodeVerification writes: admission.sandbox.test.ts). The reference
// README's DaemonSet troubleshooting commands are run as written (with this release's names).
import { mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { k8s } from '@kube-node-ready/sandbox';
import { addNode, core, createNamespace, deleteNode, outcome, podBoundTokens, sandbox, tokenKubeConfig, waitFor } from '../sandbox.js';
import { CHART_DIR, helm, kubectl } from './helm.js';

const JSON_PATCH = k8s.setHeaderOptions('Content-Type', k8s.PatchStrategy.JsonPatch);

let namespace = '';
let release = '';
let id = '';
let dir = '';
let placement: Record<string, string> = {};
const nodes: string[] = [];

const taint = () => ({ key: `ds-${id}.kube-node-ready.io/unverified`, value: 'true', effect: 'NoSchedule' as const });
const verifiedLabel = () => ({ key: `ds-${id}.kube-node-ready.io/verified`, value: 'true' });
const conditionType = () => `ds-${id}.kube-node-ready.io/NetworkVerified`;
const profileLabel = () => `ds-${id}.kube-node-ready.io/profile`;
const MAX_RETRIES = 2;

const helmKube = (args: string[]) => helm([...args, '--kubeconfig', sandbox().state.kubeconfig]);

beforeAll(async () => {
  namespace = await createNamespace('ds');
  id = namespace.split('-').pop() as string;
  release = `knr-${id}`;
  placement = { [`ds-${id}.kube-node-ready.io/pool`]: 'true' };
  const values = {
    deploymentMode: 'daemonset',
    image: { repository: 'kube-node-ready', tag: 'dev' },
    // Only this file's nodes: the sandbox is shared with other tests.
    daemonset: { nodeSelector: placement },
    config: {
      worker: { timeout: '20s' },
      reconciliation: { initialBackoff: '1s', maxBackoff: '2s', maxRetries: MAX_RETRIES },
      nodeManagement: { taints: [taint()], verifiedLabel: verifiedLabel(), condition: { type: conditionType() } },
      profiles: [{ name: 'dns-only', nodeSelector: { matchLabels: { [profileLabel()]: 'dns-only' } }, worker: { checks: { enabled: ['dns'] } } }],
    },
  };
  dir = mkdtempSync(join(tmpdir(), 'knr-ds-'));
  writeFileSync(join(dir, 'values.json'), JSON.stringify(values));
  const install = await helmKube(['install', release, CHART_DIR, '--namespace', namespace, '--values', join(dir, 'values.json')]);
  if (install.code !== 0) throw new Error(`helm install --set deploymentMode=daemonset: ${install.stderr}`);
}, 120_000);

afterAll(async () => {
  await helmKube(['uninstall', release, '--namespace', namespace]);
  await Promise.all(nodes.map((n) => deleteNode(n)));
  await core().deleteNamespace({ name: namespace }).catch(() => undefined);
  if (dir) rmSync(dir, { recursive: true, force: true });
});

async function newNode(faults?: { dns?: string }, labels: Record<string, string> = {}): Promise<string> {
  const name = await addNode({ prefix: `ds-${id}`, taints: [taint()], labels: { ...placement, ...labels }, ...(faults ? { faults } : {}) });
  nodes.push(name);
  return name;
}

/** The release's pods on `node` (the DaemonSet's), with their phase: what a timed-out wait prints. */
async function podsOn(node: string): Promise<k8s.V1Pod[]> {
  const list = await core().listNamespacedPod({ namespace, fieldSelector: `spec.nodeName=${node}` });
  return list.items.filter((p) => !p.metadata?.deletionTimestamp);
}

const describePods = async (node: string) => (await podsOn(node)).map((p) => `${p.metadata?.name} ${p.status?.phase} restarts=${p.status?.containerStatuses?.[0]?.restartCount ?? 0}`).join(', ') || '(no pod)';

async function nodeEvents(node: string): Promise<k8s.CoreV1Event[]> {
  const list = await core().listNamespacedEvent({ namespace: 'default', fieldSelector: `involvedObject.kind=Node,involvedObject.name=${node}` });
  return list.items;
}

/** Waits for `fn`; on timeout the error adds the release's pods on `node` as they are then. */
async function waitWithPods<T>(node: string, fn: () => Promise<T | undefined | false>, what: string, timeoutMs: number): Promise<T> {
  return waitFor(fn, what, timeoutMs, 500).catch(async (err: Error) => {
    throw new Error(`${err.message}\npods on ${node}: ${await describePods(node)}`, { cause: err });
  });
}

const condition = (n: k8s.V1Node) => n.status?.conditions?.find((c) => c.type === conditionType());

/** The progress in the node's NodeVerification (status), or undefined while it has none. */
interface Progress {
  phase?: string;
  profile?: string;
  attempt?: number;
  failures?: number;
  lastAttempt?: { reason?: string; message?: string; checks?: Array<{ name: string }> };
}
const NV = { group: 'kube-node-ready.io', version: 'v1alpha1', plural: 'nodeverifications' };
async function progressOf(node: string): Promise<Progress | undefined> {
  const nv = (await sandbox()
    .kc.makeApiClient(k8s.CustomObjectsApi)
    .getClusterCustomObject({ ...NV, name: node })
    .catch(() => undefined)) as { status?: Progress } | undefined;
  return nv?.status;
}

/** Waits for `fn` on the node as read now; on timeout the error says what the node, its progress and its pods looked like. */
async function waitOnNode<T>(node: string, fn: (n: k8s.V1Node) => T | undefined | false, what: string, timeoutMs: number): Promise<T> {
  let last: k8s.V1Node | undefined;
  return waitWithPods(node, async () => fn((last = await core().readNode({ name: node }))), what, timeoutMs).catch(async (err: Error) => {
    const seen = last ? `taints=${JSON.stringify(last.spec?.taints ?? [])} condition=${JSON.stringify(condition(last))}` : '(node not read)';
    throw new Error(`${err.message}\nnode ${node}: ${seen} progress=${JSON.stringify(await progressOf(node))}`, { cause: err });
  });
}

/** Waits for `fn` on the node's progress as read now; on timeout the error says what it, the node and its pods looked like. */
async function waitOnProgress<T>(node: string, fn: (p: Progress) => T | undefined | false, what: string, timeoutMs: number): Promise<T> {
  let last: Progress | undefined;
  const check = async () => {
    last = await progressOf(node);
    return last ? fn(last) : undefined;
  };
  return waitWithPods(node, check, what, timeoutMs).catch(async (err: Error) => {
    const n = await core().readNode({ name: node }).catch(() => undefined);
    const seen = n ? `taints=${JSON.stringify(n.spec?.taints ?? [])} condition=${JSON.stringify(condition(n))}` : '(node not read)';
    throw new Error(`${err.message}\nnode ${node}: ${seen} progress=${JSON.stringify(last)}`, { cause: err });
  });
}

const isFailed = (p: Progress) => p.phase === 'Failed';

describe('deploymentMode=daemonset', () => {
  it('opens a healthy tainted node, and the DaemonSet pod leaves it', async () => {
    const node = await newNode();
    const opened = await waitOnNode(node, (n) => n.metadata?.labels?.[verifiedLabel().key] === 'true' && n, 'the node to be verified by its own DaemonSet pod', 120_000);
    expect((opened.spec?.taints ?? []).map((t) => t.key)).not.toContain(taint().key);
    // The node is opened first, then the progress records it (a second request).
    await waitOnProgress(node, (p) => p.phase === 'Passed', 'the NodeVerification to say Passed', 30_000);
    // The condition is the status subresource, written right after the opening (a second request).
    const c = await waitOnNode(node, (n) => condition(n)?.status === 'True' && condition(n), 'the condition to say the node passed', 30_000);
    expect(c.reason).toBe('Passed');
    const events = await nodeEvents(node);
    expect(events.map((e) => e.reason)).toEqual(expect.arrayContaining(['VerificationStarted', 'VerificationPassed']));
    expect(events.find((e) => e.reason === 'VerificationStarted')?.message).toContain('runs the checks on its own node');
    await waitWithPods(node, async () => (await podsOn(node)).length === 0, `the DaemonSet controller to remove the pod from ${node}`, 60_000);
  }, 240_000);

  it("a node a profile selects is verified with that profile's checks (docs/profiles.md)", async () => {
    const node = await newNode(undefined, { [profileLabel()]: 'dns-only' });
    const passed = await waitOnProgress(node, (p) => p.phase === 'Passed' && p, 'the node to pass with its profile', 120_000);
    expect(passed.profile).toBe('dns-only');
    expect(passed.lastAttempt?.checks?.map((c) => c.name)).toEqual(['dns']);
  }, 180_000);

  it('a Karpenter node is opened only once Karpenter has registered it', async () => {
    const node = await newNode(undefined, { 'karpenter.sh/nodepool': 'default' });
    await waitWithPods(node, async () => (await nodeEvents(node)).some((e) => e.reason === 'AwaitingKarpenterRegistration'), 'the checks to pass and the wait to be reported', 120_000);
    await new Promise((r) => setTimeout(r, 3_000)); // more than one poll of the agent
    const waiting = await core().readNode({ name: node });
    expect((waiting.spec?.taints ?? []).map((t) => t.key)).toContain(taint().key);
    expect(waiting.metadata?.labels?.[verifiedLabel().key]).toBeUndefined();
    await core().patchNode({ name: node, body: [{ op: 'add', path: '/metadata/labels/karpenter.sh~1registered', value: 'true' }] }, JSON_PATCH);
    const opened = await waitOnNode(node, (n) => n.metadata?.labels?.[verifiedLabel().key] === 'true' && n, 'the node to open once registered', 30_000);
    expect((opened.spec?.taints ?? []).map((t) => t.key)).not.toContain(taint().key);
  }, 180_000);

  it('a node with broken DNS keeps its taint; the condition and Events name dns; its pod stays for kubectl logs', async () => {
    const node = await newNode({ dns: 'dead' });
    const progress = await waitOnProgress(node, (p) => isFailed(p) && p, 'the node to fail verification', 240_000);
    const failed = await core().readNode({ name: node });
    expect((failed.spec?.taints ?? []).map((t) => t.key)).toContain(taint().key);
    expect(failed.metadata?.labels?.[verifiedLabel().key]).toBeUndefined();
    expect(progress.failures).toBe(MAX_RETRIES + 1);
    expect(progress.lastAttempt?.reason).toBe('ChecksFailed');
    const c = await waitOnNode(node, (n) => condition(n)?.reason === 'RetriesExhausted' && condition(n), 'the condition to say RetriesExhausted', 30_000);
    expect(c.status).toBe('False');
    expect(c.message).toContain('dns');
    const events = await nodeEvents(node);
    expect(events.find((e) => e.reason === 'VerificationChecksFailed')?.message).toMatch(/attempt \d of 3 failed: checks? failed: dns/);
    expect(events.find((e) => e.reason === 'VerificationFailed')?.message).toContain('dns');
    const pods = await podsOn(node);
    expect(pods.map((p) => p.status?.phase)).toEqual(['Running']);
    // Its metrics (the reference's per-node names), through the API server's pod proxy.
    const metrics = await kubectl(['get', '--raw', `/api/v1/namespaces/${namespace}/pods/${pods[0]!.metadata!.name!}:8080/proxy/metrics`]);
    expect(metrics.code, metrics.stderr).toBe(0);
    expect(metrics.stdout).toContain(`node_check_status{node="${node}"} 0`);
    expect(metrics.stdout).toContain(`node_check_failures_total{node="${node}",check="dns"} ${MAX_RETRIES + 1}`);
    expect(metrics.stdout).toMatch(new RegExp(`node_check_dns_duration_seconds\\{node="${node}"\\} \\d`));
    expect(metrics.stdout).toMatch(new RegExp(`node_check_completion_timestamp\\{node="${node}"\\} [1-9]\\d+`));
    // The reference README's commands (its names replaced by this release's).
    const logs = await kubectl(['logs', '-n', namespace, '-l', 'app.kubernetes.io/name=kube-node-ready', '--tail=-1', '--prefix']);
    expect(logs.code, logs.stderr).toBe(0);
    expect(logs.stdout).toContain('verification failed; the taint stays');
    const describe = await kubectl(['describe', 'node', node]);
    expect(describe.stdout.split('\n').find((l) => l.startsWith('Taints:'))).toContain(taint().key);
    const columns = await kubectl(['get', 'nodes', node, '-L', verifiedLabel().key]);
    expect(columns.stdout.split('\n')[0]).toContain('VERIFIED');
    const ds = await kubectl(['get', 'ds', '-n', namespace, `${release}-kube-node-ready`, '-o', 'yaml']);
    expect(ds.code, ds.stderr).toBe(0);
    expect(ds.stdout).toMatch(/affinity:\n\s+nodeAffinity:/);
  }, 360_000);

  it('a pod deleted mid-verification is replaced, and its successor continues the count', async () => {
    const node = await newNode({ dns: 'dead' });
    const first = await waitOnProgress(node, (p) => (p.failures ?? 0) >= 1 && p, 'the first failed attempt', 120_000);
    const [pod] = await podsOn(node);
    expect(pod, await describePods(node)).toBeDefined();
    await core().deleteNamespacedPod({ name: pod!.metadata!.name!, namespace, gracePeriodSeconds: 0 });
    const failed = await waitOnProgress(node, (p) => isFailed(p) && p, 'the node to fail verification after the pod was replaced', 240_000);
    // MAX_RETRIES + 1 failures in all, and the new pod's attempts are counted on from the first
    // pod's: none of them is "attempt 1 of 3" (from 0 it would have failed MAX_RETRIES + 1 more times).
    expect(failed.failures).toBe(MAX_RETRIES + 1);
    const [successor] = await podsOn(node);
    const successorName = successor?.metadata?.name ?? '(none)';
    expect(successor?.metadata?.uid).not.toBe(pod!.metadata!.uid);
    const started = (await nodeEvents(node)).filter((e) => e.reason === 'VerificationStarted' && e.message?.includes(`/${successorName} runs the checks`)).map((e) => e.message ?? '');
    expect(started.length, `Events of ${successorName}`).toBeGreaterThan(0);
    for (const message of started) expect(Number(/^attempt (\d+) of/.exec(message)?.[1]), message).toBeGreaterThanOrEqual(2);
    expect(failed.attempt ?? 0).toBeGreaterThanOrEqual((first.attempt ?? 0) + MAX_RETRIES);
  }, 420_000);
});

describe('the admission policy: an agent writes only its own node, and only our fields', () => {
  let mine = '';
  let other = '';
  let asAgent: k8s.CoreV1Api;
  let unbound: k8s.CoreV1Api;

  const apiWithToken = (token: string): k8s.CoreV1Api => tokenKubeConfig(token, 'agent').makeApiClient(k8s.CoreV1Api);

  beforeAll(async () => {
    // Two broken nodes: they stay tainted, and each keeps its agent pod.
    mine = await newNode({ dns: 'dead' });
    other = await newNode({ dns: 'dead' });
    const pod = await waitWithPods(mine, async () => (await podsOn(mine)).find((p) => p.status?.phase === 'Running'), `the agent pod on ${mine} to run`, 120_000);
    // A token bound to that pod, as its kubelet gets one: the API server puts the pod's node in it.
    const tokens = await podBoundTokens(namespace, pod.spec?.serviceAccountName ?? '', pod);
    asAgent = apiWithToken(tokens.bound);
    unbound = apiWithToken(tokens.unbound);
  }, 180_000);

  /** Our verified label on the node (a dry run): one of the writes the agent makes to open it. */
  const label = () => [{ op: 'add', path: `/metadata/labels/${verifiedLabel().key.replace('/', '~1')}`, value: verifiedLabel().value }];
  const patch = (api: k8s.CoreV1Api, node: string, ops: object[]) => outcome(api.patchNode({ name: node, body: ops, dryRun: 'All' }, JSON_PATCH));

  it('its own node: our verified label is admitted, another label or an annotation is refused', async () => {
    expect(await patch(asAgent, mine, label())).toBe('allowed');
    const annotations = (await core().readNode({ name: mine })).metadata?.annotations ?? {};
    expect(await patch(asAgent, mine, [{ op: 'add', path: '/metadata/annotations', value: { ...annotations, 'example.com/note': 'x' } }])).toContain('metadata.annotations');
    const foreign = await patch(asAgent, mine, [{ op: 'add', path: '/metadata/labels/example.com~1other', value: 'x' }]);
    expect(foreign).toContain(`${release}-kube-node-ready-agent-node-writes`);
    expect(foreign).toContain('metadata.labels');
  });

  it('another node is refused, even for our own fields', async () => {
    const message = await patch(asAgent, other, label());
    expect(message).toContain('denied request');
    expect(message).toContain('only the node its own pod runs on');
  });

  it('a token not bound to a pod names no node, and is refused', async () => {
    expect(await patch(unbound, mine, label())).toContain('only the node its own pod runs on');
  });

  it('other users are not affected', async () => {
    expect(await outcome(core().patchNode({ name: other, body: [{ op: 'add', path: '/metadata/labels/example.com~1other', value: 'x' }], dryRun: 'All' }, JSON_PATCH))).toBe('allowed');
  });
});
