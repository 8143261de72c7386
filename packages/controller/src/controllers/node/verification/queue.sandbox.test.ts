// A queue for verification slots longer than remediation.stuckNodeTimeout (issue 14 item 5), with
// the whole controller (startController, real clock) against the real API server: one slot
// (reconciliation.maxConcurrentVerifications 1), four healthy nodes whose worker containers start
// 25 s late, so the last one waits its turn for about 75 s; stuck-node remediation in dry run
// with the shortest timeout (60 s). Beside them a node that never becomes Ready: its own fault,
// so the stuck-node rule must still fire for it (the check below is not one that cannot fail).
//
// The stuck clock leaves out the wait for a slot: run from node creation, it would report the last
// node in line stuck (a RemediationDryRun for a healthy node that is only waiting its turn).
import { afterAll, beforeAll, expect, it } from 'vitest';
import { harness, progressOf, readNode, waitFor, type Harness } from '../../../../test/harness.js';

let h: Harness;

beforeAll(async () => {
  h = await harness('ctlqueue');
});

afterAll(async () => {
  await h?.cleanup();
});

const QUEUED = 4;

it('nodes waiting their turn for a slot are served in order of arrival, and none is called stuck for waiting', { timeout: 300_000 }, async () => {
  // The node that never becomes Ready comes first, then the queued ones, each created after the
  // previous (names sort the other way round, so a name order would not pass for arrival order).
  const broken = await h.addNode({ prefix: `zbroken${h.id}`, faults: { notReady: true } });
  const queued: string[] = [];
  for (let i = QUEUED; i > 0; i--) {
    queued.push(await h.addNode({ prefix: `q${i}${h.id}`, faults: { startDelay: '25s' } }));
    await new Promise((r) => setTimeout(r, 1100)); // creation timestamps have whole seconds
  }
  const c = await h.start({
    reconciliation: { maxConcurrentVerifications: 1 },
    worker: { scheduleTimeout: '60s', startTimeout: '90s' },
    nodeManagement: {
      deleteFailedNodes: true,
      bringUpTimeout: '30s',
      remediation: { dryRun: true, minNodeAge: '0s', stuckNodeTimeout: '60s', circuitBreaker: { enabled: false } },
    },
  });

  // While the first verifies, the others say they wait (the status metric; no Node write).
  const waitingSeries = (node: string) => `kube_node_ready_verification_status{node="${node}",status="waiting"} 1`;
  let statuses: string[] = [];
  await waitFor(
    async () => {
      const text = await c.metrics();
      statuses = text.split('\n').filter((l) => l.startsWith('kube_node_ready_verification_status{') && l.endsWith(' 1'));
      return text.includes(waitingSeries(queued[QUEUED - 1]!)) || undefined;
    },
    'the last node in line to report status waiting',
    30_000,
  ).catch((err: unknown) => {
    throw new Error(`${String(err)}; statuses: ${statuses.join('; ')}; last logs:\n${c.logs.slice(-10).map((l) => JSON.stringify(l)).join('\n')}`);
  });

  // Every queued node opens, at its first attempt.
  const opened = new Map<string, number>();
  await waitFor(
    async () => {
      for (const node of queued) {
        if (opened.has(node)) continue;
        const n = await readNode(node);
        if (n?.metadata?.labels?.[h.verifiedLabel.key] === h.verifiedLabel.value) opened.set(node, Date.now());
      }
      return opened.size === QUEUED || undefined;
    },
    `all ${QUEUED} queued nodes to open`,
    240_000,
  ).catch((err: unknown) => {
    throw new Error(`${String(err)}; opened: ${[...opened.keys()].join(', ') || 'none'}`);
  });
  const order = [...opened.entries()].sort((a, b) => a[1] - b[1]).map(([n]) => n);
  expect(order).toEqual(queued);
  for (const node of queued) expect((await progressOf(node))['attempt'], `${node}: the attempt that opened it`).toBe('1');

  // The never-Ready node is stuck (its own fault) and remediation says it would act; for the
  // queued nodes it never said anything.
  await waitFor(
    async () => c.logs.find((l) => l.node === broken && l.reason === 'RemediationDryRun'),
    `a RemediationDryRun decision for the never-Ready node ${broken}`,
    60_000,
  );
  const remediationOnQueued = c.logs.filter((l) => typeof l.reason === 'string' && l.reason.startsWith('Remediation') && queued.includes(l.node as string));
  expect(remediationOnQueued).toEqual([]);
});
