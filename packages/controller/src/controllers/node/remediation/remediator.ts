import type { V1Node } from '@kubernetes/client-node';
import type { Logger } from '@kube-node-ready/core';
import { errorMessage, formatDuration } from '@kube-node-ready/core';
import type { Clock } from '../../../clock.js';
import type { ControllerConfig } from '../../../config/schema.js';
import { EventType } from '../../../events/reasons.js';
import { messageOf } from '../../../kube/errors.js';
import { label, nodeName, nodeUid } from '../../../kube/objects.js';
import { hasVerificationTaint, isVerified } from '../verification/decide.js';
import type { StateRead } from '../verification/store.js';
import { Outcome, Phase } from '../verification/types.js';
import { CircuitBreaker, type PoolCount } from './breaker.js';
import type { RemediationConfig } from './config.js';
import { decide, isFailedNode, longestVerificationMs, nodePoolOf, type BreakerVerdict, type Decision, type LimitVerdict, type StuckClock, type Trigger } from './decide.js';
import type { RemediationEvents } from './events.js';
import type { NodeClaimRef, RemediationTargets, Target } from './executor.js';
import type { LedgerEntry, RemediationLedger } from './ledger.js';
import type { RemediationMetrics } from './metrics.js';
import { BlockReason, KarpenterApi, RemediationReason, type RemediationAction, type RemediationResult } from './names.js';
import { RemediationLimiter } from './rate-limit.js';

/**
 * Remediation of failed nodes: decides with decide() (pure, the documented guard order), then
 * deletes the node's Karpenter NodeClaim, or the Node, through the executor. Every decision other
 * than "not a failed node" is reported once per node and decision: an Event on the Node (and on its
 * NodeClaim), a count in kube_node_ready_remediations_total{action,result} and a log line; blocks
 * also set kube_node_ready_remediation_blocked{reason}.
 *
 * A deletion is taken in five steps, so that nothing is deleted on stale information:
 *   1. decide on the cached node; reserve an in-flight slot and an hourly charge (synchronously,
 *      before any await, so parallel calls cannot overshoot the limits);
 *   2. read the node live and decide again on it;
 *   3. look the NodeClaim up afresh (never from the cache);
 *   4. record the deletion in the ledger (ledger.ts: a ConfigMap, so the hourly budget survives
 *      leader changes); a deletion that cannot be recorded is not issued;
 *   5. delete it with a UID precondition (the Node: UID and resourceVersion as read in step 2).
 * A failed step gives the slot and the charge back.
 *
 * The ledger is read when the remediator first acts as leader (tick() or consider()): its
 * deletions of the last hour are charged to the hourly limit, and those whose node still exists
 * count as in flight and are never acted on again. Until it has been read, nothing is deleted.
 *
 * Feed it with observe(node) for every node add/update (it records finished verifications for the
 * circuit breaker), forget(node) when a node is deleted, consider(node) for the nodes observe()
 * flags (a work queue; consider returns when to look again), and tick() every few seconds.
 */

export interface RemediatorOptions {
  /** Finds a node's NodeClaim and deletes it, or the Node (executor.ts RemediationExecutor). */
  targets: RemediationTargets;
  /** The ledger of deletions issued (ledger.ts ConfigMapLedger: ConfigMap `<leaseName>-remediation` in worker.namespace). */
  ledger: RemediationLedger;
  clock: Clock;
  log: Logger;
  events: RemediationEvents;
  metrics: RemediationMetrics;
  /** The controller configuration: verification taints, verified label, retries and timeouts. */
  config: ControllerConfig;
  /** nodeManagement.remediation. */
  remediation: RemediationConfig;
  /** The controller-wide dry run; remediation.dryRun is honoured as well. */
  dryRun: boolean;
  /** Every node the controller watches (the informer cache), for NodePool shares and deletions in progress. */
  nodes: () => readonly V1Node[];
  /** Where verification progress is read (the verification controller's ProgressStore). */
  progress: { read(node: V1Node): StateRead };
  /** The verification slots (verification/slots.ts): time a node waited for one is not stuck time. */
  slots: Pick<StuckClock, 'waiting' | 'queuedMs'>;
}

export type ConsiderDecision = Decision | { kind: 'ignore'; reason: 'AlreadyRemediated' | 'Busy' | 'Gone' };

export interface ConsiderResult {
  decision: ConsiderDecision;
  /** What was (or would be) deleted, when it came to that. */
  action?: RemediationAction;
  /** How it ended, for decisions that are reported. */
  result?: RemediationResult;
  target?: Target;
  /** Look at the node again after this long (undefined: on the next change or resync). */
  requeueAfterMs?: number;
  /** An Event and a metric were emitted for this call (false for silent and repeated decisions). */
  reported: boolean;
}

/** Re-read-and-decide rounds when the node or its NodeClaim changes under a delete. */
const MAX_ROUNDS = 3;
/** Retry after an API error. */
export const ERROR_RETRY_MS = 30_000;
/** A node held back because the ledger cannot be read or written is looked at again after this long. */
export const LEDGER_RETRY_MS = 30_000;
/** An unreadable ledger is read again at most this often (tick() runs every few seconds). */
export const LEDGER_RELOAD_MS = 5_000;

type LedgerState = { kind: 'unread' } | { kind: 'loaded' } | { kind: 'failed'; message: string; at: number };

export class Remediator {
  private readonly targets: RemediationTargets;
  private readonly ledger: RemediationLedger;
  private ledgerState: LedgerState = { kind: 'unread' };
  private ledgerLoading: Promise<void> | undefined;
  /** Node UID -> why its deletion could not be recorded (the `ledger` gauge is 1 while any). */
  private readonly ledgerWriteFailures = new Map<string, string>();
  private readonly breaker: CircuitBreaker;
  private readonly limiter: RemediationLimiter;
  private readonly dryRun: boolean;
  /** Node UID -> key of the last verification recorded for the breaker. */
  private readonly seen = new Map<string, string>();
  /** Node UID -> the decision last reported, so repeats are not reported again. */
  private readonly reported = new Map<string, string>();
  /** Nodes whose NodeClaim or Node this remediator deleted: never acted on again. */
  private readonly remediated = new Map<string, { target: string; at: number }>();
  private readonly busy = new Set<string>();
  private breakerWindow: BreakerVerdict = { open: false };
  private readonly openPools = new Map<string, string>();
  private breakerWasOpen = false;
  /** Failed nodes being deleted by others, as last counted (for the in-flight gauge). */
  private external = 0;
  private readonly readState: (node: V1Node) => StateRead;
  /** When this replica started leading (startedLeading()); the stuck-node clock counts from there at the earliest. */
  private leadingSince: number | undefined;

  constructor(private readonly opts: RemediatorOptions) {
    this.readState = (node) => opts.progress.read(node);
    this.targets = opts.targets;
    this.ledger = opts.ledger;
    this.breaker = new CircuitBreaker(opts.remediation.circuitBreaker, opts.clock);
    this.limiter = new RemediationLimiter(
      { maxInFlight: opts.remediation.maxInFlight, maxPerHour: opts.remediation.maxPerHour, inFlightTimeoutMs: opts.remediation.inFlightTimeout },
      opts.clock,
    );
    this.dryRun = opts.dryRun || opts.remediation.dryRun;
    const longest = longestVerificationMs(opts.config);
    if (opts.remediation.stuckNodeTimeout > 0 && opts.remediation.stuckNodeTimeout < longest) {
      opts.log.warn(
        { stuckNodeTimeout: formatDuration(opts.remediation.stuckNodeTimeout), longestVerification: formatDuration(longest) },
        'remediation.stuckNodeTimeout is shorter than the longest a verification can take: a node in backoff between attempts may be treated as stuck',
      );
    }
    opts.log.info({ dryRun: this.dryRun, ...summary(opts.remediation) }, 'remediation of failed nodes is on');
  }

  /** This replica leads from now on: stuck-node remediation first gives it stuckNodeTimeout to act itself. */
  startedLeading(): void {
    this.leadingSince = this.opts.clock.now();
  }

  // -- Feeding -------------------------------------------------------------------------------

  /**
   * The API server refused a worker pod for this node (admission, quota, Pod Security). Not the
   * node's fault, but a sign the cluster cannot verify nodes: it counts as one failure for the
   * circuit breaker's window (once per node), so refusals on many nodes stop deletions (a node that
   * later fails on its own, or a stuck one, is then held back) instead of replacing every node.
   */
  podRefused(node: V1Node): void {
    this.breaker.record(`${nodeUid(node)}/refused`, true);
  }

  /**
   * A node was added or updated. Records a finished verification (the node reached Passed or
   * Failed) for the circuit breaker, once per node and attempt. A node first seen already Failed
   * (start-up, new leader) counts as failing now: the safe side during a storm. Returns whether
   * consider() should look at the node (failed, possibly stuck later, or deleted by us).
   */
  observe(node: V1Node): boolean {
    const uid = nodeUid(node);
    const read = this.readState(node);
    const state = read.kind === 'ok' ? read.state : undefined;
    if (state && (state.phase === Phase.Failed || state.phase === Phase.Passed)) {
      const key = `${uid}/${state.attempt}/${state.phase}`;
      if (this.seen.get(uid) !== key) {
        this.seen.set(uid, key);
        const now = this.opts.clock.now();
        const at = state.phase === Phase.Passed ? Math.min(now, state.verifiedAt ?? now) : now;
        this.breaker.record(key, state.phase === Phase.Failed, at);
      }
    }
    // An inconclusive attempt (a fault most recent nodes share) is no verdict on the node, but the
    // cluster cannot verify nodes: one failure per node for the breaker, as a refused worker pod.
    if (state?.phase === Phase.Backoff && state.lastOutcome === Outcome.ClusterWide) this.breaker.record(`${uid}/cluster-wide`, true);
    if (state?.phase === Phase.Failed || this.remediated.has(uid)) return true;
    return this.opts.remediation.stuckNodeTimeout > 0 && hasVerificationTaint(node, this.opts.config) && !isVerified(node, this.opts.config);
  }

  /** The node is gone: a deletion in flight for it is complete. */
  forget(node: V1Node): void {
    const uid = nodeUid(node);
    const done = this.remediated.get(uid);
    if (this.limiter.done(uid) || done) {
      this.opts.log.info(
        { node: nodeName(node), target: done?.target, after: done ? formatDuration(this.opts.clock.now() - done.at) : undefined },
        'remediated node is gone',
      );
    }
    this.remediated.delete(uid);
    this.reported.delete(uid);
    this.seen.delete(uid);
    this.ledgerWriteFailures.delete(uid);
    this.updateGauges();
  }

  /**
   * Housekeeping (every few seconds, leader only): reads the ledger if it has not been read yet
   * (or could not be); deletions in flight for longer than inFlightTimeout are
   * reported as stalled and stop counting; the circuit breaker is re-evaluated for every NodePool,
   * so it closes (and the gauge drops) even when no node is being considered.
   */
  async tick(): Promise<void> {
    await this.ensureLedger();
    for (const stalled of this.limiter.expire()) {
      const message = `${stalled.target} was deleted ${formatDuration(this.opts.clock.now() - stalled.at)} ago and the node still exists; it no longer counts as in flight (remediation.inFlightTimeout), and it will not be deleted again`;
      this.opts.log.warn({ node: stalled.node, target: stalled.target }, message);
      await this.opts.events.node(stalled.node, EventType.Warning, RemediationReason.Stalled, message);
    }
    const now = this.opts.clock.now();
    this.external = this.externalInFlight(now);
    this.breakerWindow = this.breaker.checkWindow(now);
    const counts = this.poolCounts(now);
    for (const pool of [...this.openPools.keys()]) if (!counts.has(pool)) this.openPools.delete(pool);
    for (const [pool, count] of counts) this.notePool(pool, this.breaker.checkPool(pool, count));
    this.updateGauges();
  }

  // -- Deciding and acting ---------------------------------------------------------------------

  async consider(cached: V1Node): Promise<ConsiderResult> {
    const uid = nodeUid(cached);
    if (this.busy.has(uid)) return { decision: { kind: 'ignore', reason: 'Busy' }, reported: false };
    this.busy.add(uid);
    try {
      this.observe(cached);
      await this.ensureLedger();
      if (this.remediated.has(uid)) return { decision: { kind: 'ignore', reason: 'AlreadyRemediated' }, reported: false };
      const result = await this.considerRounds(cached);
      if (!(result.decision.kind === 'blocked' && result.decision.reason === 'ledger') && this.ledgerWriteFailures.delete(uid)) this.updateGauges();
      return result;
    } finally {
      this.busy.delete(uid);
    }
  }

  private async considerRounds(cached: V1Node): Promise<ConsiderResult> {
    const uid = nodeUid(cached);
    const name = nodeName(cached);
    const log = this.opts.log.child({ node: name });
    let node = cached;
    for (let round = 0; round < MAX_ROUNDS; round++) {
      // Most nodes stop here, without a lookup.
      const first = this.decideNow(node);
      if (first.kind === 'ignore') return this.handle(node, first, undefined, log);
      // A candidate: decide again knowing its NodeClaim (the cached list; best effort).
      const target = await this.lookup(node, log);
      const decision = this.decideNow(node, target);
      if (decision.kind !== 'delete') return this.handle(node, decision, target, log);

      // 1. Reserve, in the same synchronous step as the decision.
      this.limiter.reserve({ uid, node: name, target: 'pending lookup' });
      this.updateGauges();
      const outcome = await this.deleteOnce(node, decision, log).catch((err: unknown) => ({ kind: 'error' as const, err }));
      if (outcome.kind === 'deleted') return outcome.result;
      this.limiter.release(uid);
      this.updateGauges();
      switch (outcome.kind) {
        case 'error':
          return this.reportError(node, decision.trigger, outcome.err, target, log);
        case 'decided':
          return this.handle(outcome.node, outcome.decision, outcome.target, log);
        case 'gone':
          return { decision: { kind: 'ignore', reason: 'Gone' }, reported: false };
        case 'again':
          node = outcome.node;
      }
    }
    log.info('the node kept changing under remediation; trying again later');
    return { decision: { kind: 'ignore', reason: 'Busy' }, requeueAfterMs: ERROR_RETRY_MS, reported: false };
  }

  /**
   * Steps 2-4 of a deletion. 'decided': the live node or the fresh lookup changed the decision;
   * 'again': the object changed under the delete (precondition failed), decide once more.
   */
  private async deleteOnce(
    cached: V1Node,
    decision: Extract<Decision, { kind: 'delete' }>,
    log: Logger,
  ): Promise<
    | { kind: 'deleted'; result: ConsiderResult }
    | { kind: 'decided'; node: V1Node; decision: Decision; target: Target }
    | { kind: 'again'; node: V1Node }
    | { kind: 'gone' }
  > {
    const uid = nodeUid(cached);
    // 2. The node as it is now.
    const fresh = await this.targets.getNode(nodeName(cached));
    if (!fresh || nodeUid(fresh) !== uid) return { kind: 'gone' };
    // 3. Its NodeClaim, looked up afresh; decided again on both (our reservation not held against it).
    const target = await this.targets.find(fresh, { fresh: true });
    const again = this.decideNow(fresh, target, uid);
    if (again.kind !== 'delete') return { kind: 'decided', node: fresh, decision: again, target };
    if (target.kind === 'ambiguous') return { kind: 'decided', node: fresh, decision: again, target }; // decide() skips it; kept for the type

    // 4. Record it in the ledger first: no record, no deletion.
    const what = target.kind === 'nodeclaim' ? `NodeClaim ${target.claim.name}` : `Node ${nodeName(fresh)}`;
    this.limiter.describe(uid, what);
    const recorded = await this.record({ uid, node: nodeName(fresh), target: what, at: this.opts.clock.now() });
    if (recorded.kind === 'full') {
      // Deletions recorded by another replica fill the hour: the limiter knows them now, and the
      // next round reports the hourly limit.
      log.info({ ledger: this.ledger.where }, 'the remediation ledger holds remediation.maxPerHour deletions of the last hour; deciding again');
      return { kind: 'again', node: fresh };
    }
    if (recorded.kind === 'failed') {
      this.ledgerWriteFailures.set(uid, recorded.message);
      const blocked: Decision = {
        kind: 'blocked',
        reason: 'ledger',
        trigger: again.trigger,
        message: `deletion held back: it could not be recorded in the remediation ledger (${recorded.message}); nothing is deleted without a record, trying again in ${formatDuration(LEDGER_RETRY_MS)} (${again.message})`,
        requeueAfterMs: LEDGER_RETRY_MS,
      };
      return { kind: 'decided', node: fresh, decision: blocked, target };
    }

    // 5. Delete, guarded by UID (and, for the Node, the resourceVersion just read). If the call
    //    fails, whether it happened is unknown: the record stays (the ledger may over-count, never under-count).
    const result = target.kind === 'nodeclaim' ? await this.targets.deleteNodeClaim(target.claim) : await this.targets.deleteNode(fresh);
    if (result === 'changed') {
      log.info({ target: what }, 'the object changed before the delete (precondition failed); deciding again');
      await this.unrecord(uid, log);
      return { kind: 'again', node: fresh };
    }
    if (result === 'gone') {
      // The NodeClaim vanished between lookup and delete: look again. The Node vanished: done.
      await this.unrecord(uid, log);
      return target.kind === 'nodeclaim' ? { kind: 'again', node: fresh } : { kind: 'gone' };
    }
    this.remediated.set(uid, { target: what, at: this.opts.clock.now() });
    const message =
      target.kind === 'nodeclaim'
        ? `deleted NodeClaim ${target.claim.name} (matched by ${target.matchedBy}): Karpenter drains the node and terminates its instance; ${again.message}`
        : `deleted the Node object (${target.why === 'api-not-served' ? `the ${KarpenterApi.Group}/${KarpenterApi.Version} NodeClaim API is not served` : 'no NodeClaim matches this node'}): the machine itself may keep running, and be billed, unless an autoscaler or cloud controller removes it; ${again.message}`;
    return {
      kind: 'deleted',
      result: await this.report(fresh, {
        key: 'deleted',
        action: actionOf(target),
        result: 'deleted',
        type: target.kind === 'nodeclaim' ? EventType.Normal : EventType.Warning,
        reason: target.kind === 'nodeclaim' ? RemediationReason.NodeClaimDeleted : RemediationReason.NodeDeleted,
        message,
        decision: again,
        target,
        log,
        level: 'info',
        always: true,
      }),
    };
  }

  /** Every decision but delete: silent, reported once, or (dry run) charged and reported once. */
  private async handle(node: V1Node, decision: Decision, target: Target | undefined, log: Logger): Promise<ConsiderResult> {
    switch (decision.kind) {
      case 'ignore':
        return { decision, ...(decision.requeueAfterMs !== undefined ? { requeueAfterMs: decision.requeueAfterMs } : {}), reported: false };
      case 'skip':
      case 'blocked':
        return this.reportHeldBack(node, decision, target, log);
      case 'dry-run':
        this.limiter.charge(nodeUid(node));
        this.updateGauges();
        return this.reportDryRun(node, decision, target, log);
      case 'delete':
        throw new Error('handle() is not for deletions');
    }
  }

  /** decide() with the breaker and limits of this moment. `self`: a node holding a reservation. */
  private decideNow(node: V1Node, target?: Target, self?: string): Decision {
    const now = this.opts.clock.now();
    return decide(node, now, {
      // A Remediator exists only while remediation is on (controllers.ts builds it for deleteFailedNodes).
      enabled: true,
      dryRun: this.dryRun,
      config: this.opts.config,
      remediation: this.opts.remediation,
      readState: this.readState,
      stuckClock: this.stuckClock,
      ...(target ? { target } : {}),
      breaker: () => this.checkBreaker(node, now),
      limits: () => this.checkLimits(now, self ?? nodeUid(node)),
    });
  }

  private checkBreaker(node: V1Node, now: number): BreakerVerdict {
    const pool = nodePoolOf(node);
    const count = this.poolCounts(now, pool).get(pool) ?? { nodes: 0, failed: 0 };
    this.breakerWindow = this.breaker.checkWindow(now);
    const poolVerdict = this.breaker.checkPool(pool, count);
    this.notePool(pool, poolVerdict);
    this.updateGauges();
    return this.breakerWindow.open ? this.breakerWindow : poolVerdict;
  }

  private checkLimits(now: number, self: string): LimitVerdict {
    this.external = this.externalInFlight(now);
    const ledger = this.ledgerVerdict();
    if (ledger) return ledger;
    return this.limiter.check({ external: this.external, self });
  }

  // -- The ledger ----------------------------------------------------------------------------

  /** Blocked while the ledger has not been read: the hourly budget is never assumed empty. */
  private ledgerVerdict(): LimitVerdict | undefined {
    const state = this.ledgerState;
    if (state.kind === 'loaded') return undefined;
    const message =
      state.kind === 'failed'
        ? `the remediation ledger cannot be read (${state.message}); remediation stays paused until it can be, rather than assume no deletions in the last hour`
        : `the remediation ledger (${this.ledger.where}) has not been read yet`;
    return { ok: false, reason: 'ledger', message, retryAfterMs: LEDGER_RETRY_MS };
  }

  /** Reads the ledger unless it was read already (or a read failed less than LEDGER_RELOAD_MS ago). Never throws. */
  private ensureLedger(): Promise<void> {
    const state = this.ledgerState;
    if (state.kind === 'loaded') return Promise.resolve();
    if (state.kind === 'failed' && this.opts.clock.now() - state.at < LEDGER_RELOAD_MS) return Promise.resolve();
    this.ledgerLoading ??= this.loadLedger().finally(() => (this.ledgerLoading = undefined));
    return this.ledgerLoading;
  }

  private async loadLedger(): Promise<void> {
    const was = this.ledgerState;
    try {
      const entries = await this.ledger.load();
      const inFlight = this.absorb(entries, { fromLoad: true });
      this.ledgerState = { kind: 'loaded' };
      this.opts.log.info(
        { ledger: this.ledger.where, deletionsLastHour: entries.length, inFlight, maxPerHour: this.opts.remediation.maxPerHour },
        was.kind === 'failed' ? 'remediation ledger read: remediation resumes' : 'remediation ledger read',
      );
    } catch (err) {
      const message = errorMessage(err);
      if (was.kind !== 'failed' || was.message !== message) {
        this.opts.log.error({ ledger: this.ledger.where, err: message }, 'remediation paused: the remediation ledger cannot be read; nothing is deleted until it can be');
      }
      this.ledgerState = { kind: 'failed', message, at: this.opts.clock.now() };
    }
    this.updateGauges();
  }

  /**
   * Takes the ledger's deletions into the limiter (hourly charges). On the first read, those whose
   * node still exists also count as in flight and are remembered as remediated (never acted on
   * again). Returns how many are in flight.
   */
  private absorb(entries: readonly LedgerEntry[], opts: { fromLoad: boolean }): number {
    const present = opts.fromLoad ? new Set(this.opts.nodes().map(nodeUid)) : new Set<string>();
    let inFlight = 0;
    for (const entry of entries) {
      const exists = present.has(entry.uid);
      this.limiter.restore(entry, { inFlight: exists });
      if (exists) {
        inFlight++;
        if (!this.remediated.has(entry.uid)) this.remediated.set(entry.uid, { target: entry.target, at: entry.at });
      }
    }
    return inFlight;
  }

  /** Step 4: 'full' when other replicas' deletions fill the hour; 'failed' when it cannot be written. */
  private async record(entry: LedgerEntry): Promise<{ kind: 'ok' } | { kind: 'full' } | { kind: 'failed'; message: string }> {
    try {
      const result = await this.ledger.record(entry, this.opts.remediation.maxPerHour);
      this.ledgerWriteFailures.clear();
      this.absorb(result.entries, { fromLoad: false });
      this.updateGauges();
      return result.ok ? { kind: 'ok' } : { kind: 'full' };
    } catch (err) {
      return { kind: 'failed', message: errorMessage(err) };
    }
  }

  /** A recorded deletion that was certainly not issued (precondition failed, object gone). Best effort. */
  private async unrecord(uid: string, log: Logger): Promise<void> {
    try {
      await this.ledger.remove(uid);
    } catch (err) {
      log.warn({ ledger: this.ledger.where, err: errorMessage(err) }, 'could not take a deletion that was not issued out of the remediation ledger; it counts against the hourly budget until it is an hour old');
    }
  }

  /** Failed nodes being deleted that this remediator did not delete (another leader, Karpenter, a person). */
  private externalInFlight(now: number): number {
    let n = 0;
    for (const node of this.opts.nodes()) {
      if (!node.metadata?.deletionTimestamp || this.limiter.isInFlight(nodeUid(node))) continue;
      if (isFailedNode(node, now, this.failedCtx)) n++;
    }
    return n;
  }

  /** Nodes and failed (or stuck) nodes per NodePool; only `only` when given. */
  private poolCounts(now: number, only?: string): Map<string, PoolCount> {
    const counts = new Map<string, PoolCount>();
    for (const node of this.opts.nodes()) {
      const pool = nodePoolOf(node);
      if (only !== undefined && pool !== only) continue;
      let c = counts.get(pool);
      if (!c) counts.set(pool, (c = { nodes: 0, failed: 0 }));
      c.nodes++;
      if (isFailedNode(node, now, this.failedCtx)) c.failed++;
    }
    return counts;
  }

  private get failedCtx(): Parameters<typeof isFailedNode>[2] {
    return { config: this.opts.config, remediation: this.opts.remediation, readState: this.readState, stuckClock: this.stuckClock };
  }

  private get stuckClock(): StuckClock {
    const slots = this.opts.slots;
    return {
      leadingSince: this.leadingSince,
      waiting: (node) => slots.waiting(node),
      queuedMs: (node) => slots.queuedMs(node),
    };
  }

  private notePool(pool: string, verdict: BreakerVerdict): void {
    if (verdict.open) this.openPools.set(pool, verdict.message);
    else this.openPools.delete(pool);
  }

  private updateGauges(): void {
    const open = this.breakerWindow.open || this.openPools.size > 0;
    if (open !== this.breakerWasOpen) {
      this.breakerWasOpen = open;
      const reasons = [...(this.breakerWindow.open ? [this.breakerWindow.message] : []), ...this.openPools.values()];
      if (open) this.opts.log.warn({ reasons }, 'remediation paused: circuit breaker open; no failed node is deleted until failures drop');
      else this.opts.log.info('remediation resumed: circuit breaker closed');
    }
    const values: Record<BlockReason, boolean> = {
      'circuit-breaker': open,
      'in-flight': this.limiter.inFlightCount(this.external) >= this.opts.remediation.maxInFlight,
      'rate-limit': this.limiter.hourlyCount() >= this.opts.remediation.maxPerHour,
      ledger: this.ledgerState.kind === 'failed' || this.ledgerWriteFailures.size > 0,
    };
    for (const reason of BlockReason) this.opts.metrics.remediationBlocked.set({ reason }, values[reason] ? 1 : 0);
  }

  // -- Reporting -------------------------------------------------------------------------------

  private async reportHeldBack(node: V1Node, decision: Extract<Decision, { kind: 'skip' | 'blocked' }>, target: Target | undefined, log: Logger): Promise<ConsiderResult> {
    const key = `${decision.kind}:${decision.reason}`;
    const requeue = decision.requeueAfterMs !== undefined ? { requeueAfterMs: decision.requeueAfterMs } : {};
    if (this.reported.get(nodeUid(node)) === key) return { decision, result: 'skipped', ...requeue, reported: false };
    const result = await this.report(node, {
      key,
      action: target ? actionOf(target) : guessAction(node),
      result: 'skipped',
      type: decision.kind === 'blocked' || decision.reason === 'AmbiguousNodeClaim' ? EventType.Warning : EventType.Normal,
      reason: decision.kind === 'blocked' ? RemediationReason.Blocked : RemediationReason.Skipped,
      message: decision.message,
      decision,
      ...(target ? { target } : {}),
      log,
      level: decision.kind === 'blocked' || decision.reason === 'AmbiguousNodeClaim' ? 'warn' : 'info',
    });
    return { ...result, ...requeue };
  }

  private async reportDryRun(node: V1Node, decision: Extract<Decision, { kind: 'dry-run' }>, target: Target | undefined, log: Logger): Promise<ConsiderResult> {
    if (this.reported.get(nodeUid(node)) === 'dry-run') return { decision, result: 'dry-run', reported: false };
    const what = !target
      ? 'its NodeClaim, or the Node'
      : target.kind === 'nodeclaim'
        ? `NodeClaim ${target.claim.name} (matched by ${target.matchedBy})`
        : target.kind === 'node'
          ? `the Node object (${target.why === 'api-not-served' ? 'NodeClaim API not served' : 'no NodeClaim'}; the machine may keep running)`
          : `nothing (${target.claims.length} NodeClaims match: ambiguous)`;
    return this.report(node, {
      key: 'dry-run',
      action: target ? actionOf(target) : guessAction(node),
      result: 'dry-run',
      type: EventType.Normal,
      reason: RemediationReason.DryRun,
      message: decision.message.replace(/^dry run: would delete the node/, `dry run: would delete ${what}`),
      decision,
      ...(target ? { target } : {}),
      log,
      level: 'info',
    });
  }

  private async reportError(node: V1Node, trigger: Trigger, err: unknown, target: Target | undefined, log: Logger): Promise<ConsiderResult> {
    const message = `remediation failed, retrying in ${formatDuration(ERROR_RETRY_MS)}: ${messageOf(err)}`;
    const result = await this.report(node, {
      key: 'error',
      action: target && target.kind !== 'ambiguous' ? actionOf(target) : guessAction(node),
      result: 'error',
      type: EventType.Warning,
      reason: RemediationReason.Failed,
      message,
      decision: { kind: 'delete', trigger, message },
      log,
      level: 'error',
      always: true,
    });
    return { ...result, requeueAfterMs: ERROR_RETRY_MS };
  }

  private async report(
    node: V1Node,
    r: {
      key: string;
      action: RemediationAction;
      result: RemediationResult;
      type: EventType;
      reason: RemediationReason;
      message: string;
      decision: ConsiderDecision;
      target?: Target;
      log: Logger;
      level?: 'info' | 'warn' | 'error';
      always?: boolean;
    },
  ): Promise<ConsiderResult> {
    const uid = nodeUid(node);
    const out: ConsiderResult = { decision: r.decision, action: r.action, result: r.result, ...(r.target ? { target: r.target } : {}), reported: false };
    if (!r.always && this.reported.get(uid) === r.key) return out;
    this.reported.set(uid, r.key);
    this.opts.metrics.remediationsTotal.inc({ action: r.action, result: r.result });
    r.log[r.level ?? 'info']({ action: r.action, result: r.result, reason: r.reason, ...(r.target?.kind === 'nodeclaim' ? { nodeClaim: r.target.claim.name } : {}) }, r.message);
    await this.opts.events.node(nodeName(node), r.type, r.reason, r.message);
    const claim: NodeClaimRef | undefined = r.target?.kind === 'nodeclaim' ? r.target.claim : undefined;
    if (claim) await this.opts.events.nodeClaim(claim, r.type, r.reason, `node ${nodeName(node)}: ${r.message}`);
    return { ...out, reported: true };
  }

  /** Best-effort lookup for reporting (cached list); undefined when it fails. */
  private async lookup(node: V1Node, log: Logger): Promise<Target | undefined> {
    try {
      return await this.targets.find(node);
    } catch (err) {
      log.debug({ err: errorMessage(err) }, 'NodeClaim lookup for the report failed');
      return undefined;
    }
  }
}

function actionOf(target: Target): RemediationAction {
  return target.kind === 'node' ? 'delete-node' : 'delete-nodeclaim';
}

/** When the lookup failed: a node Karpenter manages would have its NodeClaim deleted. */
function guessAction(node: V1Node): RemediationAction {
  const owned = (node.metadata?.ownerReferences ?? []).some((o) => o.kind === KarpenterApi.NodeClaimKind);
  return owned || label(node, KarpenterApi.NodePoolLabel) !== undefined ? 'delete-nodeclaim' : 'delete-node';
}

function summary(r: RemediationConfig): Record<string, unknown> {
  return {
    minNodeAge: formatDuration(r.minNodeAge),
    stuckNodeTimeout: r.stuckNodeTimeout > 0 ? formatDuration(r.stuckNodeTimeout) : 'off',
    maxInFlight: r.maxInFlight,
    maxPerHour: r.maxPerHour,
    circuitBreaker: r.circuitBreaker.enabled
      ? `${r.circuitBreaker.maxFailedPercent}% of >= ${r.circuitBreaker.minSamples} in ${formatDuration(r.circuitBreaker.window)}, ${r.circuitBreaker.maxFailedPercentPerNodePool}% per NodePool`
      : 'off',
  };
}
