// The remediation ledger (ledger.ts ConfigMapLedger) against the real API server: created when
// missing, guarded updates that keep what others put on the ConfigMap (the chart's labels and
// annotations), concurrent writers (409, re-read, the budget enforced across them), and every way a
// write can fail leaving the ConfigMap as it was: a hand edit it cannot parse, no permission, an
// immutable ConfigMap, the size limit. The controller-level behaviour (leader change, fail safe) is
// in leader-change.sandbox.test.ts.
import { Writable } from 'node:stream';
import { k8s } from '@kube-node-ready/sandbox';
import { pino } from 'pino';
import { beforeAll, describe, expect, it } from 'vitest';
import { core, createNamespace, sandbox, serviceAccountKubeConfig, uniqueName, waitFor } from '../../../../../../test/sandbox.js';
import { realClock, type Clock } from '../../../clock.js';
import { KubeClient } from '../../../kube/client.js';
import { FakeClock } from '../../../testing/fake-clock.js';
import { ConfigMapLedger, LEDGER_KEY, parseLedger, type LedgerEntry } from './ledger.js';

const MIN = 60_000;
let namespace = '';

beforeAll(async () => {
  namespace = await createNamespace('ledger');
});

const silent = pino({ level: 'silent' }, new Writable({ write: (_c, _e, cb) => cb() }));

function client(kc: k8s.KubeConfig = sandbox().kc): KubeClient {
  return new KubeClient(kc, { qps: 100, burst: 200, clock: realClock, log: silent, retries: 0 });
}

function ledger(name: string, opts: { clock?: Clock; kc?: k8s.KubeConfig; maxBytes?: number } = {}): ConfigMapLedger {
  return new ConfigMapLedger({ kube: client(opts.kc), clock: opts.clock ?? realClock, namespace, name, ...(opts.maxBytes ? { maxBytes: opts.maxBytes } : {}) });
}

const entry = (uid: string, at: number): LedgerEntry => ({ uid, node: `node-${uid}`, target: `NodeClaim claim-${uid}`, at });
const read = (name: string) => core().readNamespacedConfigMap({ namespace, name });

async function errorOf(p: Promise<unknown>): Promise<string> {
  try {
    await p;
  } catch (err) {
    return (err as Error).message;
  }
  throw new Error('expected it to fail');
}

describe('ConfigMapLedger against the API server', () => {
  it('no ConfigMap: an empty ledger; the first record creates it, later ones update it and prune', async () => {
    const name = uniqueName('first');
    const clock = new FakeClock(Date.now());
    const l = ledger(name, { clock });
    expect(await l.load()).toEqual([]);
    await expect(core().readNamespacedConfigMap({ namespace, name })).rejects.toMatchObject({ code: 404 }); // reading writes nothing

    const a = entry('a', clock.now());
    expect(await l.record(a, 5)).toEqual({ ok: true, entries: [a] });
    const created = await read(name);
    expect(created.metadata?.labels).toEqual({ 'app.kubernetes.io/name': 'kube-node-ready', 'app.kubernetes.io/component': 'controller', 'app.kubernetes.io/managed-by': 'kube-node-ready-controller' });
    expect(created.data?.[LEDGER_KEY]).toBe(`[\n  {"uid":"a","node":"node-a","target":"NodeClaim claim-a","at":"${new Date(a.at).toISOString()}"}\n]\n`);

    await clock.advance(40 * MIN);
    const b = entry('b', clock.now());
    await l.record(b, 5);
    await clock.advance(25 * MIN); // a is 65 minutes old: the next write drops it
    expect(await l.load()).toEqual([b]);
    const c = entry('c', clock.now());
    expect(await l.record(c, 5)).toEqual({ ok: true, entries: [b, c] });
    expect(parseLedger((await read(name)).data?.[LEDGER_KEY], 'x').map((e) => e.uid)).toEqual(['b', 'c']);
    // A node that was not deleted after all is taken out.
    await l.remove('b');
    expect(await l.load()).toEqual([c]);
  });

  it('the ConfigMap as the chart renders it (no data, Helm labels and annotations): updates keep everything but the one key', async () => {
    const name = uniqueName('chart');
    const labels = { 'app.kubernetes.io/managed-by': 'Helm', 'app.kubernetes.io/instance': 'knr', 'app.kubernetes.io/component': 'controller' };
    const annotations = { 'meta.helm.sh/release-name': 'knr', 'meta.helm.sh/release-namespace': namespace };
    await core().createNamespacedConfigMap({ namespace, body: { metadata: { name, labels, annotations }, data: { 'notes.txt': 'kept' } } });
    const l = ledger(name);
    expect(await l.load()).toEqual([]);
    const a = entry('a', Date.now());
    await l.record(a, 5);
    const after = await read(name);
    expect(after.metadata?.labels).toEqual(labels);
    expect(after.metadata?.annotations).toEqual(annotations);
    expect(after.data?.['notes.txt']).toBe('kept');
    expect(await l.load()).toEqual([a]);
  });

  it('concurrent writers (two leaders at once): every record lands (409, read again), and the hourly budget holds across them', async () => {
    const name = uniqueName('race');
    const writers = [ledger(name), ledger(name), ledger(name)];
    const now = Date.now();
    const all = await Promise.all(writers.map((w, i) => w.record(entry(`w${i}`, now + i), 10)));
    expect(all.every((r) => r.ok)).toBe(true);
    expect((await writers[0]?.load())?.map((e) => e.uid).sort()).toEqual(['w0', 'w1', 'w2']);

    // Budget: 4 of 5 spent, two leaders each want the last one: exactly one gets it.
    const budget = uniqueName('budget');
    const [x, y] = [ledger(budget), ledger(budget)];
    for (let i = 0; i < 4; i++) await x.record(entry(`old${i}`, now - MIN), 5);
    const results = await Promise.all([x.record(entry('x', now), 5), y.record(entry('y', now), 5)]);
    expect(results.map((r) => r.ok).sort()).toEqual([false, true]);
    const refused = results.find((r) => !r.ok);
    expect(refused).toMatchObject({ ok: false, reason: 'rate-limit' });
    expect(refused?.entries).toHaveLength(5);
    expect(await x.load()).toHaveLength(5);
  });

  it('a hand edit it cannot parse: load and record fail naming the ConfigMap and the entry; nothing is written', async () => {
    const name = uniqueName('garbage');
    const text = '[{"uid":"a","node":"n","target":"Node n","at":"last tuesday"}]';
    await core().createNamespacedConfigMap({ namespace, body: { metadata: { name }, data: { [LEDGER_KEY]: text } } });
    const l = ledger(name);
    const expected = `ConfigMap ${namespace}/${name}, key ${LEDGER_KEY}: entry 1: "at" must be an RFC 3339 time such as "2025-01-01T10:00:00Z", found "last tuesday"; fix it, or delete the ConfigMap (the hourly budget then starts from zero)`;
    expect(await errorOf(l.load())).toBe(expected);
    expect(await errorOf(l.record(entry('b', Date.now()), 5))).toBe(expected);
    expect((await read(name)).data?.[LEDGER_KEY]).toBe(text);
  });

  it('no permission (the controller\'s RBAC without the ledger): reads and writes fail with the 403, nothing is written', async () => {
    const name = uniqueName('rbac');
    await ledger(name).record(entry('a', Date.now()), 5);
    const before = (await read(name)).data?.[LEDGER_KEY];
    // A ServiceAccount that may read the ledger but not write it, and one that may do neither.
    const rbac = sandbox().kc.makeApiClient(k8s.RbacAuthorizationV1Api);
    const sa = uniqueName('ledger-reader');
    await core().createNamespacedServiceAccount({ namespace, body: { metadata: { name: sa } } });
    await rbac.createNamespacedRole({ namespace, body: { metadata: { name: sa }, rules: [{ apiGroups: [''], resources: ['configmaps'], resourceNames: [name], verbs: ['get'] }] } });
    await rbac.createNamespacedRoleBinding({
      namespace,
      body: { metadata: { name: sa }, roleRef: { apiGroup: 'rbac.authorization.k8s.io', kind: 'Role', name: sa }, subjects: [{ kind: 'ServiceAccount', name: sa, namespace }] },
    });
    const nobody = uniqueName('ledger-nobody');
    await core().createNamespacedServiceAccount({ namespace, body: { metadata: { name: nobody } } });

    const reader = ledger(name, { kc: await serviceAccountKubeConfig(namespace, sa) });
    // The API server's authorizer learns of a new binding through its own watch, a moment later.
    expect(await waitFor(() => reader.load().catch(() => undefined), 'the reader\'s binding to take effect')).toHaveLength(1);
    expect(await errorOf(reader.record(entry('b', Date.now()), 5))).toMatch(new RegExp(`^ConfigMap ${namespace}/${name}: update failed: 403 Forbidden: .*cannot update resource "configmaps"`));
    expect((await read(name)).data?.[LEDGER_KEY]).toBe(before);

    const blind = ledger(name, { kc: await serviceAccountKubeConfig(namespace, nobody) });
    expect(await errorOf(blind.load())).toMatch(new RegExp(`^ConfigMap ${namespace}/${name}: read failed: 403 Forbidden: .*cannot get resource "configmaps"`));
    expect(await errorOf(blind.record(entry('b', Date.now()), 5))).toMatch(/read failed: 403 Forbidden/);
  });

  it('an immutable ConfigMap: the API server refuses the update, the record fails', async () => {
    const name = uniqueName('immutable');
    await core().createNamespacedConfigMap({ namespace, body: { metadata: { name }, data: { [LEDGER_KEY]: '[]\n' }, immutable: true } });
    const l = ledger(name);
    expect(await l.load()).toEqual([]);
    expect(await errorOf(l.record(entry('a', Date.now()), 5))).toMatch(new RegExp(`^ConfigMap ${namespace}/${name}: update failed: 422 Invalid: .*field is immutable when \`immutable\` is set`));
    expect((await read(name)).data?.[LEDGER_KEY]).toBe('[]\n');
  });

  it('the size limit: a record that would make the ledger too large fails, and the ledger stays as it was', async () => {
    const name = uniqueName('size');
    const l = ledger(name, { maxBytes: 150 });
    const now = Date.now();
    await l.record(entry('a', now), 100);
    const before = (await read(name)).data?.[LEDGER_KEY];
    expect(await errorOf(l.record(entry('b', now), 100))).toMatch(
      new RegExp(`^ConfigMap ${namespace}/${name}: the ledger would hold 2 deletions \\(\\d+ bytes\\), more than the 150 bytes it may; remediation.maxPerHour is too high for one ConfigMap$`),
    );
    expect((await read(name)).data?.[LEDGER_KEY]).toBe(before);
  });
});

