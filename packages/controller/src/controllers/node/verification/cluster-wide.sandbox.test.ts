// A DNS fault every new node shares (issue 14 item 3), with the whole controller against the real
// API server: five nodes whose pods all get the same dead nameserver, as they would during a cluster
// DNS outage, and one retry allowed (the harness's maxRetries 1). Once most nodes fail the same check
// against the same target with none passing, attempts are inconclusive: not counted against the
// node, condition Unknown/ClusterWide, a VerificationInconclusive Event. No node ends Failed; when
// DNS comes back, every node opens. Counted, the outage would use up every node's two attempts and
// leave each Failed, its taint kept for good.
import { afterAll, beforeAll, expect, it } from 'vitest';
import { FAULT, k8s } from '@kube-node-ready/sandbox';
import { harness, nodeEvents, progressOf, verificationCondition, waitFor, type Harness } from '../../../../test/harness.js';
import { core } from '../../../../../../test/sandbox.js';
import { CONTROL_LABEL } from './control.js';

let h: Harness;

beforeAll(async () => {
  h = await harness('ctlwide');
});

afterAll(async () => {
  await h?.cleanup();
});

const NODES = 5;

it('a fault most nodes share is not counted against them: no node fails, each says cluster-wide, all open once it is gone', { timeout: 240_000 }, async () => {
  // Worker deadlines a busy machine keeps (the harness's 4 s are for tests of those deadlines): a
  // worker that starts late is a failure of its own, which this test is not about.
  const c = await h.start({
    reconciliation: { maxRetries: 1, initialBackoff: '1s', maxBackoff: '3s' },
    worker: { scheduleTimeout: '60s', startTimeout: '60s' },
  });
  const nodes = await Promise.all(Array.from({ length: NODES }, (_, i) => h.addNode({ prefix: `w${i}${h.id}`, faults: { dns: 'dead' } })));

  // Every node gets an inconclusive attempt (its Event) while the fault lasts, and the condition says so.
  const conditionReasons = new Map<string, Set<string>>();
  await waitFor(
    async () => {
      for (const node of nodes) {
        // An inconclusive attempt is a step, not a verdict: its condition is the NodeVerification's.
        const reason = (await verificationCondition(node))?.reason;
        if (reason) conditionReasons.set(node, (conditionReasons.get(node) ?? new Set()).add(reason));
      }
      const events = await Promise.all(nodes.map(async (n) => (await nodeEvents(n)).some((e) => e.reason === 'VerificationInconclusive')));
      return events.every(Boolean) || undefined;
    },
    'a VerificationInconclusive Event on every node',
    120_000,
  );
  const inconclusive = (await nodeEvents(nodes[NODES - 1]!)).find((e) => e.reason === 'VerificationInconclusive');
  // No node of this controller is verified yet: no control run can tell an outage from a bad batch.
  expect(inconclusive?.message).toMatch(/^attempt inconclusive, not counted against the node \([01] of 2 counted attempts failed so far\): cluster-wide: dns against \S+ failed on \d nodes in the last 10m, and 0 passed since it began; no control run \(no verified node can run one now: [^)]*\); not this node's fault: /);
  expect([...conditionReasons.values()].some((r) => r.has('ClusterWide')), `condition reasons seen: ${JSON.stringify([...conditionReasons].map(([n, r]) => [n, [...r]]))}`).toBe(true);
  // Several rounds of attempts later, still no node is failed.
  await new Promise((r) => setTimeout(r, 7_000));
  for (const node of nodes) {
    const a = (await progressOf(node));
    expect(a['phase'], node).not.toBe('Failed');
    expect(Number(a['failures'] ?? '0'), `${node}: counted failures`).toBeLessThanOrEqual(1);
  }
  // Over every instance (the harness starts the controller again if a loaded machine costs it its Lease).
  expect((await c.metricsOfEach()).join('\n')).toMatch(/kube_node_ready_attempt_outcomes_total\{outcome="ClusterWide",profile="default"\} [1-9]/);

  // DNS back (the nodes' pods get the cluster's nameserver again): every node opens.
  for (const node of nodes) {
    await core().patchNode(
      { name: node, body: [{ op: 'remove', path: `/metadata/annotations/${FAULT.dns.replace('/', '~1')}` }] },
      k8s.setHeaderOptions('Content-Type', k8s.PatchStrategy.JsonPatch),
    );
  }
  await h.waitForOpen(nodes, 'every node to open once DNS is back', 120_000);
  for (const node of nodes) expect((await nodeEvents(node)).filter((e) => e.reason === 'VerificationFailed'), node).toEqual([]);
});

// A leader change at the end of a burst: three nodes with a broken path to the cluster DNS failed
// before the healthy ones passed, and still fail when a new leader takes over. The new leader reads
// who passed (verified-at) and who fails what since when (failing) from their NodeVerifications, so the three are
// not "most nodes": their attempts go on counting against them. Knowing only the failures it saw
// itself, it would see three nodes failing and none passing, and take every later attempt for
// inconclusive.
it('a new leader takes over who passed and who fails what: a few bad nodes failing since before the others passed keep counting', { timeout: 300_000 }, async () => {
  await h.cleanup();
  const settings = {
    reconciliation: { maxRetries: 50, initialBackoff: '1s', maxBackoff: '3s' },
    worker: { scheduleTimeout: '60s', startTimeout: '60s' },
  };
  const first = await h.start(settings);
  const bad = await Promise.all(['a', 'b', 'c'].map((p) => h.addNode({ prefix: `bad${p}${h.id}`, faults: { dns: 'dead' } })));
  await waitFor(async () => {
    const states = await Promise.all(bad.map(async (n) => (await progressOf(n))['failing']));
    return states.every(Boolean) || undefined;
  }, 'a failed attempt (status.failing) on each bad node', 120_000);
  const good = await Promise.all(Array.from({ length: 5 }, (_, i) => h.addNode({ prefix: `good${i}${h.id}` })));
  await h.waitForOpen(good, 'the healthy nodes to open under the first leader', 120_000);
  await first.stop();

  const failuresOf = async () => Promise.all(bad.map(async (n) => Number((await progressOf(n))['failures'] ?? '0')));
  const before = await failuresOf();
  const second = await h.start(settings);
  // Three more counted failures each: not only attempts the new leader completed before its
  // memory held three failing nodes (an attempt in flight at the handover is one of them).
  let seen: number[] = before;
  await waitFor(
    async () => {
      seen = await failuresOf();
      return seen.every((f, i) => f >= before[i]! + 3) || undefined;
    },
    `three more counted failures on each bad node under the new leader (before: ${before.join(', ')})`,
    120_000,
    500,
  ).catch((err: Error) => {
    throw new Error(`${err.message}; last seen: ${seen.join(', ')}`);
  });
  expect((await second.metricsOfEach()).join('\n')).not.toMatch(/kube_node_ready_attempt_outcomes_total\{outcome="ClusterWide",profile="default"\} [1-9]/);
  expect(second.logs.find((l) => l.msg === 'cluster-wide rule: recent passes and failing nodes taken over from the NodeVerifications')).toMatchObject({ passes: 5, failing: 3 });
  for (const node of bad) expect((await progressOf(node))['phase'], node).not.toBe('Passed');
});

// The tail of a burst (issue 14 item 3): the healthy nodes passed, then three nodes fail the dns
// check alike. Counting alone cannot tell a bad batch from an outage that began after the passes
// (these three are all the nodes failing now), and its safe answer, inconclusive, would hold the
// three for good. A control run of the check on a verified node tells them apart. First the
// verified nodes' own path to the cluster DNS is broken too (their new pods get the fault, as in an
// outage): the control run fails, the attempts stay inconclusive and say so. Then only the three
// are broken: the control run passes, and their failures count until they are Failed.
it('the tail of a burst: a control run on a verified node tells an outage from a few bad nodes failing alike', { timeout: 360_000 }, async () => {
  await h.cleanup();
  const c = await h.start({
    // Room for the one or two failures counted before a third node fails alike (nothing looks shared below three).
    reconciliation: { maxRetries: 3, initialBackoff: '1s', maxBackoff: '3s' },
    worker: { scheduleTimeout: '60s', startTimeout: '60s' },
  });
  const good = await Promise.all(Array.from({ length: 2 }, (_, i) => h.addNode({ prefix: `ok${i}${h.id}` })));
  await h.waitForOpen(good, 'the healthy nodes to open', 120_000);
  const setDnsFault = (node: string, mode: 'dead' | undefined) =>
    core().patchNode(
      { name: node, body: [mode ? { op: 'add', path: `/metadata/annotations/${FAULT.dns.replace('/', '~1')}`, value: mode } : { op: 'remove', path: `/metadata/annotations/${FAULT.dns.replace('/', '~1')}` }] },
      k8s.setHeaderOptions('Content-Type', k8s.PatchStrategy.JsonPatch),
    );
  for (const node of good) await setDnsFault(node, 'dead');

  const bad = await Promise.all(['a', 'b', 'c'].map((p) => h.addNode({ prefix: `tail${p}${h.id}`, faults: { dns: 'dead' } })));
  const failuresOf = async () => Promise.all(bad.map(async (n) => Number((await progressOf(n))['failures'] ?? '0')));
  // 1. An outage, as far as the control run can see: inconclusive, saying the verified node fails too.
  await waitFor(
    async () => {
      const said = await Promise.all(bad.map(async (n) => (await nodeEvents(n)).some((e) => e.reason === 'VerificationInconclusive' && /control run: dns fails on verified node \S+ too; not this node's fault: /.test(e.message ?? ''))));
      return said.every(Boolean) || undefined;
    },
    'a VerificationInconclusive Event on each tail node naming the failed control run',
    150_000,
  );
  const during = await failuresOf();
  await new Promise((r) => setTimeout(r, 8_000));
  expect(await failuresOf(), 'counted failures while the control run fails too').toEqual(during);
  for (const node of bad) expect((await progressOf(node))['phase'], node).not.toBe('Failed');

  // 2. Only the three are broken: their failures are their own.
  for (const node of good) await setDnsFault(node, undefined);
  let phases: string[] = [];
  await waitFor(
    async () => {
      phases = await Promise.all(bad.map(async (n) => (await progressOf(n))['phase'] ?? ''));
      return phases.every((p) => p === 'Failed') || undefined;
    },
    'each tail node Failed once a control run passes',
    180_000,
  ).catch((err: Error) => {
    throw new Error(`${err.message}; phases: ${phases.join(', ')}`);
  });
  const failed = (await nodeEvents(bad[0]!)).find((e) => e.reason === 'VerificationFailed');
  expect(failed?.message).toMatch(/control run: dns against \S+ passed on verified node \S+; this node's own failure: /);
  // Over every instance of the controller (the harness restarts one that lost its Lease on a loaded machine).
  const metrics = (await c.metricsOfEach()).join('\n');
  expect(metrics).toMatch(/kube_node_ready_control_runs_total\{result="failed"\} [1-9]/);
  expect(metrics).toMatch(/kube_node_ready_control_runs_total\{result="passed"\} [1-9]/);
  // Each control pod is deleted once read.
  await waitFor(
    async () => ((await core().listNamespacedPod({ namespace: h.namespace, labelSelector: CONTROL_LABEL })).items.length === 0 ? true : undefined),
    'no control pod left',
    30_000,
  );
});
