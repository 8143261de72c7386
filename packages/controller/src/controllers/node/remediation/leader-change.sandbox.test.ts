// The remediation budget across leader changes, with the whole controller (startController, real
// clock, leader election) against the real API server: failed nodes are real verification
// failures (simulated nodes whose worker pods never start), and deletions go through the ledger
// ConfigMap `<leaseName>-remediation` in the worker namespace (ledger.ts).
//
// - maxPerHour 2: one leader deletes two of four failed nodes and stops; the next leader deletes
//   none of the other two (before the ledger it started from an empty hour and deleted both).
// - A deletion that cannot be recorded (an immutable ledger ConfigMap: the API server refuses the
//   update) is not issued; once the ledger is writable again, the node is deleted.
// - A ledger that cannot be read at start (a hand edit) pauses remediation; deleting the ConfigMap
//   by hand resets the budget and remediation goes on.
import { afterEach, expect, it } from 'vitest';
import type { ControllerConfigInput } from '../../../config/schema.js';
import { harness, nodeEventsWhen, readNode, waitFor, type Harness, type TestController } from '../../../../test/harness.js';
import { core } from '../../../../../../test/sandbox.js';
import { LEDGER_KEY, ledgerName, parseLedger } from './ledger.js';

let h: Harness | undefined;

afterEach(async () => {
  await h?.cleanup();
  h = undefined;
});

/**
 * Remediation on, every node old enough at once. The circuit breaker is off: four failed nodes of
 * four would open its NodePool rule and hide the limits this file is about.
 */
function remediation(o: { maxPerHour?: number } = {}): ControllerConfigInput {
  return { nodeManagement: { deleteFailedNodes: true, remediation: { minNodeAge: '0s', maxInFlight: 10, maxPerHour: o.maxPerHour ?? 5, circuitBreaker: { enabled: false } } } };
}

const ledgerOf = (x: Harness) => ({ namespace: x.namespace, name: ledgerName(`knr-${x.id}`) });

async function readLedger(x: Harness): Promise<string | undefined> {
  const { namespace, name } = ledgerOf(x);
  const cm = await core().readNamespacedConfigMap({ namespace, name }).catch(() => undefined);
  return cm?.data?.[LEDGER_KEY];
}

/** The remediator's log line for a decision on `node` (reason: the Event reason). */
function decision(c: TestController, node: string, reason: string): Record<string, unknown> | undefined {
  return c.logs.find((l) => l.reason === reason && l.node === node);
}

async function present(node: string): Promise<boolean> {
  const n = await readNode(node);
  return n !== undefined && !n.metadata?.deletionTimestamp;
}

async function metric(c: TestController, series: string): Promise<number | undefined> {
  const line = (await c.metrics()).split('\n').find((l) => l.startsWith(`${series} `));
  return line === undefined ? undefined : Number(line.slice(series.length + 1));
}

/**
 * The series once it reads `want`, or what it reads after `timeoutMs`: counters move after the
 * request they count returns, so a test that saw the effect first must give them that moment.
 */
async function metricOnce(c: TestController, series: string, want: number, timeoutMs = 10_000): Promise<number | undefined> {
  return waitFor(async () => (await metric(c, series)) === want || undefined, `${series} to be ${want}`, timeoutMs).then(
    () => want,
    () => metric(c, series),
  );
}

const DELETED = 'kube_node_ready_remediations_total{action="delete-node",result="deleted"}';
const blockedSeries = (reason: string) => `kube_node_ready_remediation_blocked{reason="${reason}"}`;

it('maxPerHour 2: a leader deletes two of four failed nodes; after it stops, the next leader deletes none of the rest', async () => {
  const x = (h = await harness('ledger'));
  const nodes = await Promise.all([0, 1, 2, 3].map((i) => x.addNode({ prefix: `f${i}${x.id}`, faults: { neverStart: true } })));
  const a = await x.start(remediation({ maxPerHour: 2 }), `a-${x.id}`);

  // Every node fails its two attempts (worker never started); two are deleted, two held back.
  // (A deletion is recorded before it is issued, so wait for both the decisions and the deletions.)
  const states = await waitFor(
    async () => {
      if (nodes.filter((n) => decision(a, n, 'RemediationBlocked')).length < 2) return undefined;
      const now = await Promise.all(nodes.map(present));
      return now.filter((p) => !p).length >= 2 ? now : undefined;
    },
    'two nodes deleted and two held back by the hourly limit',
    90_000,
    250,
  );
  const deleted = nodes.filter((_, i) => !states[i]);
  const held = nodes.filter((_, i) => states[i]);
  expect(deleted).toHaveLength(2);
  expect(await metricOnce(a, DELETED, 2)).toBe(2);
  expect(await metricOnce(a, blockedSeries('rate-limit'), 1)).toBe(1);
  for (const n of held) expect(String(decision(a, n, 'RemediationBlocked')?.msg)).toMatch(/^deletion held back: 2 deletions in the last hour, remediation.maxPerHour is 2/);
  const recorded = parseLedger(await readLedger(x), 'ledger');
  expect(recorded.map((e) => e.node).sort()).toEqual([...deleted].sort());
  expect(recorded.map((e) => e.target).sort()).toEqual(deleted.map((n) => `Node ${n}`).sort());

  // The leader goes; another replica takes the Lease and starts from the ledger.
  await a.stop();
  const b = await x.start(remediation({ maxPerHour: 2 }), `b-${x.id}`);
  // Until it has decided on both: held back (or, were the budget lost, deleted).
  const decided = async (n: string) => decision(b, n, 'RemediationBlocked') !== undefined || !(await present(n));
  await waitFor(async () => (await Promise.all(held.map(decided))).every(Boolean) || undefined, 'the new leader to decide on both nodes', 60_000, 250);
  for (const n of held) expect(await present(n), `${n} deleted by the new leader`).toBe(true);
  expect(b.running.isLeader()).toBe(true);
  expect(b.logs.find((l) => l.msg === 'remediation ledger read')).toMatchObject({ deletionsLastHour: 2, maxPerHour: 2 });
  // Held back by what it read at start, not only by the ledger refusing its write at the last step.
  expect(b.logs.filter((l) => String(l.msg).startsWith('the remediation ledger holds remediation.maxPerHour deletions'))).toEqual([]);
  for (const n of held) expect(String(decision(b, n, 'RemediationBlocked')?.msg)).toMatch(/^deletion held back: 2 deletions in the last hour, remediation.maxPerHour is 2 \(next one possible in (5\dm|1h)/);
  expect(await metricOnce(b, blockedSeries('rate-limit'), 1)).toBe(1);
  expect(await metric(b, DELETED)).toBe(0);
  expect(parseLedger(await readLedger(x), 'ledger')).toEqual(recorded);
}, 180_000);

it('a deletion that cannot be recorded in the ledger is not issued (blocked "ledger", Event); once the ledger is writable, it goes', async () => {
  const x = (h = await harness('ledgerw'));
  const { namespace, name } = ledgerOf(x);
  // Readable, but the API server refuses every update: an immutable ConfigMap.
  await core().createNamespacedConfigMap({ namespace, body: { metadata: { name }, data: { [LEDGER_KEY]: '[]\n' }, immutable: true } });
  const node = await x.addNode({ prefix: `w${x.id}`, faults: { neverStart: true } });
  const c = await x.start(remediation());

  await waitFor(async () => decision(c, node, 'RemediationBlocked'), `${node} to be held back`, 90_000, 250);
  expect(String(decision(c, node, 'RemediationBlocked')?.msg)).toMatch(
    new RegExp(`^deletion held back: it could not be recorded in the remediation ledger \\(ConfigMap ${namespace}/${name}: update failed: 422 Invalid: .*field is immutable.*\\); nothing is deleted without a record, trying again in 30s \\(verification failed`),
  );
  expect(await metricOnce(c, blockedSeries('ledger'), 1)).toBe(1);
  expect(await metric(c, DELETED)).toBe(0);
  expect(await present(node)).toBe(true);
  const events = (await nodeEventsWhen(node, (list) => list.some((e) => e.reason === 'RemediationBlocked'), 'the RemediationBlocked Event')).filter((e) => e.reason === 'RemediationBlocked');
  expect(events).toEqual([expect.objectContaining({ type: 'Warning', message: expect.stringContaining('could not be recorded in the remediation ledger') })]);
  expect(await readLedger(x)).toBe('[]\n');

  // Fixed: the ConfigMap goes (the controller creates a new one); the node is tried again and deleted.
  await core().deleteNamespacedConfigMap({ namespace, name });
  await waitFor(async () => !(await present(node)) || undefined, `${node} to be deleted once the ledger is writable`, 60_000, 250);
  expect(parseLedger(await readLedger(x), 'ledger').map((e) => e.node)).toEqual([node]);
  expect(await metricOnce(c, blockedSeries('ledger'), 0)).toBe(0);
  expect(await metricOnce(c, DELETED, 1)).toBe(1);
}, 180_000);

it('a ledger that cannot be read when the controller starts pauses remediation; deleted by hand, the budget resets and remediation goes on', async () => {
  const x = (h = await harness('ledgerr'));
  const { namespace, name } = ledgerOf(x);
  await core().createNamespacedConfigMap({ namespace, body: { metadata: { name }, data: { [LEDGER_KEY]: 'deleted two nodes at 10:00, do not delete more' } } });
  const node = await x.addNode({ prefix: `r${x.id}`, faults: { neverStart: true } });
  const c = await x.start(remediation());

  await waitFor(async () => decision(c, node, 'RemediationBlocked'), `${node} to be held back`, 90_000, 250);
  expect(String(decision(c, node, 'RemediationBlocked')?.msg)).toMatch(
    new RegExp(`^deletion held back: the remediation ledger cannot be read \\(ConfigMap ${namespace}/${name}, key ${LEDGER_KEY}: not valid JSON .*\\); remediation stays paused until it can be, rather than assume no deletions in the last hour`),
  );
  expect(c.logs.filter((l) => l.msg === 'remediation paused: the remediation ledger cannot be read; nothing is deleted until it can be')).toHaveLength(1);
  expect(await metricOnce(c, blockedSeries('ledger'), 1)).toBe(1);
  expect(await present(node)).toBe(true);

  await core().deleteNamespacedConfigMap({ namespace, name });
  await waitFor(async () => !(await present(node)) || undefined, `${node} to be deleted once the ledger is gone`, 60_000, 250);
  expect(c.logs.some((l) => l.msg === 'remediation ledger read: remediation resumes')).toBe(true);
  expect(parseLedger(await readLedger(x), 'ledger').map((e) => e.node)).toEqual([node]);
  expect(await metricOnce(c, blockedSeries('ledger'), 0)).toBe(0);
}, 180_000);
