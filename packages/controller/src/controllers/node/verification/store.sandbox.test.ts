// NodeVerificationStore against the sandbox's API server: the resource's lifecycle (created on first
// sight, status through the phases, the node opened by its one guarded write, garbage-collected with
// the Node by kube-controller-manager, a fresh one for a Node re-created under the same name) and the
// resourceVersion guard (a writer that moved the status on refuses a stale write).
import { afterAll, describe, expect, it } from 'vitest';
import { silentLogger } from '@kube-node-ready/core';
import type { k8s } from '@kube-node-ready/sandbox';
import { installationOf, INSTALLATION_LABEL, NodeVerificationApi, type NodeVerification } from '../../../api/nodeverification.js';
import { realClock } from '../../../clock.js';
import { KubeClient } from '../../../kube/client.js';
import { DEFAULT_TAINT, testConfig } from '../../../testing/builders.js';
import { core, sandbox, uniqueName, waitFor } from '../../../../../../test/sandbox.js';
import { openNode } from './open.js';
import { NodeVerificationStore } from './store.js';
import { Outcome, Phase, type VerificationState } from './types.js';

const config = testConfig();
const LABEL = 'kube-node-ready.io/store-test';
const run = uniqueName('store');
const log = silentLogger();

afterAll(async () => {
  await core().deleteCollectionNode({ labelSelector: `${LABEL}=${run}` }).catch(() => undefined);
});

/** A store whose cache never catches up (the informer lagging): everything it reads is its own writes or live reads. */
function setup() {
  let requests: string[] = [];
  const kube = new KubeClient(sandbox().kc, { qps: 100, burst: 100, clock: realClock, log, observer: { request: (operation) => requests.push(operation) } });
  const store = new NodeVerificationStore({ kube, config, clock: realClock, log, cache: new Map<string, NodeVerification>() });
  return {
    kube,
    store,
    /** The requests made since the last call. */
    requests: () => {
      const made = requests;
      requests = [];
      return made;
    },
  };
}

async function createNode(name: string): Promise<k8s.V1Node> {
  return core().createNode({ body: { metadata: { name, labels: { [LABEL]: run } }, spec: { taints: [DEFAULT_TAINT] } } });
}

/** Status times have a second's precision (RFC 3339, as Kubernetes writes them). */
const now = (): number => Math.floor(Date.now() / 1000) * 1000;
const verifying = (uid: string, attempt = 1): VerificationState => ({ uid, attempt, failures: 0, phase: Phase.Verifying, pod: `kube-system/p-${attempt}`, launchableAt: now(), firstLaunchAt: now() });

describe('NodeVerificationStore', () => {
  it('creates the resource with its first progress in one request, owned by the Node; replaces it with each later one; opened (open.ts) with one Node write before the pass is stored', async () => {
    const { kube, store, requests } = setup();
    const name = uniqueName('nv');
    const node = await createNode(name);
    const uid = node.metadata?.uid ?? '';

    const started = verifying(uid);
    expect(await store.save(node, started)).toBe(node);
    expect(requests()).toEqual(['create nodeverification']);
    expect(store.read(node)).toEqual({ kind: 'ok', state: started });
    const created = await kube.getNodeVerification(name);
    expect(created?.spec).toEqual({ nodeName: name, nodeUID: uid });
    expect(created?.metadata?.ownerReferences).toEqual([expect.objectContaining({ apiVersion: 'v1', kind: 'Node', name, uid })]);
    expect(created?.metadata?.labels).toEqual({ [INSTALLATION_LABEL]: installationOf(config.nodeManagement.condition.type) });
    // The API server kept the status sent with the create: the CRD has no status subresource (ADR 0006).
    expect(created?.status).toMatchObject({ phase: 'Verifying', attempt: 1, failures: 0, workerPod: 'kube-system/p-1', conditions: [{ type: 'Verified', status: 'Unknown', reason: 'Verifying' }] });
    requests();

    // The same status again is not written.
    await store.save(node, started);
    expect(requests()).toEqual([]);

    const passed: VerificationState = { ...started, phase: Phase.Passed, lastOutcome: Outcome.Passed, lastMessage: 'all checks passed', lastAttempt: 1, lastChecks: [{ name: 'dns', ok: true, durationMs: 12 }], verifiedAt: now() };
    const opened = await openNode(kube, node, passed, config);
    expect(opened).not.toBe('conflict');
    expect(await store.save(opened as k8s.V1Node, passed)).not.toBe('conflict');
    expect(requests()).toEqual(['patch node', 'update nodeverification']);
    const after = await core().readNode({ name });
    // Ours is gone (kube-controller-manager may have added node.kubernetes.io/not-ready: nobody plays this node).
    expect((after.spec?.taints ?? []).filter((t) => t.key === DEFAULT_TAINT.key)).toEqual([]);
    expect(after.metadata?.labels?.[config.nodeManagement.verifiedLabel.key]).toBe(config.nodeManagement.verifiedLabel.value);
    expect(Object.keys(after.metadata?.annotations ?? {}).filter((k) => k.startsWith('kube-node-ready.io/'))).toEqual([]);
    expect((await kube.getNodeVerification(name))?.status).toMatchObject({ phase: 'Passed', lastAttempt: { attempt: 1, reason: 'Passed', checks: [{ name: 'dns', ok: true, durationMs: 12 }] }, conditions: [{ status: 'True', reason: 'Passed' }] });
  });

  it('ensure() (the DaemonSet agent at first sight) creates it without status, once', async () => {
    const { kube, store, requests } = setup();
    const name = uniqueName('nv');
    const node = await createNode(name);
    await store.ensure(node);
    expect(requests()).toEqual(['create nodeverification']);
    expect((await kube.getNodeVerification(name))?.status).toBeUndefined();
    expect(store.read(node)).toEqual({ kind: 'none' });
    requests();
    await store.ensure(node); // already there: nothing
    expect(requests()).toEqual([]);
    await store.save(node, verifying(node.metadata?.uid ?? ''));
    expect(requests()).toEqual(['update nodeverification']);
  });

  it('refuses a write on a copy another writer has moved on from, and reads the newer one after', async () => {
    const { kube, store } = setup();
    const name = uniqueName('nv');
    const node = await createNode(name);
    const uid = node.metadata?.uid ?? '';
    await store.save(node, verifying(uid));

    // Another leader records attempt 2 meanwhile.
    const { store: other } = setup();
    await other.refresh(name);
    await other.save(node, verifying(uid, 2));

    expect(await store.save(node, { ...verifying(uid), phase: Phase.Backoff, failures: 1, nextAttemptAt: Date.now() + 60_000 })).toBe('conflict');
    const read = store.read(node);
    expect(read.kind === 'ok' && read.state.attempt).toBe(2);
    expect((await kube.getNodeVerification(name))?.status?.attempt).toBe(2);
  });

  it('is garbage-collected with its Node; a Node re-created under the same name gets a fresh one', async () => {
    const { kube, store } = setup();
    const name = uniqueName('nv');
    const first = await createNode(name);
    await store.save(first, { ...verifying(first.metadata?.uid ?? ''), phase: Phase.Failed, failures: 6, attempt: 6 });
    const old = await kube.getNodeVerification(name);
    expect(old?.spec?.nodeUID).toBe(first.metadata?.uid);

    // Re-created before the garbage collector came: the old resource is not this node's progress,
    // and the first write replaces it.
    await core().deleteNode({ name });
    const second = await createNode(name);
    expect(store.read(second)).toEqual({ kind: 'none' });
    await store.save(second, verifying(second.metadata?.uid ?? ''));
    const fresh = await kube.getNodeVerification(name);
    expect(fresh?.spec?.nodeUID).toBe(second.metadata?.uid);
    expect(fresh?.metadata?.uid).not.toBe(old?.metadata?.uid);
    expect(fresh?.status).toMatchObject({ phase: 'Verifying', attempt: 1, failures: 0 });

    // Deleting the Node deletes it (kube-controller-manager's garbage collector).
    await core().deleteNode({ name });
    await waitFor(async () => (await kube.getNodeVerification(name)) === undefined, `NodeVerification ${name} garbage-collected after its Node was deleted`, 60_000, 250);
  });

  it('leaves another installation\'s NodeVerification alone: no progress of ours, and no write', async () => {
    const { kube, store } = setup();
    const name = uniqueName('nv');
    const node = await createNode(name);
    const theirs = new NodeVerificationStore({ kube, config: testConfig({ nodeManagement: { condition: { type: 'other.example.com/NetworkVerified' } } }), clock: realClock, log, cache: new Map() });
    await theirs.save(node, verifying(node.metadata?.uid ?? ''));
    await store.refresh(name);
    expect(store.read(node)).toMatchObject({ kind: 'invalid', problem: expect.stringContaining('another installation') });
    await expect(store.save(node, verifying(node.metadata?.uid ?? '', 5))).rejects.toThrow(/another installation/);
    expect((await kube.getNodeVerification(name))?.status?.attempt).toBe(1);
  });

  it('the CRD refuses a change of the node a resource belongs to, and a name that is not its node\'s', async () => {
    const { kube, store } = setup();
    const name = uniqueName('nv');
    const node = await createNode(name);
    await store.ensure(node);
    const nv = await kube.getNodeVerification(name);
    const custom = sandbox().kc.makeApiClient((await import('@kubernetes/client-node')).CustomObjectsApi);
    const coords = { group: NodeVerificationApi.group, version: NodeVerificationApi.version, plural: NodeVerificationApi.plural };
    await expect(custom.replaceClusterCustomObject({ ...coords, name, body: { ...nv, spec: { nodeName: name, nodeUID: 'another' } } })).rejects.toThrow(/immutable|Invalid|422/i);
    const other = uniqueName('nv');
    await expect(custom.createClusterCustomObject({ ...coords, body: { apiVersion: NodeVerificationApi.apiVersion, kind: 'NodeVerification', metadata: { name: other }, spec: { nodeName: name, nodeUID: 'x' } } })).rejects.toThrow(/nodeName|Invalid|422/i);
  });
});
