import type { V1Node } from '@kubernetes/client-node';
import { ApiException } from '@kubernetes/client-node';
import { Writable } from 'node:stream';
import { pino } from 'pino';
import { Registry } from 'prom-client';
import { describe, expect, it } from 'vitest';
import { aNode, testConfig, testProgress, type NodeBuilder } from '../../../testing/builders.js';
import { FakeClock } from '../../../testing/fake-clock.js';
import { FakeLedger } from '../../../testing/fake-ledger.js';
import { MemoryProgressStore } from '../verification/store.js';
import { Outcome, Phase } from '../verification/types.js';
import { parseRemediationConfig, type RemediationConfigInput } from './config.js';
import type { RemediationEvents } from './events.js';
import { matchNodeClaim, type DeleteResult, type NodeClaim, type NodeClaimRef, type RemediationTargets, type Target } from './executor.js';
import { registerRemediationMetrics } from './metrics.js';
import { LEDGER_RELOAD_MS, LEDGER_RETRY_MS } from './ledger-gate.js';
import { Remediator } from './remediator.js';
import { ERROR_RETRY_MS } from './reporting.js';

// The remediator's orchestration (guards in order, reservations, reporting once, breaker feeding)
// with recording fakes for the API. The same scenarios run against the real API server in
// remediation.sandbox.test.ts.

const T0 = Date.UTC(2025, 0, 1);
const MIN = 60_000;
const HOUR = 60 * MIN;

class FakeTargets implements RemediationTargets {
  readonly nodes = new Map<string, V1Node>();
  claims: NodeClaim[] = [];
  notServed = false;
  calls: string[] = [];
  /** Thrown by every find() while set. */
  findError: Error | undefined;
  /** Returned by the next delete instead of deleting. */
  nextDelete: DeleteResult | Error | undefined;
  /** Applied to the node on the next live read (someone changed it meanwhile). */
  nextLiveChange: ((node: V1Node) => void) | undefined;

  async getNode(name: string): Promise<V1Node | undefined> {
    this.calls.push(`get node ${name}`);
    const node = this.nodes.get(name);
    if (node && this.nextLiveChange) {
      this.nextLiveChange(node);
      this.nextLiveChange = undefined;
    }
    return node ? structuredClone(node) : undefined;
  }

  async find(node: V1Node, opts: { fresh?: boolean } = {}): Promise<Target> {
    if (opts.fresh) this.calls.push(`find ${node.metadata?.name}`);
    if (this.findError) throw this.findError;
    if (this.notServed) return { kind: 'node', why: 'api-not-served' };
    return matchNodeClaim(node, this.claims);
  }

  async deleteNodeClaim(claim: NodeClaimRef): Promise<DeleteResult> {
    this.calls.push(`delete nodeclaim ${claim.name}`);
    const next = this.takeNextDelete();
    if (next) return next;
    this.claims = this.claims.filter((c) => c.metadata?.uid !== claim.uid);
    return 'deleted';
  }

  async deleteNode(node: V1Node): Promise<DeleteResult> {
    this.calls.push(`delete node ${node.metadata?.name}`);
    const next = this.takeNextDelete();
    if (next) return next;
    this.nodes.delete(node.metadata?.name ?? '');
    return 'deleted';
  }

  private takeNextDelete(): DeleteResult | undefined {
    const next = this.nextDelete;
    this.nextDelete = undefined;
    if (next instanceof Error) throw next;
    return next;
  }

  deletes(): string[] {
    return this.calls.filter((c) => c.startsWith('delete'));
  }

  add(...nodes: V1Node[]): void {
    for (const n of nodes) this.nodes.set(n.metadata?.name ?? '', n);
  }
}

interface RecordedEvent {
  on: string;
  type: string;
  reason: string;
  message: string;
}

class RecordingEvents implements RemediationEvents {
  events: RecordedEvent[] = [];

  async node(node: string, type: string, reason: string, message: string): Promise<void> {
    this.events.push({ on: `Node/${node}`, type, reason, message });
  }

  async nodeClaim(claim: NodeClaimRef, type: string, reason: string, message: string): Promise<void> {
    this.events.push({ on: `NodeClaim/${claim.name}`, type, reason, message });
  }

  reasons(): string[] {
    return this.events.map((e) => `${e.on} ${e.reason}`);
  }
}

/** No node waits for a verification slot: the stuck clock counts from creation (or leading). */
const noSlotQueue = { waiting: (): boolean => false, queuedMs: (): number => 0 };

/**
 * The NodePool rule of the breaker is off unless a test turns it on: with a handful of nodes, two
 * failures are already "more than 20% of the pool", which would hide what the other tests look at.
 */
function setup(
  opts: { remediation?: RemediationConfigInput; dryRun?: boolean; progress?: MemoryProgressStore; clock?: FakeClock; targets?: FakeTargets; ledger?: FakeLedger } = {},
) {
  const remediation = { ...opts.remediation, circuitBreaker: { maxFailedPercentPerNodePool: 100, ...opts.remediation?.circuitBreaker } };
  const clock = opts.clock ?? new FakeClock(T0 + 2 * HOUR);
  const targets = opts.targets ?? new FakeTargets();
  const ledger = opts.ledger ?? new FakeLedger(clock, targets.calls);
  const events = new RecordingEvents();
  const registry = new Registry();
  const lines: Array<Record<string, unknown>> = [];
  const log = pino({ level: 'info' }, new Writable({ write: (chunk, _enc, cb) => (lines.push(JSON.parse(String(chunk)) as Record<string, unknown>), cb()) }));
  const remediator = new Remediator({
    targets,
    ledger,
    clock,
    log,
    events,
    metrics: registerRemediationMetrics(registry),
    config: testConfig({ nodeManagement: { deleteFailedNodes: true } }),
    remediation: parseRemediationConfig(remediation),
    dryRun: opts.dryRun ?? false,
    nodes: () => [...targets.nodes.values()],
    progress: opts.progress ?? testProgress,
    slots: noSlotQueue,
  });
  const metric = async (name: string, labels: Record<string, string>): Promise<number | undefined> => {
    const m = (await registry.getMetricsAsJSON()).find((x) => x.name === name);
    return (m?.values as Array<{ labels: Record<string, string>; value: number }> | undefined)?.find((v) => Object.entries(labels).every(([k, val]) => v.labels[k] === val))?.value;
  };
  const total = (action: string, result: string) => metric('kube_node_ready_remediations_total', { action, result });
  const blocked = (reason: string) => metric('kube_node_ready_remediation_blocked', { reason });
  return { clock, targets, ledger, events, remediator, lines, total, blocked };
}

const failed = (name: string): NodeBuilder =>
  aNode(name).tainted().withState({ attempt: 6, failures: 6, phase: Phase.Failed, lastOutcome: Outcome.ChecksFailed, lastMessage: 'check failed: dns: SERVFAIL' });

/** A Karpenter node and its NodeClaim. */
function karpenterNode(t: FakeTargets, b: NodeBuilder, pool = 'general'): V1Node {
  const node = b.inNodePool(pool).registered().build();
  const name = node.metadata?.name ?? '';
  node.spec = { ...node.spec, providerID: `aws:///us-east-1a/i-${name}` };
  t.add(node);
  t.claims.push({ metadata: { name: `${pool}-${name}`, uid: `uid-claim-${name}` }, status: { providerID: `aws:///us-east-1a/i-${name}`, nodeName: name } });
  return node;
}

describe('Remediator: deleting', () => {
  it('a failed Karpenter node: deletes its NodeClaim (not the Node), after a live read and a fresh lookup', async () => {
    const { targets, events, remediator, total } = setup();
    const node = karpenterNode(targets, failed('n1'));
    const r = await remediator.consider(node);
    expect(r).toMatchObject({ decision: { kind: 'delete', trigger: 'failed' }, action: 'delete-nodeclaim', result: 'deleted', reported: true });
    expect(targets.calls).toEqual(['get node n1', 'find n1', 'record n1: NodeClaim general-n1', 'delete nodeclaim general-n1']);
    expect(targets.nodes.has('n1')).toBe(true);
    expect(events.reasons()).toEqual(['Node/n1 RemediationNodeClaimDeleted', 'NodeClaim/general-n1 RemediationNodeClaimDeleted']);
    expect(events.events[0]?.message).toMatch(/^deleted NodeClaim general-n1 \(matched by providerID\): Karpenter drains the node and terminates its instance; verification failed, 6 failed attempts/);
    expect(events.events[1]?.message).toMatch(/^node n1: deleted NodeClaim/);
    expect(await total('delete-nodeclaim', 'deleted')).toBe(1);

    // Never twice: the node is still there until Karpenter removes it.
    expect(await remediator.consider(node)).toMatchObject({ decision: { kind: 'ignore', reason: 'AlreadyRemediated' }, reported: false });
    expect(targets.deletes()).toHaveLength(1);
  });

  it('a failed plain node: deletes the Node, and warns that the machine may keep running', async () => {
    const { targets, events, remediator, total } = setup();
    const node = failed('plain').build();
    targets.add(node);
    expect(await remediator.consider(node)).toMatchObject({ action: 'delete-node', result: 'deleted' });
    expect(targets.deletes()).toEqual(['delete node plain']);
    expect(events.events).toEqual([
      expect.objectContaining({ on: 'Node/plain', type: 'Warning', reason: 'RemediationNodeDeleted', message: expect.stringMatching(/no NodeClaim matches this node\): the machine itself may keep running/) }),
    ]);
    expect(await total('delete-node', 'deleted')).toBe(1);
  });

  it('no NodeClaim API (not served): deletes the Node, and says so', async () => {
    const { targets, events, remediator } = setup();
    targets.notServed = true;
    const node = failed('n2').inNodePool('general').build();
    targets.add(node);
    expect(await remediator.consider(node)).toMatchObject({ action: 'delete-node', result: 'deleted' });
    expect(events.events[0]?.message).toContain('the karpenter.sh/v1 NodeClaim API is not served): the machine itself may keep running');
  });

  it('a stuck node (tainted for over an hour, no worker ever ran) is deleted like a failed one', async () => {
    const { targets, events, remediator } = setup();
    const node = aNode('stuck').tainted().createdAt(T0).build();
    targets.add(node);
    expect(await remediator.consider(node)).toMatchObject({ decision: { kind: 'delete', trigger: 'stuck' }, result: 'deleted' });
    expect(events.events[0]?.message).toMatch(/stuck: the node kept its verification taint for 2h/);
  });

  it('a new leader first gives itself stuckNodeTimeout: a node stuck by age is not deleted the moment it starts leading', async () => {
    const { clock, targets, remediator } = setup();
    const node = aNode('stuck').tainted().createdAt(T0).build(); // 2h old
    targets.add(node);
    remediator.startedLeading();
    expect(await remediator.consider(node)).toMatchObject({ decision: { kind: 'ignore', reason: 'NotFailed' }, requeueAfterMs: HOUR });
    await clock.advance(HOUR);
    expect(await remediator.consider(node)).toMatchObject({ decision: { kind: 'delete', trigger: 'stuck' }, result: 'deleted' });
  });

  it('an API error: reported (Event, metric, log), the slot and the charge given back, retried later', async () => {
    const { targets, events, remediator, total, blocked, lines } = setup({ remediation: { maxInFlight: 1, maxPerHour: 1 } });
    const node = failed('n3').build();
    targets.add(node);
    targets.findError = new ApiException(403, 'Forbidden', JSON.stringify({ reason: 'Forbidden', message: 'nodeclaims.karpenter.sh is forbidden' }), {});
    const r = await remediator.consider(node);
    expect(r).toMatchObject({ result: 'error', requeueAfterMs: ERROR_RETRY_MS, reported: true });
    expect(targets.deletes()).toEqual([]); // a 403 never falls back to deleting the Node
    expect(events.events).toEqual([expect.objectContaining({ type: 'Warning', reason: 'RemediationFailed', message: expect.stringContaining('403 Forbidden: nodeclaims.karpenter.sh is forbidden') })]);
    expect(await total('delete-node', 'error')).toBe(1);
    expect(await blocked('in-flight')).toBe(0);
    expect(lines.some((l) => l.level === 50 && l.node === 'n3')).toBe(true);
    // The slot and the hourly charge came back: the retry goes through.
    targets.findError = undefined;
    expect(await remediator.consider(node)).toMatchObject({ result: 'deleted' });
  });

  it('re-decides on the live node: an opt-out added since the cache was filled wins', async () => {
    const { targets, events, remediator } = setup();
    const node = failed('n4').build();
    targets.add(node);
    targets.nextLiveChange = (n) => (n.metadata = { ...n.metadata, annotations: { ...n.metadata?.annotations, 'kube-node-ready.io/remediation': 'disabled' } });
    expect(await remediator.consider(node)).toMatchObject({ decision: { kind: 'skip', reason: 'OptedOut' }, result: 'skipped' });
    expect(targets.deletes()).toEqual([]);
    expect(events.reasons()).toEqual(['Node/n4 RemediationSkipped']);
  });

  it('a NodeClaim with karpenter.sh/do-not-disrupt=true, or already being deleted, is left alone', async () => {
    const { targets, events, remediator } = setup();
    const a = karpenterNode(targets, failed('a'));
    const b = karpenterNode(targets, failed('b'));
    (targets.claims[0] as NodeClaim).metadata = { ...(targets.claims[0] as NodeClaim).metadata, annotations: { 'karpenter.sh/do-not-disrupt': 'true' } };
    (targets.claims[1] as NodeClaim).metadata = { ...(targets.claims[1] as NodeClaim).metadata, deletionTimestamp: new Date(T0).toISOString() };
    expect(await remediator.consider(a)).toMatchObject({ result: 'skipped' });
    expect(await remediator.consider(b)).toMatchObject({ result: 'skipped' });
    expect(targets.deletes()).toEqual([]);
    expect(events.events.map((e) => `${e.on} ${e.reason}: ${e.message.split(' (')[0]}`)).toEqual([
      'Node/a RemediationSkipped: not deleting: NodeClaim general-a has karpenter.sh/do-not-disrupt=true',
      'NodeClaim/general-a RemediationSkipped: node a: not deleting: NodeClaim general-a has karpenter.sh/do-not-disrupt=true',
      'Node/b RemediationSkipped: not deleting: NodeClaim general-b is already being deleted',
      'NodeClaim/general-b RemediationSkipped: node b: not deleting: NodeClaim general-b is already being deleted',
    ]);
  });
});

describe('Remediator: guards hold', () => {
  it.each<[string, (b: NodeBuilder) => NodeBuilder, string]>([
    ['the opt-out annotation', (b) => b.annotate('kube-node-ready.io/remediation', 'disabled'), 'OptedOut'],
    ['karpenter.sh/do-not-disrupt=true', (b) => b.annotate('karpenter.sh/do-not-disrupt', 'true'), 'DoNotDisrupt'],
    ['a control-plane node', (b) => b.label('node-role.kubernetes.io/control-plane', ''), 'ControlPlane'],
    ['a node verified before', (b) => b.withState({ attempt: 9, failures: 6, phase: Phase.Failed, verifiedAt: T0 }), 'WasVerified'],
    ['a node too young', (b) => b.createdAt(T0 + 2 * HOUR - MIN), 'TooYoung'],
  ])('%s: never deleted; reported once (Event on Node and NodeClaim, metric)', async (_, modify, reason) => {
    const { targets, events, remediator, total } = setup();
    const node = karpenterNode(targets, modify(failed('g')));
    for (let i = 0; i < 3; i++) expect(await remediator.consider(node)).toMatchObject({ decision: { kind: 'skip', reason }, result: 'skipped' });
    expect(targets.deletes()).toEqual([]);
    expect(events.reasons()).toEqual(['Node/g RemediationSkipped', 'NodeClaim/general-g RemediationSkipped']);
    expect(await total('delete-nodeclaim', 'skipped')).toBe(1);
  });

  it('a verified node and a node still verifying are ignored silently', async () => {
    const { targets, events, remediator } = setup();
    const ok = aNode('ok').verified().withState({ attempt: 1, failures: 0, phase: Phase.Passed, verifiedAt: T0 }).build();
    const busy = aNode('busy').tainted().withState({ attempt: 2, failures: 1, phase: Phase.Verifying }).build();
    targets.add(ok, busy);
    expect(await remediator.consider(ok)).toMatchObject({ decision: { kind: 'ignore', reason: 'NotFailed' }, reported: false });
    expect(await remediator.consider(busy)).toMatchObject({ decision: { kind: 'ignore', reason: 'NotFailed' }, reported: false });
    expect(events.events).toEqual([]);
    expect(targets.calls).toEqual([]);
  });

  it('in flight: at most maxInFlight deletions until the nodes are gone, even when called in parallel', async () => {
    // Six failures at once would open the breaker (its own test below): off here.
    const { targets, events, remediator, blocked } = setup({ remediation: { maxInFlight: 2, maxPerHour: 100, circuitBreaker: { enabled: false } } });
    const nodes = Array.from({ length: 6 }, (_, i) => karpenterNode(targets, failed(`p${i}`)));
    const results = await Promise.all(nodes.map((n) => remediator.consider(n)));
    expect(results.filter((r) => r.result === 'deleted')).toHaveLength(2);
    expect(results.filter((r) => r.decision.kind === 'blocked' && r.decision.reason === 'in-flight')).toHaveLength(4);
    expect(targets.deletes()).toHaveLength(2);
    expect(await blocked('in-flight')).toBe(1);
    expect(events.events.filter((e) => e.reason === 'RemediationBlocked' && e.on.startsWith('Node/'))).toHaveLength(4);
    expect(events.events.find((e) => e.reason === 'RemediationBlocked')?.message).toMatch(/^deletion held back: 2 deletions in progress, remediation.maxInFlight is 2/);

    // Karpenter removes the first two nodes: two more go.
    for (const r of results.filter((x) => x.result === 'deleted')) {
      const gone = nodes.find((n) => `general-${n.metadata?.name}` === (r.target?.kind === 'nodeclaim' ? r.target.claim.name : ''));
      targets.nodes.delete(gone?.metadata?.name ?? '');
      remediator.forget(gone as V1Node);
    }
    expect(await blocked('in-flight')).toBe(0);
    const rest = await Promise.all(nodes.filter((n) => targets.nodes.has(n.metadata?.name ?? '')).map((n) => remediator.consider(n)));
    expect(rest.filter((r) => r.result === 'deleted')).toHaveLength(2);
    expect(targets.deletes()).toHaveLength(4);
  });

  it('a failed node being deleted by someone else counts as in flight (the limit and the gauge)', async () => {
    const { targets, remediator, blocked } = setup({ remediation: { maxInFlight: 1 } });
    const going = failed('going').deleting(T0).build();
    targets.add(going);
    const node = failed('next').build();
    targets.add(node);
    expect(await remediator.consider(node)).toMatchObject({ decision: { kind: 'blocked', reason: 'in-flight' } });
    expect(await blocked('in-flight')).toBe(1);
    targets.nodes.delete('going');
    remediator.forget(going);
    await remediator.tick();
    expect(await blocked('in-flight')).toBe(0);
    expect(await remediator.consider(node)).toMatchObject({ result: 'deleted' });
  });

  it('per hour: at most maxPerHour deletions in any rolling hour', async () => {
    const { clock, targets, remediator, blocked } = setup({ remediation: { maxInFlight: 10, maxPerHour: 2 } });
    const nodes = ['h1', 'h2', 'h3'].map((n) => failed(n).build());
    targets.add(...nodes);
    expect((await remediator.consider(nodes[0] as V1Node)).result).toBe('deleted');
    await clock.advance(10 * MIN);
    expect((await remediator.consider(nodes[1] as V1Node)).result).toBe('deleted');
    const third = await remediator.consider(nodes[2] as V1Node);
    expect(third).toMatchObject({ decision: { kind: 'blocked', reason: 'rate-limit' }, requeueAfterMs: 50 * MIN });
    expect(await blocked('rate-limit')).toBe(1);
    await clock.advance(50 * MIN - 1000);
    expect((await remediator.consider(nodes[2] as V1Node)).decision.kind).toBe('blocked');
    await clock.advance(1000);
    expect((await remediator.consider(nodes[2] as V1Node)).result).toBe('deleted');
    expect(targets.deletes()).toEqual(['delete node h1', 'delete node h2', 'delete node h3']);
  });

  it('tick(): a deletion whose node never goes away is reported as stalled, frees its slot, and is not repeated', async () => {
    const { clock, targets, events, remediator, blocked } = setup({ remediation: { maxInFlight: 1 } });
    const node = karpenterNode(targets, failed('slow'));
    await remediator.consider(node);
    expect(await blocked('in-flight')).toBe(1);
    await clock.advance(15 * MIN);
    await remediator.tick();
    expect(events.events.at(-1)).toMatchObject({ on: 'Node/slow', type: 'Warning', reason: 'RemediationStalled' });
    expect(events.events.at(-1)?.message).toMatch(/^NodeClaim general-slow was deleted 15m ago and the node still exists/);
    expect(await blocked('in-flight')).toBe(0);
    expect(await remediator.consider(node)).toMatchObject({ decision: { reason: 'AlreadyRemediated' } });
    expect(targets.deletes()).toHaveLength(1);
  });
});

describe('Remediator: the ledger (the hourly budget across leader changes)', () => {
  const apiError = (code: number, reason: string, message: string) => new ApiException(code, reason, JSON.stringify({ reason, message }), {});

  it('each deletion is recorded before it is issued; a new leader on the same ledger starts with the hour spent', async () => {
    const remediation = { maxInFlight: 10, maxPerHour: 2 };
    const first = setup({ remediation });
    const nodes = ['a', 'b', 'c'].map((n) => failed(n).build());
    first.targets.add(...nodes);
    expect((await first.remediator.consider(nodes[0] as V1Node)).result).toBe('deleted');
    await first.clock.advance(10 * MIN);
    expect((await first.remediator.consider(nodes[1] as V1Node)).result).toBe('deleted');
    expect(first.targets.calls.filter((c) => /^(record|delete)/.test(c))).toEqual(['record a: Node a', 'delete node a', 'record b: Node b', 'delete node b']);
    expect(first.ledger.entries.map((e) => [e.uid, e.node, e.target, e.at])).toEqual([
      ['uid-a', 'a', 'Node a', T0 + 2 * HOUR],
      ['uid-b', 'b', 'Node b', T0 + 2 * HOUR + 10 * MIN],
    ]);

    // The leader dies; another replica takes over with the same ledger and cluster.
    const second = setup({ remediation, clock: first.clock, targets: first.targets, ledger: first.ledger });
    await second.remediator.tick();
    expect(second.ledger.loads).toBe(2); // once by each leader
    expect(await second.blocked('rate-limit')).toBe(1);
    const held = await second.remediator.consider(nodes[2] as V1Node);
    expect(held).toMatchObject({ decision: { kind: 'blocked', reason: 'rate-limit' }, requeueAfterMs: 50 * MIN, reported: true });
    expect(second.events.events[0]?.message).toMatch(/^deletion held back: 2 deletions in the last hour, remediation.maxPerHour is 2 \(next one possible in 50m\)/);
    expect(second.targets.deletes()).toEqual(['delete node a', 'delete node b']);
    // The hour rolls on from the recorded times, not from the leader change.
    await second.clock.advance(50 * MIN);
    expect((await second.remediator.consider(nodes[2] as V1Node)).result).toBe('deleted');
    expect(second.ledger.entries.map((e) => e.node)).toEqual(['b', 'c']); // a's entry aged out on this write
  });

  it('a node the previous leader deleted is not acted on again: it counts as in flight, then as stalled', async () => {
    const first = setup({ remediation: { maxInFlight: 1 } });
    const node = karpenterNode(first.targets, failed('k'));
    expect((await first.remediator.consider(node)).result).toBe('deleted');
    // The NodeClaim is gone but the Node is still there (Karpenter slow, or absent) when the leader changes:
    // with the NodeClaim gone, the new leader would otherwise delete the Node object.
    await first.clock.advance(5 * MIN);
    const second = setup({ remediation: { maxInFlight: 1 }, clock: first.clock, targets: first.targets, ledger: first.ledger });
    expect(await second.remediator.consider(node)).toMatchObject({ decision: { kind: 'ignore', reason: 'AlreadyRemediated' } });
    expect(await second.blocked('in-flight')).toBe(1);
    const other = failed('other').build();
    second.targets.add(other);
    expect(await second.remediator.consider(other)).toMatchObject({ decision: { kind: 'blocked', reason: 'in-flight' } });
    await second.clock.advance(10 * MIN);
    await second.remediator.tick();
    expect(second.events.events.at(-1)).toMatchObject({ on: 'Node/k', reason: 'RemediationStalled', message: expect.stringMatching(/^NodeClaim general-k was deleted 15m ago and the node still exists/) });
    expect(await second.remediator.consider(node)).toMatchObject({ decision: { reason: 'AlreadyRemediated' } });
    expect(await second.remediator.consider(other)).toMatchObject({ result: 'deleted' }); // its slot is free again
    expect(second.targets.deletes()).toEqual(['delete nodeclaim general-k', 'delete node other']);
  });

  it('a ledger that cannot be read: nothing is deleted (blocked "ledger": Event, gauge, one error log) until it can be read', async () => {
    const { clock, targets, ledger, events, remediator, blocked, total, lines } = setup();
    ledger.loadError = new Error('ConfigMap kube-system/kube-node-ready-controller-remediation: read failed: 403 Forbidden: configmaps is forbidden');
    const node = failed('r').build();
    targets.add(node);
    await remediator.tick();
    expect(await blocked('ledger')).toBe(1);
    const r = await remediator.consider(node);
    expect(r).toMatchObject({ decision: { kind: 'blocked', reason: 'ledger' }, result: 'skipped', requeueAfterMs: LEDGER_RETRY_MS });
    expect(events.events).toEqual([expect.objectContaining({ on: 'Node/r', type: 'Warning', reason: 'RemediationBlocked' })]);
    expect(events.events[0]?.message).toMatch(
      /^deletion held back: the remediation ledger cannot be read \(ConfigMap kube-system\/kube-node-ready-controller-remediation: read failed: 403 Forbidden: configmaps is forbidden\); remediation stays paused until it can be, rather than assume no deletions in the last hour \(verification failed/,
    );
    expect(await total('delete-node', 'skipped')).toBe(1);
    expect(targets.deletes()).toEqual([]);
    // Read again at most every LEDGER_RELOAD_MS, logged once.
    expect(ledger.loads).toBe(1);
    await remediator.tick();
    expect(ledger.loads).toBe(1);
    await clock.advance(LEDGER_RELOAD_MS);
    await remediator.tick();
    expect(ledger.loads).toBe(2);
    expect(lines.filter((l) => l.level === 50 && l.msg === 'remediation paused: the remediation ledger cannot be read; nothing is deleted until it can be')).toHaveLength(1);

    ledger.loadError = undefined;
    await clock.advance(LEDGER_RELOAD_MS);
    await remediator.tick();
    expect(await blocked('ledger')).toBe(0);
    expect(lines.some((l) => l.msg === 'remediation ledger read: remediation resumes')).toBe(true);
    expect((await remediator.consider(node)).result).toBe('deleted');
  });

  it('a deletion that cannot be recorded is not issued: blocked "ledger", the slot and charge given back, retried', async () => {
    const { targets, ledger, events, remediator, blocked, total } = setup({ remediation: { maxInFlight: 1, maxPerHour: 1 } });
    const node = karpenterNode(targets, failed('w'));
    ledger.writeError = new Error('ConfigMap kube-system/kube-node-ready-controller-remediation: update failed: 500 InternalError: etcdserver: request timed out');
    const r = await remediator.consider(node);
    expect(r).toMatchObject({ decision: { kind: 'blocked', reason: 'ledger' }, action: 'delete-nodeclaim', result: 'skipped', requeueAfterMs: LEDGER_RETRY_MS, reported: true });
    expect(targets.calls).toEqual(['get node w', 'find w', 'record w: NodeClaim general-w']);
    expect(events.reasons()).toEqual(['Node/w RemediationBlocked', 'NodeClaim/general-w RemediationBlocked']);
    expect(events.events[0]).toMatchObject({ type: 'Warning' });
    expect(events.events[0]?.message).toMatch(
      /^deletion held back: it could not be recorded in the remediation ledger \(ConfigMap kube-system\/kube-node-ready-controller-remediation: update failed: 500 InternalError: etcdserver: request timed out\); nothing is deleted without a record, trying again in 30s \(verification failed/,
    );
    expect(await blocked('ledger')).toBe(1);
    expect(await blocked('in-flight')).toBe(0);
    expect(await blocked('rate-limit')).toBe(0);
    expect(await total('delete-nodeclaim', 'skipped')).toBe(1);
    expect(ledger.entries).toEqual([]);

    // The retry fails the same way: not reported again. Then the ledger is writable again.
    await remediator.consider(node);
    expect(events.events).toHaveLength(2);
    ledger.writeError = undefined;
    expect((await remediator.consider(node)).result).toBe('deleted');
    expect(await blocked('ledger')).toBe(0);
    expect(targets.deletes()).toEqual(['delete nodeclaim general-w']);
  });

  it('the "ledger" gauge drops when the node held back goes away', async () => {
    const { targets, ledger, remediator, blocked } = setup();
    const node = failed('gone').build();
    targets.add(node);
    ledger.writeError = new Error('nope');
    await remediator.consider(node);
    expect(await blocked('ledger')).toBe(1);
    targets.nodes.delete('gone');
    remediator.forget(node);
    expect(await blocked('ledger')).toBe(0);
  });

  it('another replica filled the hour (two leaders at once): the ledger refuses, nothing is deleted, the hourly limit is reported', async () => {
    const { clock, targets, ledger, remediator, events } = setup({ remediation: { maxPerHour: 2 } });
    const node = failed('late').build();
    targets.add(node);
    await remediator.tick(); // the ledger is read while it is still empty
    ledger.entries = [
      { uid: 'uid-x', node: 'x', target: 'Node x', at: clock.now() - 20 * MIN },
      { uid: 'uid-y', node: 'y', target: 'Node y', at: clock.now() - 5 * MIN },
    ];
    const r = await remediator.consider(node);
    expect(r).toMatchObject({ decision: { kind: 'blocked', reason: 'rate-limit' }, requeueAfterMs: 40 * MIN });
    expect(targets.deletes()).toEqual([]);
    expect(targets.calls.filter((c) => c.startsWith('record'))).toEqual(['record late: Node late']);
    expect(events.events[0]?.message).toMatch(/^deletion held back: 2 deletions in the last hour, remediation.maxPerHour is 2/);
    expect(ledger.entries.map((e) => e.node)).toEqual(['x', 'y']);
  });

  it('a recorded deletion that was not issued (precondition failed, object gone) is taken out again; one whose call failed stays', async () => {
    const { targets, ledger, remediator } = setup({ remediation: { maxPerHour: 5 } });
    const changed = karpenterNode(targets, failed('changed'));
    targets.nextDelete = 'changed';
    expect((await remediator.consider(changed)).result).toBe('deleted'); // decided again, deleted on the second round
    expect(targets.calls.filter((c) => /^(record|unrecord|delete)/.test(c))).toEqual([
      'record changed: NodeClaim general-changed',
      'delete nodeclaim general-changed',
      'unrecord uid-changed',
      'record changed: NodeClaim general-changed',
      'delete nodeclaim general-changed',
    ]);
    expect(ledger.entries.map((e) => e.uid)).toEqual(['uid-changed']);

    const failing = failed('failing').build();
    targets.add(failing);
    targets.nextDelete = apiError(500, 'InternalError', 'boom');
    expect(await remediator.consider(failing)).toMatchObject({ result: 'error' });
    // Whether the delete happened is unknown: the record stays (over-counting is the safe side).
    expect(ledger.entries.map((e) => e.uid)).toEqual(['uid-changed', 'uid-failing']);
  });

  it('dry run: the ledger is read, never written', async () => {
    const { targets, ledger, remediator } = setup({ dryRun: true, remediation: { maxPerHour: 1 } });
    ledger.entries = [{ uid: 'uid-x', node: 'x', target: 'Node x', at: T0 + 2 * HOUR - MIN }];
    const node = failed('dry').build();
    targets.add(node);
    expect(await remediator.consider(node)).toMatchObject({ decision: { kind: 'blocked', reason: 'rate-limit' } });
    expect(ledger.loads).toBe(1);
    expect(targets.calls.filter((c) => c.includes('record'))).toEqual([]);
    expect(ledger.entries.map((e) => e.uid)).toEqual(['uid-x']);
  });
});

describe('Remediator: dry run', () => {
  it('decides and reports every decision once, deletes nothing, and applies the limits as a real run would', async () => {
    const { targets, events, remediator, total } = setup({ dryRun: true, remediation: { maxPerHour: 2 } });
    const nodes = [karpenterNode(targets, failed('d1')), failed('d2').build(), failed('d3').build(), failed('d4').annotate('kube-node-ready.io/remediation', 'disabled').build()];
    targets.add(...nodes);
    for (let round = 0; round < 3; round++) for (const n of nodes) await remediator.consider(n);
    expect(targets.deletes()).toEqual([]);
    expect(targets.calls.filter((c) => c.startsWith('get'))).toEqual([]); // no live read: nothing to guard
    expect(events.events.map((e) => `${e.on} ${e.reason}`)).toEqual([
      'Node/d1 RemediationDryRun',
      'NodeClaim/general-d1 RemediationDryRun',
      'Node/d2 RemediationDryRun',
      'Node/d3 RemediationBlocked',
      'Node/d4 RemediationSkipped',
    ]);
    expect(events.events[0]?.message).toMatch(/^dry run: would delete NodeClaim general-d1 \(matched by providerID\) \(verification failed/);
    expect(events.events[2]?.message).toMatch(/^dry run: would delete the Node object \(no NodeClaim; the machine may keep running\)/);
    expect(events.events[3]?.message).toMatch(/remediation.maxPerHour is 2/);
    expect(await total('delete-nodeclaim', 'dry-run')).toBe(1);
    expect(await total('delete-node', 'dry-run')).toBe(1);
    expect(await total('delete-node', 'skipped')).toBe(2);
  });

  it('the controller-wide dry run: failures are read from the verification controller\'s in-memory progress', async () => {
    const progress = new MemoryProgressStore();
    const { targets, events, remediator } = setup({ dryRun: true, progress });
    const node = aNode('mem').tainted().build(); // no annotations: nothing is written to Nodes in a dry run
    targets.add(node);
    await progress.save(node, { uid: 'uid-mem', attempt: 6, failures: 6, phase: Phase.Failed, lastOutcome: Outcome.NotStarted, lastMessage: 'ImagePullBackOff' });
    expect(remediator.observe(node)).toBe(true);
    expect(await remediator.consider(node)).toMatchObject({ decision: { kind: 'dry-run', trigger: 'failed' }, result: 'dry-run' });
    expect(events.events[0]?.message).toContain('last: NotStarted: ImagePullBackOff');
    expect(targets.deletes()).toEqual([]);
  });

  it('remediation.dryRun alone (controller not in dry run) is a dry run too', async () => {
    const { targets, remediator } = setup({ remediation: { dryRun: true } });
    const node = failed('x').build();
    targets.add(node);
    expect(await remediator.consider(node)).toMatchObject({ decision: { kind: 'dry-run' }, result: 'dry-run' });
    expect(targets.deletes()).toEqual([]);
  });
});

describe('Remediator: circuit breaker', () => {
  it('storm: 10 of 20 new nodes fail; the breaker opens after minSamples, holds the rest, and closes when failures stop', async () => {
    const { clock, targets, events, remediator, blocked, lines } = setup({ remediation: { maxInFlight: 100, maxPerHour: 100, circuitBreaker: { window: '10m', minSamples: 5, maxFailedPercentPerNodePool: 100 } } });
    // 20 nodes of one pool join; they finish one after another, failures first (the worst order).
    const names = Array.from({ length: 20 }, (_, i) => `s${String(i).padStart(2, '0')}`);
    for (const name of names) karpenterNode(targets, aNode(name).tainted().withState({ attempt: 1, failures: 0, phase: Phase.Verifying }), 'storm');
    const finish = (name: string, ok: boolean): V1Node => {
      const b = aNode(name).inNodePool('storm').registered();
      const node = (ok ? b.verified().withState({ attempt: 1, failures: 0, phase: Phase.Passed, verifiedAt: clock.now() }) : failed(name).inNodePool('storm')).build();
      node.spec = { ...node.spec, providerID: `aws:///us-east-1a/i-${name}` };
      targets.add(node);
      remediator.observe(node);
      return node;
    };
    for (const name of names.slice(0, 10)) await remediator.consider(finish(name, false));
    for (const name of names.slice(10)) expect((await remediator.consider(finish(name, true))).decision).toEqual({ kind: 'ignore', reason: 'NotFailed' });

    // Deletions stop as soon as the window holds minSamples: 4 went before the 5th failure opened it.
    expect(targets.deletes()).toEqual(['delete nodeclaim storm-s00', 'delete nodeclaim storm-s01', 'delete nodeclaim storm-s02', 'delete nodeclaim storm-s03']);
    const held = events.events.filter((e) => e.reason === 'RemediationBlocked' && e.on.startsWith('Node/'));
    expect(held.map((e) => e.on)).toEqual(names.slice(4, 10).map((n) => `Node/${n}`));
    expect(held[0]?.message).toMatch(/^deletion paused: circuit breaker open: 5 of the 5 verifications finished in the last 10m failed \(100% > 30%\)/);
    expect(await blocked('circuit-breaker')).toBe(1);
    expect(lines.filter((l) => l.msg === 'remediation paused: circuit breaker open; no failed node is deleted until failures drop')).toHaveLength(1);

    // 10 passes dilute it only to 50%: still open. Failures stop; once they age out, it closes.
    await remediator.tick();
    expect(await blocked('circuit-breaker')).toBe(1);
    await clock.advance(10 * MIN);
    await remediator.tick();
    expect(await blocked('circuit-breaker')).toBe(0);
    expect(lines.some((l) => l.msg === 'remediation resumed: circuit breaker closed')).toBe(true);
    for (const name of names.slice(4, 10)) await remediator.consider(targets.nodes.get(name) as V1Node);
    expect(targets.deletes()).toHaveLength(10);
  });

  it('the NodePool rule: more than 20% of a pool failed holds deletions in that pool only', async () => {
    const { targets, events, remediator, blocked } = setup({ remediation: { maxInFlight: 100, maxPerHour: 100, circuitBreaker: { maxFailedPercentPerNodePool: 20 } } });
    for (let i = 0; i < 8; i++) karpenterNode(targets, aNode(`gpu-ok-${i}`).verified(), 'gpu');
    const bad = [0, 1, 2, 3].map((i) => karpenterNode(targets, failed(`gpu-bad-${i}`), 'gpu'));
    const other = karpenterNode(targets, failed('cpu-bad'), 'cpu');
    for (let i = 0; i < 4; i++) karpenterNode(targets, aNode(`cpu-ok-${i}`).verified(), 'cpu');
    expect(await remediator.consider(bad[0] as V1Node)).toMatchObject({ decision: { kind: 'blocked', reason: 'circuit-breaker' } });
    expect(events.events[0]?.message).toMatch(/^deletion paused: circuit breaker open: 4 of 12 NodePool gpu have failed \(33.3% > 20%, at most 3 allowed\)/);
    expect(await remediator.consider(other)).toMatchObject({ result: 'deleted' });
    expect(await blocked('circuit-breaker')).toBe(1);
  });

  it('observe(): a node first seen already Failed counts as a fresh failure; a pass long ago does not count', async () => {
    const { clock, targets, remediator, blocked } = setup({ remediation: { circuitBreaker: { minSamples: 3 } } });
    const old = aNode('old').verified().withState({ attempt: 1, failures: 0, phase: Phase.Passed, verifiedAt: clock.now() - HOUR }).build();
    const nodes = [failed('f1').build(), failed('f2').build(), failed('f3').build(), old];
    targets.add(...nodes);
    expect(nodes.map((n) => remediator.observe(n))).toEqual([true, true, true, false]);
    await remediator.tick();
    expect(await blocked('circuit-breaker')).toBe(1);
    // Seen again (resync, an unrelated update): not counted twice.
    for (const n of nodes) remediator.observe(n);
    await clock.advance(15 * MIN);
    await remediator.tick();
    expect(await blocked('circuit-breaker')).toBe(0);
  });

  it('observe() flags tainted unverified nodes when the stuck rule is on, not otherwise', () => {
    const on = setup();
    const off = setup({ remediation: { stuckNodeTimeout: '0' } });
    const pending = aNode('pending').tainted().build();
    expect(on.remediator.observe(pending)).toBe(true);
    expect(off.remediator.observe(pending)).toBe(false);
    expect(on.remediator.observe(aNode('open').verified().build())).toBe(false);
  });
});

it('warns at start-up when stuckNodeTimeout is shorter than a verification can take', () => {
  const lines: string[] = [];
  const clock = new FakeClock(T0);
  new Remediator({
    targets: new FakeTargets(),
    ledger: new FakeLedger(clock, []),
    clock,
    log: pino({ level: 'info' }, new Writable({ write: (c, _e, cb) => (lines.push(String(c)), cb()) })),
    events: new RecordingEvents(),
    metrics: registerRemediationMetrics(new Registry()),
    config: testConfig({ nodeManagement: { deleteFailedNodes: true } }),
    remediation: parseRemediationConfig({ stuckNodeTimeout: '20m' }),
    dryRun: false,
    nodes: () => [],
    progress: testProgress,
    slots: noSlotQueue,
  });
  expect(lines.join('')).toContain('remediation.stuckNodeTimeout is shorter than the longest a verification can take');
});
