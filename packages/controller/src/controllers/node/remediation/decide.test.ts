import type { V1Node } from '@kubernetes/client-node';
import { describe, expect, it } from 'vitest';
import { aNode, testConfig, testProgress } from '../../../testing/builders.js';
import { Outcome, Phase } from '../verification/types.js';
import { parseRemediationConfig, type RemediationConfigInput } from './config.js';
import {
  decide,
  failureTrigger,
  isFailedNode,
  longestVerificationMs,
  nodePoolOf,
  STUCK_BACKOFF_GRACE_MS,
  STUCK_WAITING_RECHECK_MS,
  type BreakerVerdict,
  type Decision,
  type LimitVerdict,
  type StuckClock,
} from './decide.js';
import type { Target } from './executor.js';

const T0 = Date.UTC(2025, 0, 1, 0, 0, 0);
const MIN = 60_000;
const NOW = T0 + 2 * 60 * MIN; // the default test node is two hours old
const config = testConfig();

const closed: BreakerVerdict = { open: false };
const open: BreakerVerdict = { open: true, message: 'circuit breaker open: 6 of the 10 verifications finished in the last 15m failed (60% > 30%)', recheckAfterMs: 30_000 };
const free: LimitVerdict = { ok: true };

interface RunOptions {
  target?: Target;
  now?: number;
  enabled?: boolean;
  dryRun?: boolean;
  remediation?: RemediationConfigInput;
  breaker?: BreakerVerdict;
  limits?: LimitVerdict;
  stuckClock?: StuckClock;
}

/** decide() with safe test defaults, and a record of which guards were read. */
function run(node: V1Node, o: RunOptions = {}): Decision & { read: string[] } {
  const read: string[] = [];
  const decision = decide(node, o.now ?? NOW, {
    enabled: o.enabled ?? true,
    dryRun: o.dryRun ?? false,
    config,
    remediation: parseRemediationConfig(o.remediation ?? {}),
    readState: testProgress.read,
    ...(o.target ? { target: o.target } : {}),
    ...(o.stuckClock ? { stuckClock: o.stuckClock } : {}),
    breaker: () => (read.push('breaker'), o.breaker ?? closed),
    limits: () => (read.push('limits'), o.limits ?? free),
  });
  return { ...decision, read };
}

/** A node that exhausted its retries: tainted, phase Failed, never verified. */
const failed = () =>
  aNode('failed-1').tainted().withState({ attempt: 6, failures: 6, phase: Phase.Failed, lastOutcome: Outcome.ChecksFailed, lastMessage: 'check failed: dns: SERVFAIL' });

describe('decide: which nodes are candidates', () => {
  it('deletes a failed node once every guard passes, saying why', () => {
    const d = run(failed().build());
    expect(d).toMatchObject({ kind: 'delete', trigger: 'failed' });
    expect(d.kind === 'delete' && d.message).toBe('verification failed, 6 failed attempts; last: ChecksFailed: check failed: dns: SERVFAIL');
    expect(d.read).toEqual(['breaker', 'limits']);
  });

  it.each<[string, V1Node]>([
    ['an untainted, never verified node', aNode().build()],
    ['a verified node', aNode().verified().withState({ attempt: 1, failures: 0, phase: Phase.Passed, verifiedAt: T0 }).build()],
    ['a node verifying', aNode().tainted().withState({ attempt: 2, failures: 1, phase: Phase.Verifying }).build()],
    ['a node backing off', aNode().tainted().withState({ attempt: 2, failures: 2, phase: Phase.Backoff, nextAttemptAt: NOW + MIN }).build()],
  ])('ignores %s, silently', (_, node) => {
    expect(run(node)).toMatchObject({ kind: 'ignore', reason: 'NotFailed', read: [] });
  });

  it('ignores everything when remediation is off (nodeManagement.deleteFailedNodes false)', () => {
    expect(run(failed().build(), { enabled: false })).toMatchObject({ kind: 'ignore', reason: 'Disabled', read: [] });
  });

  it('ignores a node already being deleted', () => {
    expect(run(failed().deleting(NOW).build())).toMatchObject({ kind: 'ignore', reason: 'NodeDeleting', read: [] });
  });

  it('ignores Failed progress written for another node UID (a re-created node of the same name)', () => {
    const node = aNode('n').uid('new-uid').tainted().withState({ uid: 'old-uid', attempt: 6, failures: 6, phase: Phase.Failed }).build();
    expect(run(node, { remediation: { stuckNodeTimeout: '0' } })).toMatchObject({ kind: 'ignore', reason: 'NotFailed' });
  });
});

describe('decide: guards, in order', () => {
  it('never a node that passed a verification before (failed a re-verification)', () => {
    const node = aNode().tainted().withState({ attempt: 9, failures: 6, phase: Phase.Failed, verifiedAt: T0 }).build();
    expect(run(node)).toMatchObject({ kind: 'skip', reason: 'WasVerified', read: [] });
  });

  it('never a node carrying the verified label', () => {
    expect(run(failed().verified().build())).toMatchObject({ kind: 'skip', reason: 'WasVerified' });
  });

  it('never a failed node whose taint was removed by hand', () => {
    const node = aNode().withState({ attempt: 6, failures: 6, phase: Phase.Failed }).build();
    expect(run(node)).toMatchObject({ kind: 'skip', reason: 'Untainted', read: [] });
  });

  it.each(['node-role.kubernetes.io/control-plane', 'node-role.kubernetes.io/master'])('never a control-plane node (%s)', (key) => {
    const d = run(failed().label(key, '').build());
    expect(d).toMatchObject({ kind: 'skip', reason: 'ControlPlane', read: [] });
    expect(d.kind === 'skip' && d.message).toContain(key);
  });

  it.each(['disabled', 'true', 'Disabled', ''])('never a node with the opt-out annotation (value %j)', (value) => {
    expect(run(failed().annotate('kube-node-ready.io/remediation', value).build())).toMatchObject({ kind: 'skip', reason: 'OptedOut', read: [] });
  });

  it('the annotation set to "enabled" does not opt out', () => {
    expect(run(failed().annotate('kube-node-ready.io/remediation', 'enabled').build())).toMatchObject({ kind: 'delete' });
  });

  it('never a node with karpenter.sh/do-not-disrupt=true', () => {
    expect(run(failed().annotate('karpenter.sh/do-not-disrupt', 'true').build())).toMatchObject({ kind: 'skip', reason: 'DoNotDisrupt', read: [] });
    expect(run(failed().annotate('karpenter.sh/do-not-disrupt', 'false').build())).toMatchObject({ kind: 'delete' });
  });

  it('the NodeClaim (when looked up): its do-not-disrupt, an ambiguous match, or it being deleted already stop it, before the breaker', () => {
    const claim = (more: Partial<Extract<Target, { kind: 'nodeclaim' }>>): Target => ({
      kind: 'nodeclaim',
      claim: { name: 'general-x', uid: 'u' },
      matchedBy: 'providerID',
      deleting: false,
      doNotDisrupt: false,
      ...more,
    });
    const dnd = run(failed().build(), { target: claim({ doNotDisrupt: true }), breaker: open });
    expect(dnd).toMatchObject({ kind: 'skip', reason: 'DoNotDisrupt', read: [] });
    expect(dnd.kind === 'skip' && dnd.message).toMatch(/^not deleting: NodeClaim general-x has karpenter.sh\/do-not-disrupt=true/);
    expect(run(failed().build(), { target: { kind: 'ambiguous', matchedBy: 'providerID', claims: ['a', 'b'] } })).toMatchObject({ kind: 'skip', reason: 'AmbiguousNodeClaim' });
    expect(run(failed().build(), { target: claim({ deleting: true }) })).toMatchObject({ kind: 'skip', reason: 'NodeClaimDeleting' });
    expect(run(failed().build(), { target: claim({}) })).toMatchObject({ kind: 'delete' });
    expect(run(failed().build(), { target: { kind: 'node', why: 'api-not-served' } })).toMatchObject({ kind: 'delete' });
  });

  it('not before minNodeAge, and says when to look again', () => {
    const node = failed().createdAt(NOW - 3 * MIN).build();
    expect(run(node)).toMatchObject({ kind: 'skip', reason: 'TooYoung', requeueAfterMs: 7 * MIN, read: [] });
    expect(run(node, { remediation: { minNodeAge: '3m' } })).toMatchObject({ kind: 'delete' });
  });

  it('the circuit breaker holds every deletion while open, before the limits are read', () => {
    const d = run(failed().build(), { breaker: open, limits: { ok: false, reason: 'in-flight', message: 'x', retryAfterMs: 1 } });
    expect(d).toMatchObject({ kind: 'blocked', reason: 'circuit-breaker', requeueAfterMs: 30_000, read: ['breaker'] });
    expect(d.kind === 'blocked' && d.message).toMatch(/^deletion paused: circuit breaker open: 6 of the 10/);
  });

  it.each<LimitVerdict & { ok: false }>([
    { ok: false, reason: 'in-flight', message: '2 deletions in progress, remediation.maxInFlight is 2', retryAfterMs: 30_000 },
    { ok: false, reason: 'rate-limit', message: '5 deletions in the last hour, remediation.maxPerHour is 5', retryAfterMs: 120_000 },
  ])('the limits hold a deletion back ($reason)', (limits) => {
    expect(run(failed().build(), { limits })).toMatchObject({ kind: 'blocked', reason: limits.reason, requeueAfterMs: limits.retryAfterMs, read: ['breaker', 'limits'] });
  });

  it('dry run: decided and reported after every guard, nothing deleted', () => {
    expect(run(failed().build(), { dryRun: true })).toMatchObject({ kind: 'dry-run', trigger: 'failed', read: ['breaker', 'limits'] });
    expect(run(failed().build(), { dryRun: true, breaker: open })).toMatchObject({ kind: 'blocked', reason: 'circuit-breaker' });
    expect(run(failed().annotate('kube-node-ready.io/remediation', 'disabled').build(), { dryRun: true })).toMatchObject({ kind: 'skip', reason: 'OptedOut' });
  });

  it('the first failing guard decides (control plane before opt-out before do-not-disrupt before age)', () => {
    const everything = failed()
      .label('node-role.kubernetes.io/control-plane', '')
      .annotate('kube-node-ready.io/remediation', 'disabled')
      .annotate('karpenter.sh/do-not-disrupt', 'true')
      .createdAt(NOW - MIN)
      .build();
    expect(run(everything)).toMatchObject({ reason: 'ControlPlane' });
  });
});

describe('decide: stuck nodes (tainted, never verified, no worker ever ran)', () => {
  const tainted = (created = T0) => aNode('stuck-1').tainted().createdAt(created);

  it('a tainted node with no progress at all is stuck after stuckNodeTimeout (1h)', () => {
    expect(run(tainted(NOW - 59 * MIN).build())).toMatchObject({ kind: 'ignore', reason: 'NotFailed', requeueAfterMs: MIN });
    const d = run(tainted(NOW - 61 * MIN).build());
    expect(d).toMatchObject({ kind: 'delete', trigger: 'stuck' });
    expect(d.kind === 'delete' && d.message).toMatch(/^stuck: the node kept its verification taint for 1h1m without a worker ever running/);
  });

  it('a node whose Backoff is long overdue (launches keep failing) is stuck; one about to retry is not', () => {
    const overdue = tainted().withState({ attempt: 1, failures: 1, phase: Phase.Backoff, nextAttemptAt: NOW - STUCK_BACKOFF_GRACE_MS - 1000 }).build();
    const due = tainted().withState({ attempt: 1, failures: 1, phase: Phase.Backoff, nextAttemptAt: NOW - 1000 }).build();
    expect(run(overdue)).toMatchObject({ kind: 'delete', trigger: 'stuck' });
    expect(run(due)).toMatchObject({ kind: 'ignore', reason: 'NotFailed' });
  });

  it('a node with an attempt in flight is never stuck: the worker deadlines end it', () => {
    expect(run(tainted().withState({ attempt: 3, failures: 2, phase: Phase.Verifying }).build())).toMatchObject({ kind: 'ignore', reason: 'NotFailed' });
  });

  it('never an untainted, verified or once-verified node', () => {
    expect(run(aNode().createdAt(T0).build())).toMatchObject({ kind: 'ignore' });
    expect(run(tainted().verified().build())).toMatchObject({ kind: 'ignore' });
    expect(run(tainted().withState({ attempt: 2, failures: 1, phase: Phase.Backoff, nextAttemptAt: T0, verifiedAt: T0 }).build())).toMatchObject({ kind: 'ignore' });
  });

  it('off with stuckNodeTimeout 0', () => {
    expect(run(tainted().build(), { remediation: { stuckNodeTimeout: '0' } })).toEqual({ kind: 'ignore', reason: 'NotFailed', read: [] });
  });

  it('a new leader gives itself stuckNodeTimeout before it calls a node stuck: the clock starts when it started leading', () => {
    const old = tainted(NOW - 3 * 60 * MIN).build();
    const since = (leadingSince: number): StuckClock => ({ leadingSince, waiting: () => false, queuedMs: () => 0 });
    expect(run(old, { stuckClock: since(NOW - 10 * MIN) })).toMatchObject({ kind: 'ignore', reason: 'NotFailed', requeueAfterMs: 50 * MIN });
    expect(run(old, { stuckClock: since(NOW - 61 * MIN) })).toMatchObject({ kind: 'delete', trigger: 'stuck' });
    // Leading since before the node was created: its creation counts, as before.
    expect(run(tainted(NOW - 59 * MIN).build(), { stuckClock: since(NOW - 5 * 60 * MIN) })).toMatchObject({ kind: 'ignore', requeueAfterMs: MIN });
  });

  it('time in line for a verification slot is not stuck time; a node in line now is never stuck', () => {
    const node = tainted(NOW - 90 * MIN).build();
    const clock = (o: { waiting: boolean; queuedMs: number }): StuckClock => ({ leadingSince: T0, waiting: () => o.waiting, queuedMs: () => o.queuedMs });
    expect(run(node, { stuckClock: clock({ waiting: true, queuedMs: 90 * MIN }) })).toEqual({ kind: 'ignore', reason: 'NotFailed', requeueAfterMs: STUCK_WAITING_RECHECK_MS, read: [] });
    // Out of line after 40 minutes in it: 90 - 40 = 50 minutes count, 10 to go.
    expect(run(node, { stuckClock: clock({ waiting: false, queuedMs: 40 * MIN }) })).toMatchObject({ kind: 'ignore', reason: 'NotFailed', requeueAfterMs: 10 * MIN });
    expect(run(node, { stuckClock: clock({ waiting: false, queuedMs: 20 * MIN }) })).toMatchObject({ kind: 'delete', trigger: 'stuck' });
    expect(isFailedNode(node, NOW, { config, remediation: parseRemediationConfig({}), readState: testProgress.read, stuckClock: clock({ waiting: true, queuedMs: 0 }) })).toBe(false);
  });

  it('a node the worker cannot run on (kubernetes.io/os windows) is never stuck: a replacement would be the same', () => {
    expect(run(tainted(NOW - 3 * 60 * MIN).label('kubernetes.io/os', 'windows').build())).toEqual({ kind: 'ignore', reason: 'NotFailed', read: [] });
  });

  it('a node whose latest attempt was inconclusive (a cluster-wide fault) is never stuck, even with its next attempt long overdue', () => {
    const inconclusive = tainted(NOW - 3 * 60 * MIN).withState({ attempt: 4, failures: 0, phase: Phase.Backoff, nextAttemptAt: NOW - 2 * STUCK_BACKOFF_GRACE_MS, lastOutcome: Outcome.ClusterWide });
    expect(run(inconclusive.build())).toEqual({ kind: 'ignore', reason: 'NotFailed', read: [] });
    // The same node after a counted failure is judged as before.
    expect(run(tainted(NOW - 3 * 60 * MIN).withState({ attempt: 4, failures: 1, phase: Phase.Backoff, nextAttemptAt: NOW - 2 * STUCK_BACKOFF_GRACE_MS, lastOutcome: Outcome.ChecksFailed }).build())).toMatchObject({ kind: 'delete', trigger: 'stuck' });
  });

  it('a stuck node goes through the same guards', () => {
    expect(run(tainted().annotate('kube-node-ready.io/remediation', 'disabled').build())).toMatchObject({ kind: 'skip', reason: 'OptedOut', trigger: 'stuck' });
    expect(run(tainted().build(), { breaker: open })).toMatchObject({ kind: 'blocked', trigger: 'stuck' });
  });
});

describe('decide: helpers', () => {
  it('failureTrigger / isFailedNode', () => {
    const ctx = { config, remediation: parseRemediationConfig({}), readState: testProgress.read };
    expect(failureTrigger(failed().build(), { uid: 'uid-failed-1', attempt: 6, failures: 6, phase: Phase.Failed }, NOW, ctx)).toBe('failed');
    expect(isFailedNode(failed().build(), NOW, ctx)).toBe(true);
    expect(isFailedNode(aNode().tainted().createdAt(NOW - 2 * 60 * MIN).build(), NOW, ctx)).toBe(true);
    expect(isFailedNode(aNode().verified().build(), NOW, ctx)).toBe(false);
  });

  it('a startup timeout is a failure to remediate only with onStartupTimeout: replace (keep and open leave the node be)', () => {
    const timedOut = { uid: 'uid-failed-1', attempt: 1, failures: 0, phase: Phase.Failed, lastOutcome: Outcome.StartupTimeout, failedAt: NOW };
    const ctxOf = (onStartupTimeout: 'keep' | 'open' | 'replace') => ({
      config: testConfig({ nodeManagement: { startupTimeout: '10m', onStartupTimeout, deleteFailedNodes: true } }),
      remediation: parseRemediationConfig({}),
      readState: testProgress.read,
    });
    expect(failureTrigger(failed().build(), timedOut, NOW, ctxOf('replace'))).toBe('failed');
    expect(failureTrigger(failed().build(), timedOut, NOW, ctxOf('keep'))).toBeUndefined();
    expect(failureTrigger(failed().build(), timedOut, NOW, ctxOf('open'))).toBeUndefined();
    // Retries exhausted stays a failure whatever the startup timeout's outcome.
    expect(failureTrigger(failed().build(), { ...timedOut, lastOutcome: Outcome.ChecksFailed }, NOW, ctxOf('keep'))).toBe('failed');
  });

  it('nodePoolOf: the karpenter.sh/nodepool label, "" without it', () => {
    expect(nodePoolOf(aNode().inNodePool('gpu').build())).toBe('gpu');
    expect(nodePoolOf(aNode().build())).toBe('');
  });

  it('longestVerificationMs: every attempt to its last deadline plus every backoff (defaults: about 43 min, under the 1h stuck timeout)', () => {
    // 6 attempts x (2m + 3m + 60s + 15s) + (10 + 20 + 40 + 80 + 160) s
    expect(longestVerificationMs(config)).toBe(6 * 375_000 + 310_000);
    expect(longestVerificationMs(config)).toBeLessThan(parseRemediationConfig({}).stuckNodeTimeout);
  });
});
