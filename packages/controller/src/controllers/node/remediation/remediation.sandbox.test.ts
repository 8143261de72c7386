// Remediation against the real API server of the sandbox, with the real karpenter.sh/v1 NodeClaim
// CRD and hand-made claims that the sandbox's Karpenter leaves alone (test/remediation/karpenter.ts
// says why these scenarios need them; wired.sandbox.test.ts is the same path with real Karpenter). The Remediator is driven directly, as the composition root
// will drive it: observe() for every node of the scenario (what the node informer delivers),
// forget() for nodes that disappeared, consider() for a node, tick() for housekeeping. Nodes are put
// into the Failed phase by writing the verification progress annotations, as the verification
// controller does. The Remediator's clock is a FakeClock set 20 minutes ahead of the API server's
// (so new nodes are past minNodeAge) and stepped to age breaker windows and hourly limits.
//
// Each scenario keeps its own ledger (a ConfigMap in a namespace of this file), so the hourly budget
// of one scenario is not spent by another; ledger.sandbox.test.ts tests the ledger itself.
//
// "No NodeClaim API" cannot be had by uninstalling the CRD (other files may use it): that scenario
// points the Remediator at a group the API server does not serve; the 404 on the collection is the
// same answer a cluster without Karpenter gives.
import { randomBytes } from 'node:crypto';
import { Writable } from 'node:stream';
import type { V1Node } from '@kubernetes/client-node';
import { k8s, simulatedNode } from '@kube-node-ready/sandbox';
import { pino } from 'pino';
import { Registry } from 'prom-client';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { core, createNamespace, sandbox } from '../../../../../../test/sandbox.js';
import { realClock } from '../../../clock.js';
import { KubeEventRecorder, type EventSink } from '../../../events/recorder.js';
import { KubeClient } from '../../../kube/client.js';
import { testConfig } from '../../../testing/builders.js';
import { FakeClock } from '../../../testing/fake-clock.js';
import { createNodeClaim, deleteNodeClaims, eventsAbout as eventsOfAnyInstance, getNodeClaim, installNodeClaimCrd, listNodeClaims } from '../../../../test/remediation/karpenter.js';
import { installationOf, newNodeVerification, statusOf, VERIFIED_CONDITION, type NodeVerification } from '../../../api/nodeverification.js';
import { NodeVerificationStore } from '../verification/store.js';
import { Outcome, Phase, type VerificationState } from '../verification/types.js';
import { parseRemediationConfig, type RemediationConfigInput } from './config.js';
import { KubeRemediationEvents } from './events.js';
import { RemediationExecutor } from './executor.js';
import { ConfigMapLedger } from './ledger.js';
import { registerRemediationMetrics } from './metrics.js';
import { Remediator } from './remediator.js';

const MIN = 60_000;
const id = randomBytes(3).toString('hex');
/** The controller instance the Remediators' Events are written as (source.host). */
const INSTANCE = `remediation-test-${id}`;
/** Every object of this file carries it (cleanup). */
const FILE_LABEL = 'knr-remediation-test';
/** Each scenario's nodes carry their own value: the Remediator sees only those (like nodeManagement.nodeSelector). */
const SCENARIO_LABEL = 'knr-remediation-scenario';
const taint = { key: `test-${id}.kube-node-ready.io/unverified`, value: 'true', effect: 'NoSchedule' as const };
const verifiedLabel = { key: `test-${id}.kube-node-ready.io/verified`, value: 'true' };
const config = testConfig({ nodeManagement: { taints: [taint], verifiedLabel, deleteFailedNodes: true } });
/** Where the scenarios keep their ledgers. */
let ledgerNamespace = '';

beforeAll(async () => {
  await installNodeClaimCrd();
  ledgerNamespace = await createNamespace('rm-ledger');
});

afterAll(async () => {
  const selector = `${FILE_LABEL}=${id}`;
  await core().deleteCollectionNode({ labelSelector: selector }).catch(() => undefined);
  await deleteNodeClaims(selector);
});

type NodeState = 'failed' | 'passed' | 'verifying' | 'failed-after-passing';

interface NodeOptions {
  name: string;
  /** A Karpenter node: NodeClaim `<pool>-<name>` in this NodePool, found by `match`. */
  karpenter?: { pool: string; match?: 'providerID' | 'ownerReference'; claimAnnotations?: Record<string, string> };
  labels?: Record<string, string>;
  annotations?: Record<string, string>;
  state?: NodeState;
}

function scenario(name: string, opts: { remediation?: RemediationConfigInput; dryRun?: boolean; nodeClaimApi?: { group: string; version: string } } = {}) {
  const group = `${name}-${id}`;
  const log = silentLog();
  const kube = new KubeClient(sandbox().kc, { qps: 100, burst: 200, clock: realClock, log: log.logger });
  const sink: EventSink = { create: (ns, e) => kube.createEvent(ns, e), bump: (ns, n, c, at) => kube.bumpEvent(ns, n, c, at) };
  const component = 'kube-node-ready-controller';
  const instance = INSTANCE;
  const events = new KubeRemediationEvents(new KubeEventRecorder({ sink, clock: realClock, log: log.logger, component, instance }));
  const clock = new FakeClock(Date.now() + 20 * MIN);
  const registry = new Registry();
  let cache: V1Node[] = [];
  /** The NodeVerifications of this scenario's nodes, as the verification controller's informer would hold them. */
  const verifications = new Map<string, NodeVerification>();
  const progress = new NodeVerificationStore({ kube, config, clock: realClock, log: log.logger, cache: verifications });
  const remediator = new Remediator({
    targets: new RemediationExecutor({ kube, clock, ...(opts.nodeClaimApi ? { api: opts.nodeClaimApi } : {}) }),
    ledger: new ConfigMapLedger({ kube, clock, namespace: ledgerNamespace, name: `${group}-remediation` }),
    clock,
    log: log.logger,
    events,
    metrics: registerRemediationMetrics(registry),
    config,
    remediation: parseRemediationConfig(opts.remediation ?? {}),
    dryRun: opts.dryRun ?? false,
    nodes: () => cache,
    progress,
    slots: { waiting: () => false, queuedMs: () => 0 },
  });

  /** What the node informer would deliver: adds/updates (observe) and deletions (forget). */
  const sync = async (): Promise<void> => {
    const items = (await core().listNode({ labelSelector: `${SCENARIO_LABEL}=${group}` })).items;
    const names = new Set(items.map((n) => n.metadata?.name));
    verifications.clear();
    for await (const page of kube.listNodeVerificationPages()) for (const nv of page.items) if (names.has(nv.metadata?.name)) verifications.set(nv.metadata?.name ?? '', nv);
    for (const gone of cache.filter((n) => !names.has(n.metadata?.name))) remediator.forget(gone);
    cache = items;
    for (const node of items) remediator.observe(node);
  };

  const s = {
    group,
    clock,
    remediator,
    log,
    async addNode(o: NodeOptions): Promise<void> {
      const providerID = o.karpenter ? `aws:///us-east-1a/i-${o.name}` : `sandbox:///${o.name}`;
      const labels = { [FILE_LABEL]: id, [SCENARIO_LABEL]: group, ...(o.karpenter ? { 'karpenter.sh/nodepool': o.karpenter.pool, 'karpenter.sh/registered': 'true' } : {}), ...o.labels };
      const body = simulatedNode({ name: o.name, labels, annotations: o.annotations ?? {}, taints: [taint], providerID });
      if (o.karpenter) {
        const match = o.karpenter.match ?? 'providerID';
        const claim = await createNodeClaim({
          name: `${o.karpenter.pool}-${o.name}`,
          pool: o.karpenter.pool,
          labels: { [FILE_LABEL]: id },
          ...(o.karpenter.claimAnnotations ? { annotations: o.karpenter.claimAnnotations } : {}),
          // Matched by owner reference: a claim whose status Karpenter has not filled in yet.
          ...(match === 'providerID' ? { status: { providerID, nodeName: o.name } } : {}),
        });
        if (match === 'ownerReference') {
          body.metadata = { ...body.metadata, ownerReferences: [{ apiVersion: 'karpenter.sh/v1', kind: 'NodeClaim', name: claim.metadata.name, uid: claim.metadata.uid }] };
        }
      }
      await core().createNode({ body });
      if (o.state) await s.setState(o.name, o.state);
    },
    /** Writes verification progress as the verification controller would: the node's NodeVerification status, and the label of a passed node. */
    async setState(node: string, state: NodeState, attempt = 6): Promise<void> {
      const live = await core().readNode({ name: node });
      const uid = live.metadata?.uid ?? '';
      const now = Date.now();
      const states: Record<NodeState, VerificationState> = {
        failed: { uid, attempt, failures: 6, phase: Phase.Failed, lastOutcome: Outcome.ChecksFailed, lastMessage: 'check failed: dns: SERVFAIL from 10.96.0.10' },
        'failed-after-passing': { uid, attempt, failures: 6, phase: Phase.Failed, lastOutcome: Outcome.ChecksFailed, lastMessage: 'check failed: dns: timeout', verifiedAt: now - 60 * MIN },
        passed: { uid, attempt, failures: 0, phase: Phase.Passed, lastOutcome: Outcome.Passed, lastMessage: 'all checks passed', verifiedAt: clock.now() },
        verifying: { uid, attempt, failures: 0, phase: Phase.Verifying },
      };
      const labels = state === 'passed' ? { [verifiedLabel.key]: verifiedLabel.value } : {};
      await core().patchNode(
        { name: node, body: { metadata: { labels } } },
        k8s.setHeaderOptions('Content-Type', k8s.PatchStrategy.MergePatch),
      );
      const nv = (await kube.getNodeVerification(node)) ?? (await kube.createNodeVerification(newNodeVerification(live, installationOf(config.nodeManagement.condition.type))));
      const condition = { type: VERIFIED_CONDITION, status: 'Unknown' as const, reason: 'Test', message: `set by the test: ${state}` };
      await kube.updateNodeVerification({ ...nv, status: statusOf(states[state], live, condition, nv, Date.now()) });
    },
    sync,
    /** One reconcile of the node, on fresh watch data. */
    async consider(node: string) {
      await sync();
      const cached = cache.find((n) => n.metadata?.name === node);
      if (!cached) throw new Error(`node ${node} is not in scenario ${group}`);
      return remediator.consider(cached);
    },
    async metric(name: 'kube_node_ready_remediations_total' | 'kube_node_ready_remediation_blocked', labels: Record<string, string>): Promise<number | undefined> {
      const m = (await registry.getMetricsAsJSON()).find((x) => x.name === name);
      return (m?.values as Array<{ labels: Record<string, string>; value: number }>).find((v) => Object.entries(labels).every(([k, val]) => v.labels[k] === val))?.value;
    },
  };
  return s;
}

async function nodeExists(name: string): Promise<boolean> {
  return core()
    .readNode({ name })
    .then((n) => !n.metadata?.deletionTimestamp)
    .catch(() => false);
}

function silentLog() {
  const lines: Array<Record<string, unknown>> = [];
  const logger = pino({ level: 'info' }, new Writable({ write: (chunk, _enc, cb) => (lines.push(JSON.parse(String(chunk)) as Record<string, unknown>), cb()) }));
  return { logger, lines };
}

const n = (prefix: string) => `rm-${prefix}-${id}`;
/** The Events this file's Remediators wrote (other installations in the shared sandbox write their own). */
const eventsAbout = (kind: 'Node' | 'NodeClaim', name: string) => eventsOfAnyInstance(kind, name, INSTANCE);
const reasons = (events: Array<{ reason: string }>) => events.map((e) => e.reason);

describe('remediation against the API server', () => {
  it('a failed Karpenter node: its NodeClaim is deleted, not the Node (found by providerID, or by ownerReference)', async () => {
    const s = scenario('karpenter');
    const [byProvider, byOwner] = [n('kp'), n('ko')];
    await s.addNode({ name: byProvider, karpenter: { pool: `a-${id}` }, state: 'failed' });
    await s.addNode({ name: byOwner, karpenter: { pool: `b-${id}`, match: 'ownerReference' }, state: 'failed' });

    const r = await s.consider(byProvider);
    expect(r).toMatchObject({ action: 'delete-nodeclaim', result: 'deleted', target: { kind: 'nodeclaim', matchedBy: 'providerID' } });
    expect(await getNodeClaim(`a-${id}-${byProvider}`)).toBeUndefined();
    expect(await nodeExists(byProvider)).toBe(true);
    expect(await s.consider(byOwner)).toMatchObject({ result: 'deleted', target: { kind: 'nodeclaim', matchedBy: 'ownerReference' } });
    expect(await getNodeClaim(`b-${id}-${byOwner}`)).toBeUndefined();
    // The Node owned by that claim is then deleted by kube-controller-manager's garbage collector (on
    // a real cluster Karpenter's finalizers hold both until the instance is gone), not by us: the only
    // deletions kube-node-ready made are the two NodeClaims (the metric below), and its Events say so.
    expect(reasons(await eventsAbout('Node', byOwner))).toEqual(['RemediationNodeClaimDeleted']);

    const onNode = await eventsAbout('Node', byProvider);
    expect(onNode).toEqual([expect.objectContaining({ type: 'Normal', reason: 'RemediationNodeClaimDeleted' })]);
    expect(onNode[0]?.message).toMatch(/^deleted NodeClaim a-\w+-rm-kp-\w+ \(matched by providerID\): Karpenter drains the node and terminates its instance; verification failed, 6 failed attempts; last: ChecksFailed: check failed: dns: SERVFAIL/);
    expect(reasons(await eventsAbout('NodeClaim', `a-${id}-${byProvider}`))).toEqual(['RemediationNodeClaimDeleted']);
    expect(await s.metric('kube_node_ready_remediations_total', { action: 'delete-nodeclaim', result: 'deleted' })).toBe(2);

    // The Node stays until Karpenter removes it: it is not acted on a second time.
    expect(await s.consider(byProvider)).toMatchObject({ decision: { kind: 'ignore', reason: 'AlreadyRemediated' } });
  });

  it('a failed plain node (no NodeClaim): the Node is deleted, and the Event says the machine may keep running', async () => {
    const s = scenario('plain');
    const name = n('plain');
    await s.addNode({ name, state: 'failed' });
    expect(await s.consider(name)).toMatchObject({ action: 'delete-node', result: 'deleted', target: { kind: 'node', why: 'no-nodeclaim' } });
    expect(await nodeExists(name)).toBe(false);
    const events = await eventsAbout('Node', name);
    expect(events).toEqual([expect.objectContaining({ type: 'Warning', reason: 'RemediationNodeDeleted' })]);
    expect(events[0]?.message).toContain('deleted the Node object (no NodeClaim matches this node): the machine itself may keep running, and be billed, unless an autoscaler or cloud controller removes it');
    await s.sync(); // the informer sees it gone: nothing left in flight
    expect(await s.metric('kube_node_ready_remediation_blocked', { reason: 'in-flight' })).toBe(0);
  });

  it('no NodeClaim API served (404 on the group): the Node is deleted', async () => {
    const s = scenario('noapi', { nodeClaimApi: { group: `absent-${id}.kube-node-ready.io`, version: 'v1' } });
    const name = n('noapi');
    // It even has a NodeClaim in the real group: the remediator, told Karpenter is elsewhere, cannot see it.
    await s.addNode({ name, karpenter: { pool: `noapi-${id}` }, state: 'failed' });
    expect(await s.consider(name)).toMatchObject({ action: 'delete-node', result: 'deleted', target: { kind: 'node', why: 'api-not-served' } });
    expect(await nodeExists(name)).toBe(false);
    expect((await eventsAbout('Node', name))[0]?.message).toContain(`the karpenter.sh/v1 NodeClaim API is not served): the machine itself may keep running`);
  });

  it('opt-out annotation, do-not-disrupt (on the Node or its NodeClaim), control-plane and verified nodes are never deleted', async () => {
    const s = scenario('guards');
    const nodes = {
      optOut: n('optout'),
      dnd: n('dnd'),
      dndClaim: n('dndclaim'),
      controlPlane: n('cp'),
      reverified: n('reverified'),
      verified: n('verified'),
    };
    const pool = (x: string) => ({ pool: `${x}-${id}` }); // one pool each: the NodePool rule stays out of it
    await s.addNode({ name: nodes.optOut, karpenter: pool('optout'), annotations: { 'kube-node-ready.io/remediation': 'disabled' }, state: 'failed' });
    await s.addNode({ name: nodes.dnd, karpenter: pool('dnd'), annotations: { 'karpenter.sh/do-not-disrupt': 'true' }, state: 'failed' });
    await s.addNode({ name: nodes.dndClaim, karpenter: { ...pool('dndclaim'), claimAnnotations: { 'karpenter.sh/do-not-disrupt': 'true' } }, state: 'failed' });
    await s.addNode({ name: nodes.controlPlane, labels: { 'node-role.kubernetes.io/control-plane': '' }, state: 'failed' });
    await s.addNode({ name: nodes.reverified, karpenter: pool('reverified'), state: 'failed-after-passing' });
    await s.addNode({ name: nodes.verified, karpenter: pool('verified'), state: 'passed' });

    for (let round = 0; round < 2; round++) for (const name of Object.values(nodes)) await s.consider(name);

    for (const name of Object.values(nodes)) expect(await nodeExists(name), name).toBe(true);
    const claims = (await listNodeClaims(`${FILE_LABEL}=${id}`)).map((c) => c.metadata.name);
    const claimed: Array<[string, string]> = [['optout', nodes.optOut], ['dnd', nodes.dnd], ['dndclaim', nodes.dndClaim], ['reverified', nodes.reverified], ['verified', nodes.verified]];
    for (const [pool, node] of claimed) expect(claims).toContain(`${pool}-${id}-${node}`);

    const skipped = async (name: string) => (await eventsAbout('Node', name)).map((e) => `${e.reason} x${e.count}: ${e.message.split(' (')[0]}`);
    expect(await skipped(nodes.optOut)).toEqual(['RemediationSkipped x1: not deleting: annotation kube-node-ready.io/remediation="disabled"']);
    expect(await skipped(nodes.dnd)).toEqual(['RemediationSkipped x1: not deleting: karpenter.sh/do-not-disrupt=true']);
    expect(await skipped(nodes.dndClaim)).toEqual([`RemediationSkipped x1: not deleting: NodeClaim dndclaim-${id}-${nodes.dndClaim} has karpenter.sh/do-not-disrupt=true`]);
    expect(await skipped(nodes.controlPlane)).toEqual(['RemediationSkipped x1: not deleting: control-plane node']);
    expect(await skipped(nodes.reverified)).toEqual(['RemediationSkipped x1: not deleting: the node passed a verification before']);
    expect(await skipped(nodes.verified)).toEqual([]); // an open, verified node is not even a candidate
    expect(reasons(await eventsAbout('NodeClaim', `optout-${id}-${nodes.optOut}`))).toEqual(['RemediationSkipped']);
    expect(await s.metric('kube_node_ready_remediations_total', { action: 'delete-nodeclaim', result: 'skipped' })).toBe(4);
    expect(await s.metric('kube_node_ready_remediations_total', { action: 'delete-node', result: 'skipped' })).toBe(1);
    expect(await s.metric('kube_node_ready_remediations_total', { action: 'delete-nodeclaim', result: 'deleted' })).toBe(0);
  });

  it('the hourly rate limit holds: the block shows in an Event and the metric, and the next hour goes on', async () => {
    // Three failed nodes out of three would also trip the NodePool rule (its own test is the storm):
    // off here, so this test sees the hourly limit alone.
    const s = scenario('hourly', { remediation: { maxInFlight: 10, maxPerHour: 2, circuitBreaker: { maxFailedPercentPerNodePool: 100 } } });
    const names = [n('h1'), n('h2'), n('h3')];
    for (const name of names) await s.addNode({ name, state: 'failed' });
    const results = [];
    for (const name of names) results.push(await s.consider(name));
    expect(results.map((r) => r.result)).toEqual(['deleted', 'deleted', 'skipped']);
    expect(results[2]).toMatchObject({ decision: { kind: 'blocked', reason: 'rate-limit' } });
    expect(await nodeExists(names[0] as string)).toBe(false);
    expect(await nodeExists(names[1] as string)).toBe(false);
    expect(await nodeExists(names[2] as string)).toBe(true);
    const blocked = await eventsAbout('Node', names[2] as string);
    expect(blocked).toEqual([expect.objectContaining({ type: 'Warning', reason: 'RemediationBlocked' })]);
    expect(blocked[0]?.message).toMatch(/^deletion held back: 2 deletions in the last hour, remediation.maxPerHour is 2 \(next one possible in 1h\)/);
    expect(await s.metric('kube_node_ready_remediation_blocked', { reason: 'rate-limit' })).toBe(1);

    await s.clock.advance(30 * MIN);
    expect((await s.consider(names[2] as string)).decision).toMatchObject({ kind: 'blocked', reason: 'rate-limit' });
    await s.clock.advance(30 * MIN);
    expect(await s.consider(names[2] as string)).toMatchObject({ result: 'deleted' });
    expect(await nodeExists(names[2] as string)).toBe(false);
  });

  it('storm: 10 of 20 new nodes fail at once; the breaker opens, holds the rest (Event, metric, log), and closes when failures stop', async () => {
    const s = scenario('storm'); // every guard at its default: maxInFlight 2, maxPerHour 5, 30% of >= 5 in 15m, 20% per NodePool
    const pool = `storm-${id}`;
    const names = Array.from({ length: 20 }, (_, i) => n(`s${String(i).padStart(2, '0')}`));
    await Promise.all(names.map((name) => s.addNode({ name, karpenter: { pool }, state: 'verifying' })));
    const claimOf = (name: string) => `${pool}-${name}`;

    // The verdicts land together; the queue takes the failed nodes as they arrive (fail, pass, fail, ...).
    const failing = names.filter((_, i) => i % 2 === 0);
    const passing = names.filter((_, i) => i % 2 === 1);
    const outcomes: Record<string, string> = {};
    for (let i = 0; i < 10; i++) {
      await s.setState(failing[i] as string, 'failed');
      const r = await s.consider(failing[i] as string);
      outcomes[failing[i] as string] = r.result === 'deleted' ? 'deleted' : `${r.decision.kind}:${'reason' in r.decision ? r.decision.reason : ''}`;
      await s.setState(passing[i] as string, 'passed');
      await s.sync();
    }
    // Two deletions before the window held 5 verdicts (F P F P F: 3 of 5 failed, 60% > 30%), then none.
    expect(Object.values(outcomes)).toEqual(['deleted', 'deleted', ...Array(8).fill('blocked:circuit-breaker')]);
    const remaining = (await listNodeClaims(`${FILE_LABEL}=${id},karpenter.sh/nodepool=${pool}`)).map((c) => c.metadata.name);
    expect(remaining).toHaveLength(18);
    for (const name of failing.slice(2)) {
      expect(remaining).toContain(claimOf(name));
      // Only the remediator's Events: once, under load, a verification Event of another test file's
      // controller was seen on one of these nodes (an isolation gap noted on issue 8); what is
      // asserted here is that the remediator wrote exactly one Event, a block.
      const events = (await eventsAbout('Node', name)).filter((e) => e.reason.startsWith('Remediation'));
      expect(events).toEqual([expect.objectContaining({ type: 'Warning', reason: 'RemediationBlocked' })]);
      expect(events[0]?.message).toMatch(/^deletion paused: circuit breaker open: \d+ of the \d+ verifications finished in the last 15m failed/);
      expect(reasons(await eventsAbout('NodeClaim', claimOf(name)))).toEqual(['RemediationBlocked']);
    }
    expect(await s.metric('kube_node_ready_remediation_blocked', { reason: 'circuit-breaker' })).toBe(1);
    expect(s.log.lines.filter((l) => l.level === 40 && l.msg === 'remediation paused: circuit breaker open; no failed node is deleted until failures drop')).toHaveLength(1);
    await s.remediator.tick();
    expect(await s.metric('kube_node_ready_remediation_blocked', { reason: 'circuit-breaker' })).toBe(1);

    // Karpenter replaces the two deleted nodes (their Nodes go away).
    for (const name of failing.slice(0, 2)) await core().deleteNode({ name });
    // The fault is fixed and time passes: the storm's verdicts age out of the window, the held nodes
    // are verified again (kube-node-ready verify): seven pass, one fails for good (a bad machine).
    await s.clock.advance(16 * MIN);
    const bad = failing[9] as string;
    for (const name of failing.slice(2, 9)) await s.setState(name, 'passed', 7);
    await s.setState(bad, 'failed', 7);
    await s.sync();
    await s.remediator.tick();
    expect(await s.metric('kube_node_ready_remediation_blocked', { reason: 'circuit-breaker' })).toBe(0);
    expect(s.log.lines.some((l) => l.msg === 'remediation resumed: circuit breaker closed')).toBe(true);
    expect(await s.consider(bad)).toMatchObject({ result: 'deleted', target: { kind: 'nodeclaim' } });
    expect(await getNodeClaim(claimOf(bad))).toBeUndefined();
    expect(await s.metric('kube_node_ready_remediations_total', { action: 'delete-nodeclaim', result: 'deleted' })).toBe(3);
  });

  it('dry run deletes nothing and reports every decision, once', async () => {
    // NodePool rule off: three failed plain nodes of three would trip it and hide the hourly limit.
    const s = scenario('dryrun', { dryRun: true, remediation: { maxPerHour: 2, circuitBreaker: { maxFailedPercentPerNodePool: 100 } } });
    const [k, p1, p2, out] = [n('dk'), n('dp1'), n('dp2'), n('dout')];
    await s.addNode({ name: k, karpenter: { pool: `dry-${id}` }, state: 'failed' });
    await s.addNode({ name: p1, state: 'failed' });
    await s.addNode({ name: p2, state: 'failed' });
    await s.addNode({ name: out, annotations: { 'kube-node-ready.io/remediation': 'disabled' }, state: 'failed' });
    for (let round = 0; round < 2; round++) for (const name of [k, p1, p2, out]) await s.consider(name);

    for (const name of [k, p1, p2, out]) expect(await nodeExists(name)).toBe(true);
    expect(await getNodeClaim(`dry-${id}-${k}`)).toBeDefined();
    const report = async (name: string) => (await eventsAbout('Node', name)).map((e) => `${e.reason} x${e.count}: ${e.message.split(' (')[0]}`);
    expect(await report(k)).toEqual([`RemediationDryRun x1: dry run: would delete NodeClaim dry-${id}-${k}`]);
    expect(reasons(await eventsAbout('NodeClaim', `dry-${id}-${k}`))).toEqual(['RemediationDryRun']);
    expect(await report(p1)).toEqual(['RemediationDryRun x1: dry run: would delete the Node object']);
    expect(await report(p2)).toEqual(['RemediationBlocked x1: deletion held back: 2 deletions in the last hour, remediation.maxPerHour is 2']);
    expect(await report(out)).toEqual(['RemediationSkipped x1: not deleting: annotation kube-node-ready.io/remediation="disabled"']);
    expect(await s.metric('kube_node_ready_remediations_total', { action: 'delete-nodeclaim', result: 'dry-run' })).toBe(1);
    expect(await s.metric('kube_node_ready_remediations_total', { action: 'delete-node', result: 'dry-run' })).toBe(1);
    expect(await s.metric('kube_node_ready_remediations_total', { action: 'delete-node', result: 'skipped' })).toBe(2);
    expect(await s.metric('kube_node_ready_remediations_total', { action: 'delete-node', result: 'deleted' })).toBe(0);
  });

  it('a node that keeps its taint with no worker ever run, for longer than stuckNodeTimeout, is deleted as failed', async () => {
    const s = scenario('stuck');
    const name = n('stuck');
    await s.addNode({ name }); // tainted, no progress at all: the controller never got a worker onto it
    const early = await s.consider(name);
    expect(early).toMatchObject({ decision: { kind: 'ignore', reason: 'NotFailed' } });
    expect(early.requeueAfterMs).toBeGreaterThan(35 * MIN); // created about 20 minutes ago on the remediator's clock
    await s.clock.advance(41 * MIN);
    expect(await s.consider(name)).toMatchObject({ decision: { trigger: 'stuck' }, result: 'deleted' });
    expect(await nodeExists(name)).toBe(false);
    // About 1h1m: the API server's creation time (whole seconds) trails the fake clock's start by
    // however long the node took to create, so on a slow machine it reads 1h59s, say.
    expect((await eventsAbout('Node', name))[0]?.message).toMatch(/stuck: the node kept its verification taint for 1h(1m)?(\d+s)? without a worker ever running on it \(remediation.stuckNodeTimeout 1h\)/);
  });
});
