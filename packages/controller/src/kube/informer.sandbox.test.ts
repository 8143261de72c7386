// Informers whose label selector matches objects that never change, while other objects of the
// same resource keep changing. Their watches are ended by the apiserver every few seconds and
// resume from the resourceVersion of the bookmark each one ends with, never from the list's, and
// they never list again; a watch gone silent is given up on soon after its timeout and resumed; an
// index follows the cache through a relist.
// (A resume from the list's resourceVersion works until the apiserver's watch cache has dropped
// that part of its history, at least 75 s later, then gets 410 Gone and the informer relists; etcd
// compaction does not hasten it, the cache keeps its own history. A test this short checks the
// cause: the resourceVersion each resume carries.)
import { afterAll, beforeAll, expect, it } from 'vitest';
import { silentLogger } from '@kube-node-ready/core';
import { certPaths, k8s, startFaultProxy, type FaultProxy } from '@kube-node-ready/sandbox';
import { realClock } from '../clock.js';
import { SelfHealingInformer } from './informer.js';
import { core, sandbox, serviceAccountKubeConfig, uniqueName, waitFor } from '../../../../test/sandbox.js';

const ROLE = 'kube-node-ready.io/informer-test';
const STABLE = `${ROLE}=stable`;

let namespace: string;
let churning = true;
let churn: Promise<void> = Promise.resolve();
const writes = { count: 0, lastResourceVersion: '', lastError: '' };

beforeAll(async () => {
  namespace = uniqueName('informer');
  await core().createNamespace({ body: { metadata: { name: namespace } } });
  for (const name of ['stable-a', 'stable-b', 'stable-c']) await createConfigMap(name, 'stable');
  await createConfigMap('churn', 'churn');
  // Keeps the resourceVersion of ConfigMaps moving, out of the informers' sight: five writes a second.
  churn = (async () => {
    while (churning) {
      try {
        const cm = await core().patchNamespacedConfigMap({ namespace, name: 'churn', body: [{ op: 'replace', path: '/data/n', value: String(++writes.count) }] });
        writes.lastResourceVersion = cm.metadata?.resourceVersion ?? '';
      } catch (err) {
        writes.lastError = String(err);
      }
      await new Promise((r) => setTimeout(r, 200));
    }
  })();
});

afterAll(async () => {
  churning = false;
  await churn;
  if (namespace) await core().deleteNamespace({ name: namespace }).catch(() => undefined);
});

async function createConfigMap(name: string, role: string): Promise<void> {
  await core().createNamespacedConfigMap({ namespace, body: { metadata: { name, labels: { [ROLE]: role } }, data: { n: '0' } } });
}

/** An informer of this namespace's stable ConfigMaps whose watches last 3-4 s, and what it did. */
function recordedInformer(kubeConfig: k8s.KubeConfig) {
  const started = Date.now();
  const since = () => `${((Date.now() - started) / 1000).toFixed(1)}s`;
  const seen = { lists: 0, listResourceVersion: '', restarts: 0, watches: [] as Array<{ at: string; resourceVersion: string }>, added: [] as Array<{ at: string; name: string; lists: number }> };
  const informer = new SelfHealingInformer<k8s.V1ConfigMap>({
    resource: 'configmaps',
    path: `/api/v1/namespaces/${namespace}/configmaps`,
    list: async function* () {
      const list = await core().listNamespacedConfigMap({ namespace, labelSelector: STABLE });
      seen.listResourceVersion = list.metadata?.resourceVersion ?? '';
      yield list;
    },
    labelSelector: STABLE,
    kubeConfig,
    clock: realClock,
    log: silentLogger(),
    watchTimeoutSeconds: 4,
    onList: () => seen.lists++,
    onWatch: (resourceVersion) => seen.watches.push({ at: since(), resourceVersion }),
    onRestart: () => seen.restarts++,
  });
  informer.on({ add: (cm) => seen.added.push({ at: since(), name: cm.metadata?.name ?? '', lists: seen.lists }) });
  const whatItDid = () =>
    [
      `lists: ${seen.lists} (resourceVersion ${seen.listResourceVersion}), restarts: ${seen.restarts}, health: ${JSON.stringify(informer.health())}`,
      `watch requests (when, from resourceVersion): ${seen.watches.map((w) => `${w.at} ${w.resourceVersion}`).join(', ') || 'none'}`,
      `added: ${seen.added.map((a) => `${a.at} ${a.name} (after ${a.lists} lists)`).join(', ')}`,
      `churn: ${writes.count} writes, last resourceVersion ${writes.lastResourceVersion}${writes.lastError ? `, last error ${writes.lastError}` : ''}`,
    ].join('\n  ');
  /** waitFor, and on timeout what the informer did. */
  const waitOrDescribe = (fn: () => boolean, what: string, timeoutMs: number) =>
    waitFor(async () => fn(), what, timeoutMs, 100).catch((err: Error) => {
      throw new Error(`${err.message}\n  ${whatItDid()}`, { cause: err });
    });
  return { informer, seen, whatItDid, waitOrDescribe };
}

it('resumes its watches from bookmarks and never lists again while what it selects does not change', async () => {
  const { informer, seen, whatItDid, waitOrDescribe } = recordedInformer(sandbox().kc);
  try {
    await informer.start();
    expect(informer.list().map((cm) => cm.metadata?.name).sort()).toEqual(['stable-a', 'stable-b', 'stable-c']);

    // Three resumes take 10-12 s here (a watch of 3-4 s, then a resume at once); 30 s for a loaded machine.
    await waitOrDescribe(() => seen.watches.length >= 4, 'the watch to be resumed three times', 30_000);
    // Something it selects appears: the watch it resumed brings it.
    await createConfigMap('stable-late', 'stable');
    await waitOrDescribe(() => informer.get('stable-late', namespace) !== undefined, 'stable-late in the cache', 15_000);

    const resumes = seen.watches.slice(1).map((w) => w.resourceVersion);
    const what = whatItDid();
    expect(seen.lists, what).toBe(1);
    expect(seen.restarts, what).toBe(0);
    expect(resumes.length, what).toBeGreaterThanOrEqual(2);
    // Each resume starts where the last bookmark left it: past the list's resourceVersion, and on
    // with the churn (resourceVersions only move forward, so "not the list's" means newer).
    expect(resumes.filter((rv) => rv === seen.listResourceVersion), `resumes from the list's resourceVersion\n  ${what}`).toEqual([]);
    expect(new Set(resumes).size, what).toBeGreaterThanOrEqual(2);
    expect(seen.added.find((a) => a.name === 'stable-late')?.lists, what).toBe(1);
    expect(informer.list().map((cm) => cm.metadata?.name).sort()).toEqual(['stable-a', 'stable-b', 'stable-c', 'stable-late']);
  } finally {
    await informer.stop();
  }
});

it('gives up on a watch gone silent soon after its timeout and resumes it, without a list', async () => {
  const { proxy, kubeConfig } = await watchThroughProxy();
  const { informer, seen, whatItDid, waitOrDescribe } = recordedInformer(kubeConfig);
  let stalledAt = 0;
  // The watch that brings stable-trigger goes silent right after it (no bookmark, no end: a dead
  // connection). Through the proxy a watch's response headers come with its first data, and only a
  // watch past its headers is given up on at its timeout (before them, Watch's 30 s connect timeout
  // applies): stable-trigger is that first data.
  informer.on({
    add: (cm) => {
      if (cm.metadata?.name !== 'stable-trigger') return;
      proxy.set({ stallWatches: ['configmaps'] });
      stalledAt = Date.now();
    },
  });
  try {
    await informer.start();
    await createConfigMap('stable-trigger', 'stable');
    await waitOrDescribe(() => stalledAt > 0, 'stable-trigger in the cache', 15_000);
    const watchesBefore = seen.watches.length;
    // Something it selects appears while the watch is silent; then new watches flow again.
    await createConfigMap('stable-stalled', 'stable');
    await new Promise((r) => setTimeout(r, 500));
    proxy.set({});

    // The client gives up on the silent watch 5 s after its 3-4 s timeout, and the resumed watch
    // brings the object: within 10 s here. Watch's own timer would wait for 30 s of silence.
    await waitOrDescribe(() => informer.get('stable-stalled', namespace) !== undefined, 'stable-stalled in the cache', 40_000);
    const tookMs = Date.now() - stalledAt;
    const what = `${whatItDid()}\n  arrived ${tookMs} ms after the stall; proxy ${JSON.stringify(proxy.stats())}`;
    expect(proxy.stats().stalled, what).toBeGreaterThan(0);
    expect(tookMs, what).toBeLessThan(20_000);
    expect(seen.watches.length, what).toBeGreaterThan(watchesBefore);
    expect(seen.lists, what).toBe(1);
    expect(seen.restarts, what).toBe(0);
  } finally {
    await informer.stop();
    await proxy.close();
  }
});

it('keeps its index (byIndex) across updates, deletes and a relist that finds an object gone', async () => {
  const GROUP = 'kube-node-ready.io/group';
  const INDEXED = `${ROLE}=indexed`;
  const create = (name: string, group: string) =>
    core().createNamespacedConfigMap({ namespace, body: { metadata: { name, labels: { [ROLE]: 'indexed', [GROUP]: group } } } });
  for (const [name, group] of [['idx-a', 'g1'], ['idx-b', 'g1'], ['idx-c', 'g2']] as const) await create(name, group);
  const { proxy, kubeConfig } = await watchThroughProxy('indexer');
  let lists = 0;
  const informer = new SelfHealingInformer<k8s.V1ConfigMap>({
    resource: 'configmaps',
    path: `/api/v1/namespaces/${namespace}/configmaps`,
    list: async function* () {
      yield await core().listNamespacedConfigMap({ namespace, labelSelector: INDEXED });
    },
    labelSelector: INDEXED,
    kubeConfig,
    clock: realClock,
    log: silentLogger(),
    watchTimeoutSeconds: 4,
    minBackoffMs: 200,
    onList: () => lists++,
    indexBy: (cm) => cm.metadata?.labels?.[GROUP],
  });
  const group = (key: string) => informer.byIndex(key).map((cm) => cm.metadata?.name).sort();
  const seen = () => `g1 ${JSON.stringify(group('g1'))}, g2 ${JSON.stringify(group('g2'))}, lists ${lists}, cache ${JSON.stringify(informer.list().map((cm) => cm.metadata?.name))}, proxy ${JSON.stringify(proxy.stats())}`;
  const until = (fn: () => boolean, what: string) =>
    waitFor(async () => fn(), what, 30_000, 100).catch((err: Error) => {
      throw new Error(`${err.message}\n  saw: ${seen()}`, { cause: err });
    });
  try {
    await informer.start();
    expect(group('g1')).toEqual(['idx-a', 'idx-b']);
    expect(group('g2')).toEqual(['idx-c']);

    // A watch event moves an object to its new key, and removes a deleted one.
    await core().patchNamespacedConfigMap({ namespace, name: 'idx-b', body: [{ op: 'replace', path: `/metadata/labels/${GROUP.replace('/', '~1')}`, value: 'g2' }] });
    await until(() => group('g2').includes('idx-b'), 'idx-b under g2');
    expect(group('g1'), seen()).toEqual(['idx-a']);
    await core().deleteNamespacedConfigMap({ namespace, name: 'idx-c' });
    await until(() => !group('g2').includes('idx-c'), 'idx-c gone from g2');

    // idx-a is deleted while the watch is silent, and the resumed watch is told its resourceVersion
    // is too old: only the relist can tell the informer, and the index must follow.
    proxy.set({ stallWatches: ['configmaps'], expireWatches: ['configmaps'] });
    await core().deleteNamespacedConfigMap({ namespace, name: 'idx-a' });
    proxy.cutAll();
    await until(() => lists >= 2 && group('g1').length === 0, 'a relist, and idx-a gone from g1');
    proxy.set({});
    expect(group('g2'), seen()).toEqual(['idx-b']);
    expect(informer.list().map((cm) => cm.metadata?.name), seen()).toEqual(['idx-b']);
  } finally {
    await informer.stop();
    await proxy.close();
  }
});

/**
 * The sandbox's fault proxy in front of the apiserver, and a kubeconfig through it for a
 * ServiceAccount that may read this namespace's ConfigMaps (the proxy forwards bearer tokens, not
 * client certificates).
 */
async function watchThroughProxy(account = 'informer'): Promise<{ proxy: FaultProxy; kubeConfig: k8s.KubeConfig }> {
  const { layout, kc } = sandbox();
  const certs = certPaths(layout.paths.certs);
  const rbac = kc.makeApiClient(k8s.RbacAuthorizationV1Api);
  await core().createNamespacedServiceAccount({ namespace, body: { metadata: { name: account } } });
  await rbac.createNamespacedRole({ namespace, body: { metadata: { name: account }, rules: [{ apiGroups: [''], resources: ['configmaps'], verbs: ['get', 'list', 'watch'] }] } });
  await rbac.createNamespacedRoleBinding({
    namespace,
    body: { metadata: { name: account }, roleRef: { apiGroup: 'rbac.authorization.k8s.io', kind: 'Role', name: account }, subjects: [{ kind: 'ServiceAccount', name: account, namespace }] },
  });
  const proxy = await startFaultProxy({ upstreamHost: layout.apiHost, upstreamPort: layout.apiPort, caFile: certs.caCert, certFile: certs.serverCert, keyFile: certs.serverKey });
  const kubeConfig = await serviceAccountKubeConfig(namespace, account, proxy.url);
  return { proxy, kubeConfig };
}
