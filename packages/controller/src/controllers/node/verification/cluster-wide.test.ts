import { describe, expect, it } from 'vitest';
import { aNode, testConfig, testProgress } from '../../../testing/builders.js';
import { FakeClock } from '../../../testing/fake-clock.js';
import { CLUSTER_WIDE_WINDOW_MS, ClusterWideFailures, clusterWidePrefix, judgeShared, nodeHistory, recordVerdict, type ClusterWideChange, type ControlAnswer, type Evidence } from './cluster-wide.js';
import { desiredCondition } from './condition.js';
import { attemptRecord, type Action } from './decide.js';
import { completedEvents } from './events.js';
import { MAX_MESSAGE } from './pod-result.js';
import type { CheckSummary } from './summary.js';
import { Outcome, Phase, type AttemptResult } from './types.js';

const MIN = 60_000;
const DNS = '10.96.0.10:53';
const NOW = Date.UTC(2025, 0, 1);

function failed(check: string, target?: string): CheckSummary {
  return { name: check, ok: false, durationMs: 5000, error: 'timeout', ...(target !== undefined ? { target } : {}) };
}

/** Each step: after `at` minutes, `node` fails `checks`; `shared` is what record() answers. */
interface Step {
  at: number;
  node: string;
  checks: CheckSummary[];
  shared: Array<{ check: string; target: string; nodes: number }>;
}

const cases: Array<{ name: string; steps: Step[]; opts?: { maxEntries: number } }> = [
  {
    name: 'three nodes failing dns against one nameserver: the third is told, and so is a fourth',
    steps: [
      { at: 0, node: 'a', checks: [failed('dns', DNS)], shared: [] },
      { at: 1, node: 'b', checks: [failed('dns', DNS)], shared: [] },
      { at: 2, node: 'c', checks: [failed('dns', DNS)], shared: [{ check: 'dns', target: DNS, nodes: 3 }] },
      { at: 3, node: 'd', checks: [failed('dns', DNS)], shared: [{ check: 'dns', target: DNS, nodes: 4 }] },
    ],
  },
  {
    name: 'different targets are different faults',
    steps: [
      { at: 0, node: 'a', checks: [failed('dns', '10.96.0.10:53')], shared: [] },
      { at: 0, node: 'b', checks: [failed('dns', '10.96.0.11:53')], shared: [] },
      { at: 0, node: 'c', checks: [failed('dns', '10.96.0.12:53')], shared: [] },
    ],
  },
  {
    name: 'the same target of another check does not count',
    steps: [
      { at: 0, node: 'a', checks: [failed('tcp', '10.96.0.1:443')], shared: [] },
      { at: 0, node: 'b', checks: [failed('tcp', '10.96.0.1:443')], shared: [] },
      { at: 0, node: 'c', checks: [failed('api', '10.96.0.1:443')], shared: [] },
    ],
  },
  {
    name: 'one node failing again and again is one node',
    steps: [
      { at: 0, node: 'a', checks: [failed('dns', DNS)], shared: [] },
      { at: 1, node: 'a', checks: [failed('dns', DNS)], shared: [] },
      { at: 2, node: 'b', checks: [failed('dns', DNS)], shared: [] },
      { at: 3, node: 'b', checks: [failed('dns', DNS)], shared: [] },
    ],
  },
  {
    name: 'failures older than the window are forgotten',
    steps: [
      { at: 0, node: 'a', checks: [failed('dns', DNS)], shared: [] },
      { at: 1, node: 'b', checks: [failed('dns', DNS)], shared: [] },
      { at: 10, node: 'c', checks: [failed('dns', DNS)], shared: [] }, // a is 10 min old: out
      { at: 10.5, node: 'd', checks: [failed('dns', DNS)], shared: [{ check: 'dns', target: DNS, nodes: 3 }] },
    ],
  },
  {
    name: 'a node seen again stays in the window from its latest failure',
    steps: [
      { at: 0, node: 'a', checks: [failed('dns', DNS)], shared: [] },
      { at: 8, node: 'a', checks: [failed('dns', DNS)], shared: [] },
      { at: 9, node: 'b', checks: [failed('dns', DNS)], shared: [] },
      { at: 12, node: 'c', checks: [failed('dns', DNS)], shared: [{ check: 'dns', target: DNS, nodes: 3 }] },
    ],
  },
  {
    name: 'checks without a target, and passed checks, are not recorded',
    steps: [
      { at: 0, node: 'a', checks: [failed('dns')], shared: [] },
      { at: 0, node: 'b', checks: [failed('dns')], shared: [] },
      { at: 0, node: 'c', checks: [failed('dns'), { name: 'api', ok: true, durationMs: 1, target: '10.96.0.1:443' }], shared: [] },
    ],
  },
  {
    name: 'each shared check of one attempt is named',
    steps: [
      { at: 0, node: 'a', checks: [failed('dns', DNS), failed('api', '10.96.0.1:443')], shared: [] },
      { at: 0, node: 'b', checks: [failed('dns', DNS), failed('api', '10.96.0.1:443')], shared: [] },
      {
        at: 0,
        node: 'c',
        checks: [failed('dns', DNS), failed('api', '10.96.0.1:443')],
        shared: [
          { check: 'dns', target: DNS, nodes: 3 },
          { check: 'api', target: '10.96.0.1:443', nodes: 3 },
        ],
      },
    ],
  },
  {
    name: 'memory is capped: the oldest entries go first',
    opts: { maxEntries: 2 },
    steps: [
      { at: 0, node: 'a', checks: [failed('dns', DNS)], shared: [] },
      { at: 0, node: 'b', checks: [failed('dns', DNS)], shared: [] },
      { at: 0, node: 'c', checks: [failed('dns', DNS)], shared: [] }, // a made room for c
    ],
  },
];

describe('ClusterWideFailures', () => {
  it.each(cases)('$name', ({ steps, opts }) => {
    let now = Date.UTC(2025, 0, 1);
    const start = now;
    const failures = new ClusterWideFailures({ now: () => now }, { windowMs: 10 * MIN, minOtherNodes: 2, maxEntries: opts?.maxEntries ?? 100 });
    for (const [i, step] of steps.entries()) {
      now = start + step.at * MIN;
      // No node passed in these cases: every shared fault is one most nodes fail.
      const shared = step.shared.map((s) => ({ ...s, passedSince: 0, most: true }));
      expect(failures.record(step.node, step.checks), `step ${i} (${step.node} at ${step.at} min)`).toEqual(shared);
    }
  });

  it('a fault is one most nodes fail while fewer nodes passed since it began than failed it; passes before it do not count', async () => {
    const clock = new FakeClock();
    const failures = new ClusterWideFailures(clock);
    for (const node of ['p1', 'p2', 'p3', 'p4']) failures.recordPass(node); // before the fault
    await clock.advance(1000);
    failures.record('a', [failed('dns', DNS)]);
    failures.recordPass('p5');
    failures.recordPass('p6');
    failures.record('b', [failed('dns', DNS)]);
    failures.recordPass('p7');
    expect(failures.record('c', [failed('dns', DNS)])).toEqual([{ check: 'dns', target: DNS, nodes: 3, passedSince: 3, most: false }]);
    expect(failures.record('d', [failed('dns', DNS)])).toEqual([{ check: 'dns', target: DNS, nodes: 4, passedSince: 3, most: true }]);
    // A node that passed and then fails counts as failing only.
    failures.recordPass('a');
    expect(failures.record('a', [failed('dns', DNS)])).toEqual([{ check: 'dns', target: DNS, nodes: 4, passedSince: 3, most: true }]);
  });

  it('a new leader restores the recent past from the NodeVerifications: nodes failing since before others passed are told apart from an outage that began after every pass', async () => {
    const clock = new FakeClock();
    const t0 = clock.now();
    await clock.advance(5 * MIN);
    const failing = (since: number) => ({ since, at: clock.now() - 5000, checks: { dns: DNS } });
    const passes = ['p1', 'p2', 'p3', 'p4', 'p5'].map((node, i) => ({ node, passedAt: t0 + MIN + i * 1000 }));
    const old = { node: 'old', passedAt: clock.now() - 11 * MIN }; // older than the window: left out

    // Three bad nodes failing since before the healthy ones passed (the end of a burst, a new leader).
    const tail = new ClusterWideFailures(clock);
    expect(tail.restore([...['a', 'b', 'c'].map((node) => ({ node, failing: failing(t0 + 1000) })), ...passes, old])).toEqual({ passes: 5, failing: 3 });
    expect(tail.record('a', [failed('dns', DNS)])).toEqual([{ check: 'dns', target: DNS, nodes: 3, passedSince: 5, most: false }]);
    // Without the restore (a new leader that knows only what it saw itself), the same three look
    // like most nodes.
    const fresh = new ClusterWideFailures(clock);
    fresh.record('a', [failed('dns', DNS)]);
    fresh.record('b', [failed('dns', DNS)]);
    expect(fresh.record('c', [failed('dns', DNS)])).toEqual([{ check: 'dns', target: DNS, nodes: 3, passedSince: 0, most: true }]);

    // An outage that began after every pass is still a fault of most nodes.
    const outage = new ClusterWideFailures(clock);
    outage.restore([...['a', 'b', 'c'].map((node) => ({ node, failing: failing(t0 + 4 * MIN) })), ...passes]);
    expect(outage.record('a', [failed('dns', DNS)])).toEqual([{ check: 'dns', target: DNS, nodes: 3, passedSince: 0, most: true }]);

    // A failing node's streak older than the window is left out; what was restored ages out with the window.
    const stale = new ClusterWideFailures(clock);
    expect(stale.restore([{ node: 'z', failing: { since: t0 - 20 * MIN, at: clock.now() - 11 * MIN, checks: { dns: DNS } } }])).toEqual({ passes: 0, failing: 0 });
    await clock.advance(10 * MIN);
    expect(tail.maxNodesByCheck().size).toBe(0);
  });

  it('gives the gauge the most nodes per check over targets, and 0 once the window has passed', async () => {
    const clock = new FakeClock();
    const failures = new ClusterWideFailures(clock);
    for (const node of ['a', 'b', 'c']) failures.record(node, [failed('dns', DNS)]);
    failures.record('d', [failed('dns', '10.96.0.11:53'), failed('api', '10.96.0.1:443')]);
    expect(Object.fromEntries(failures.maxNodesByCheck())).toEqual({ dns: 3, api: 1 });
    await clock.advance(10 * MIN);
    expect(failures.maxNodesByCheck().size).toBe(0);
  });
});

/** A finished attempt 3 whose checks failed, of a node with 2 counted failures before it (maxRetries 2: the last allowed). */
function completeAction(checks: CheckSummary[], message: string): Extract<Action, { kind: 'Complete' }> {
  const result: AttemptResult = { outcome: Outcome.ChecksFailed, message, failedChecks: checks.map((c) => c.name), checks, warnings: [] };
  return {
    kind: 'Complete',
    attempt: 3,
    result,
    state: { uid: 'u', attempt: 3, failures: 2, phase: Phase.Verifying },
    open: false,
    deletePod: false,
    tellPass: true,
    cleanup: [],
  };
}

/**
 * The controller's path for a finished attempt, without the API: judgeShared (the judgement, before
 * decide()), attemptRecord (decide()'s verdict, from the state before the attempt), recordVerdict
 * (after the write). `attempt.state` is the state before the attempt.
 */
function finishAttempt(
  failures: ClusterWideFailures,
  node: string,
  attempt: Extract<Action, { kind: 'Complete' }>,
  now: number,
  config: ReturnType<typeof testConfig>,
  evidence: Evidence[] = [],
  control?: ControlAnswer,
): { action: Extract<Action, { kind: 'Complete' }>; signal: ClusterWideChange } {
  const judgement =
    attempt.result.outcome === Outcome.ChecksFailed ? { ...judgeShared(failures, node, attempt.result.checks, evidence), windowMs: failures.windowMs, ...(control ? { control } : {}) } : undefined;
  const { result, state, clusterWide } = attemptRecord(attempt.state, attempt.result, now, config, judgement);
  const action: Extract<Action, { kind: 'Complete' }> = { ...attempt, result, state, open: result.outcome === Outcome.Passed, ...(clusterWide ? { clusterWide } : {}) };
  if (state.phase === Phase.Backoff && state.nextAttemptAt !== undefined) action.requeueAfterMs = state.nextAttemptAt - now;
  return { action, signal: recordVerdict(failures, node, action) };
}

describe('the cluster-wide verdict on a finished attempt', () => {
  const config = testConfig({ reconciliation: { maxRetries: 2 } });
  const message = `check failed: dns: kubernetes.default.svc.cluster.local @${DNS}: timeout`;
  const eventsOf = (action: Extract<Action, { kind: 'Complete' }>) => completedEvents(action, config, { dryRun: false, removedTaints: [] }).map((e) => `${e.reason}: ${e.message}`);

  const note = (failures: ClusterWideFailures, node: string, action: Extract<Action, { kind: 'Complete' }>) => finishAttempt(failures, node, action, NOW, config).action;
  const passed = (failures: ClusterWideFailures, node: string) => {
    const action = completeAction([], 'all checks passed');
    note(failures, node, { ...action, result: { ...action.result, outcome: Outcome.Passed } });
  };

  it('names the fault cluster-wide, first, in the stored message and the Events when 3 nodes fail dns against one nameserver (as many passed since)', () => {
    const failures = new ClusterWideFailures(new FakeClock());
    for (const node of ['a', 'b']) note(failures, node, completeAction([failed('dns', DNS)], message));
    for (const node of ['p1', 'p2', 'p3']) passed(failures, node);
    const noted = note(failures, 'c', completeAction([failed('dns', DNS)], message));
    const line = `cluster-wide? dns against ${DNS} is failing on 3 nodes in the last 10m (this one and 2 others): ${message}`;
    expect(noted.result.message).toBe(line);
    expect(noted.state.lastMessage).toBe(line);
    expect(eventsOf(noted)).toEqual([
      `VerificationChecksFailed: attempt 3 of 3 failed: ${line}`,
      `VerificationFailed: node failed verification after 3 attempts and keeps its taint; last: ${line}`,
    ]);
  });

  it('an attempt failing the way most nodes fail is inconclusive: not counted, a backoff growing with the uncounted attempts, condition Unknown, its own Event', () => {
    const failures = new ClusterWideFailures(new FakeClock());
    for (const node of ['a', 'b']) note(failures, node, completeAction([failed('dns', DNS)], message));
    const noted = note(failures, 'c', completeAction([failed('dns', DNS)], message));
    const line = `cluster-wide: dns against ${DNS} failed on 3 nodes in the last 10m, and 0 passed since it began; not this node's fault: ${message}`;
    expect(noted.result).toMatchObject({ outcome: Outcome.ClusterWide, message: line });
    // completeAction stands for the third counted failure (failures 3, Failed): it is the second.
    // Attempt 3 with 2 counted failures: the first uncounted one waits initialBackoff (10 s).
    expect(noted.state).toEqual({ uid: 'u', attempt: 3, failures: 2, phase: Phase.Backoff, nextAttemptAt: NOW + 10_000, lastOutcome: Outcome.ClusterWide, lastMessage: line, failing: { since: NOW, at: NOW, checks: { dns: DNS } } });
    expect(noted.open).toBe(false);
    expect(noted.requeueAfterMs).toBe(10_000);
    expect(eventsOf(noted)).toEqual([`VerificationInconclusive: attempt inconclusive, not counted against the node (2 of 3 counted attempts failed so far): ${line}; retrying in 10s`]);
    // The next uncounted attempts wait longer: 20 s, 40 s, ... up to maxBackoff.
    const later = note(failures, 'c', { ...completeAction([failed('dns', DNS)], message), attempt: 5, state: { ...completeAction([], message).state, attempt: 5 } });
    expect(later.requeueAfterMs).toBe(40_000);
    expect(desiredCondition(noted.state, config)).toMatchObject({ status: 'Unknown', reason: 'ClusterWide', message: expect.stringMatching(/^attempt inconclusive, not counted against the node: cluster-wide: dns against /) });
  });

  // The tail of a burst: the healthy nodes passed before these three began to fail, so counting
  // cannot tell a bad batch from an outage; a control run on a verified node can (control.ts).
  it('a control run that passed the check makes a failure most nodes share the node\'s own: counted, and the message says why', () => {
    const failures = new ClusterWideFailures(new FakeClock());
    for (const node of ['a', 'b']) note(failures, node, completeAction([failed('dns', DNS)], message));
    const { action, signal } = finishAttempt(failures, 'c', completeAction([failed('dns', DNS)], message), NOW, config, [], { kind: 'passed', node: 'v1', checks: ['dns'] });
    const line = `control run: dns against ${DNS} passed on verified node v1; this node's own failure: cluster-wide? dns against ${DNS} is failing on 3 nodes in the last 10m (this one and 2 others): ${message}`;
    expect(action.result).toMatchObject({ outcome: Outcome.ChecksFailed, message: line });
    expect(action.state).toMatchObject({ failures: 3, phase: Phase.Failed, lastMessage: line });
    expect(signal.raised).toEqual([]);
    // The control node's pass counts for the rule from now on: with it, the next node is one of 4 failing against 1 pass.
    expect(failures.record('d', [failed('dns', DNS)])).toEqual([{ check: 'dns', target: DNS, nodes: 4, passedSince: 1, most: true }]);
  });

  it('a control run that failed too, or could not run, leaves the attempt inconclusive and says so', () => {
    for (const [control, clause] of [
      [{ kind: 'failed', node: 'v1', checks: ['dns'], message: 'check failed: dns: timeout' }, 'control run: dns fails on verified node v1 too'],
      [{ kind: 'unavailable', why: 'no verified node can run one now' }, 'no control run (no verified node can run one now)'],
    ] as const) {
      const failures = new ClusterWideFailures(new FakeClock());
      for (const node of ['a', 'b']) note(failures, node, completeAction([failed('dns', DNS)], message));
      const { action, signal } = finishAttempt(failures, 'c', completeAction([failed('dns', DNS)], message), NOW, config, [], control);
      expect(action.result).toMatchObject({ outcome: Outcome.ClusterWide, message: `cluster-wide: dns against ${DNS} failed on 3 nodes in the last 10m, and 0 passed since it began; ${clause}; not this node's fault: ${message}` });
      expect(action.state.failures).toBe(2);
      expect(signal.raised.map((r) => r.check)).toEqual(['dns']);
    }
  });

  it('a control run does not overrule direct evidence: the cluster DNS Service without a ready endpoint stays inconclusive', () => {
    const failures = new ClusterWideFailures(new FakeClock());
    const evidence = [{ check: 'dns', services: ['kube-system/kube-dns'], why: 'the cluster DNS Service kube-system/kube-dns has no ready endpoint' }];
    const { action } = finishAttempt(failures, 'a', completeAction([failed('dns', DNS)], message), NOW, config, evidence, { kind: 'passed', node: 'v1', checks: ['dns'] });
    expect(action.result.outcome).toBe(Outcome.ClusterWide);
    expect(action.result.message).toMatch(/^cluster-wide: the cluster DNS Service kube-system\/kube-dns has no ready endpoint; not this node's fault: /);
  });

  it('says nothing when the nameservers differ', () => {
    const failures = new ClusterWideFailures(new FakeClock());
    for (const [node, target] of [['a', '10.96.0.10:53'], ['b', '10.96.0.11:53'], ['c', '10.96.0.12:53']] as const) {
      const action = completeAction([failed('dns', target)], message);
      const noted = note(failures, node, action);
      expect(noted.result).toEqual(action.result);
      expect(noted.state).toMatchObject({ failures: 3, phase: Phase.Failed, lastMessage: message });
      expect(eventsOf(noted).join('\n')).not.toContain('cluster-wide');
    }
  });

  it('keeps the line whole when the message is cut to its limit', () => {
    const failures = new ClusterWideFailures(new FakeClock());
    const long = `check failed: dns: ${'x'.repeat(2 * MAX_MESSAGE)}`;
    for (const node of ['a', 'b', 'c']) {
      const noted = note(failures, node, completeAction([failed('dns', DNS)], long));
      if (node === 'c') {
        expect(noted.result.message.length).toBe(MAX_MESSAGE);
        expect(noted.result.message).toMatch(/^cluster-wide: dns against 10\.96\.0\.10:53 failed on 3 nodes /);
      }
    }
  });

  it('leaves outcomes other than failed checks alone', () => {
    const failures = new ClusterWideFailures(new FakeClock());
    for (const node of ['a', 'b', 'c']) {
      const action = { ...completeAction([failed('dns', DNS)], message) };
      const notScheduled = { ...action, result: { ...action.result, outcome: Outcome.NotScheduled } };
      expect(note(failures, node, notScheduled).result).toEqual(notScheduled.result);
    }
  });

  it('direct evidence makes the first failing node inconclusive: the cluster DNS Service without a ready endpoint', () => {
    const failures = new ClusterWideFailures(new FakeClock());
    const evidence = [{ check: 'dns', why: 'the cluster DNS Service kube-system/kube-dns has no ready endpoint' }];
    const { action, signal } = finishAttempt(failures, 'a', completeAction([failed('dns', DNS)], message), NOW, config, evidence);
    const line = `cluster-wide: the cluster DNS Service kube-system/kube-dns has no ready endpoint; not this node's fault: ${message}`;
    expect(action.result).toMatchObject({ outcome: Outcome.ClusterWide, message: line });
    expect(action.state).toMatchObject({ failures: 2, phase: Phase.Backoff, lastOutcome: Outcome.ClusterWide });
    expect(signal).toEqual({ raised: [{ check: 'dns', why: evidence[0]!.why }], cleared: [] });
    expect([...failures.activeFaults().keys()]).toEqual(['dns']);
    // Raised once: the next node's inconclusive attempt keeps it raised without saying it again.
    expect(finishAttempt(failures, 'b', completeAction([failed('dns', DNS)], message), NOW, config, evidence).signal).toEqual({ raised: [], cleared: [] });
  });

  it('evidence about a check that passed explains nothing', () => {
    const failures = new ClusterWideFailures(new FakeClock());
    const action = completeAction([failed('tcp', '10.0.0.5:443'), { name: 'dns', ok: true, durationMs: 3 }], message);
    const noted = finishAttempt(failures, 'a', action, NOW, config, [{ check: 'dns', why: 'no endpoints' }]);
    expect(noted.action.result).toEqual(action.result);
    expect(noted.action.clusterWide).toBeUndefined();
    expect(failures.activeFaults().size).toBe(0);
  });

  it('the API answering 429 or 5xx (httpStatus in the summary) is the API\'s fault; 401/403 are not', () => {
    for (const [httpStatus, inconclusive] of [[503, true], [500, true], [429, true], [401, false], [403, false], [404, false]] as const) {
      const failures = new ClusterWideFailures(new FakeClock());
      const check: CheckSummary = { name: 'api', ok: false, durationMs: 10, error: `GET /version: ${httpStatus}`, target: '10.96.0.1:443', httpStatus };
      const { action } = finishAttempt(failures, 'a', completeAction([check], 'check failed: api'), NOW, config);
      expect(action.result.outcome, `HTTP ${httpStatus}`).toBe(inconclusive ? Outcome.ClusterWide : Outcome.ChecksFailed);
      if (inconclusive) expect(action.result.message).toBe(`cluster-wide: the API server answered HTTP ${httpStatus} to the api check; not this node's fault: check failed: api`);
    }
  });

  it('a check that failed only on a Service without a ready endpoint (noReadyEndpoints, read from the API by the worker) is the cluster\'s state: the first node is inconclusive', () => {
    const failures = new ClusterWideFailures(new FakeClock());
    const checks: CheckSummary[] = [
      { name: 'service', ok: false, durationMs: 10, error: 'Service kube-system/kube-dns: no ready endpoints (2 endpoint(s), none ready)', noReadyEndpoints: ['kube-system/kube-dns'] },
      { name: 'podnet', ok: false, durationMs: 10, error: 'no ready endpoints in the EndpointSlices of Service kube-system/kube-dns: no DNS pod to reach', noReadyEndpoints: ['kube-system/kube-dns'] },
    ];
    const { action } = finishAttempt(failures, 'a', completeAction(checks, 'checks failed: service, podnet'), NOW, config);
    expect(action.result.outcome).toBe(Outcome.ClusterWide);
    expect(action.result.message).toContain('cluster-wide: the Service kube-system/kube-dns has no ready endpoint (read from the API by the service check)');
    // With the controller's own reading of the same Service, that Service is named once.
    const both = finishAttempt(new ClusterWideFailures(new FakeClock()), 'c', completeAction([{ name: 'dns', ok: false, durationMs: 10, error: 'timeout' }, ...checks], 'checks failed: dns, service, podnet'), NOW, config, [
      { check: 'dns', services: ['kube-system/kube-dns'], why: 'the cluster DNS Service kube-system/kube-dns has no ready endpoint' },
    ]);
    expect(both.action.result.message).toBe("cluster-wide: the cluster DNS Service kube-system/kube-dns has no ready endpoint; not this node's fault: checks failed: dns, service, podnet");
    // Without the field (a node-side failure of the same checks), it counts.
    const plain = checks.map(({ noReadyEndpoints: _n, ...c }) => c);
    const counted = finishAttempt(new ClusterWideFailures(new FakeClock()), 'b', completeAction(plain, 'checks failed: service, podnet'), NOW, config);
    expect(counted.action.result.outcome).toBe(Outcome.ChecksFailed);
  });

  it('the signal is cleared by a node passing the check, or after the window without an inconclusive attempt', async () => {
    const clock = new FakeClock();
    const failures = new ClusterWideFailures(clock);
    const evidence = [{ check: 'dns', why: 'no endpoints' }];
    finishAttempt(failures, 'a', completeAction([failed('dns', DNS)], message), NOW, config, evidence);
    // A node failing another check while passing dns: dns works again.
    const other = completeAction([failed('tcp', '10.0.0.5:443'), { name: 'dns', ok: true, durationMs: 3 }], message);
    expect(finishAttempt(failures, 'b', other, NOW, config).signal.cleared).toEqual(['dns']);
    expect(failures.activeFaults().size).toBe(0);
    finishAttempt(failures, 'c', completeAction([failed('dns', DNS)], message), NOW, config, evidence);
    await clock.advance(CLUSTER_WIDE_WINDOW_MS - 1);
    expect(failures.activeFaults().size).toBe(1);
    await clock.advance(1);
    expect(failures.activeFaults().size).toBe(0);
  });

  it('prefix lists each shared check', () => {
    expect(clusterWidePrefix([], 600_000)).toBe('');
    expect(
      clusterWidePrefix(
        [
          { check: 'dns', target: DNS, nodes: 5, passedSince: 9, most: false },
          { check: 'api', target: '10.96.0.1:443', nodes: 3, passedSince: 9, most: false },
        ],
        600_000,
      ),
    ).toBe(`cluster-wide? dns against ${DNS} is failing on 5 nodes in the last 10m (this one and 4 others); api against 10.96.0.1:443 is failing on 3 nodes in the last 10m (this one and 2 others): `);
  });
});

describe('nodeHistory', () => {
  it('takes each node\'s failing streak and last pass from its stored progress; nodes without any are left out', () => {
    const failing = { since: NOW - MIN, at: NOW, checks: { dns: DNS } };
    const backoff = aNode('backoff').uid('u1').withState({ attempt: 2, failures: 1, phase: Phase.Backoff, nextAttemptAt: NOW + 10_000, failing }).build();
    const fresh = aNode('fresh').uid('u2').build();
    const passed = aNode('passed').uid('u3').withState({ attempt: 1, failures: 0, phase: Phase.Passed, verifiedAt: NOW }).build();
    expect(nodeHistory([backoff, fresh, passed], testProgress)).toEqual([
      { node: 'backoff', failing },
      { node: 'passed', passedAt: NOW },
    ]);
  });
});
