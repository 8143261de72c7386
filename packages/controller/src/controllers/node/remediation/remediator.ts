import type { V1Node } from '@kubernetes/client-node';
import type { Logger } from '@kube-node-ready/core';
import { errorMessage, formatDuration } from '@kube-node-ready/core';
import type { Clock } from '../../../clock.js';
import { Profiles } from '../../../config/profiles.js';
import type { ControllerConfig } from '../../../config/schema.js';
import { nodeName, nodeUid } from '../../../kube/objects.js';
import { hasVerificationTaint, isVerified } from '../verification/decide.js';
import type { StateRead } from '../verification/store.js';
import { Outcome, Phase } from '../verification/types.js';
import { CircuitBreaker, type PoolCount } from './breaker.js';
import type { RemediationConfig } from './config.js';
import { decide, isFailedNode, longestVerificationMs, nodePoolOf, type BreakerVerdict, type Decision, type LimitVerdict, type StuckClock } from './decide.js';
import { Deletion } from './deletion.js';
import type { RemediationEvents } from './events.js';
import type { RemediationTargets, Target } from './executor.js';
import type { RemediationLedger } from './ledger.js';
import { LedgerGate } from './ledger-gate.js';
import type { RemediationMetrics } from './metrics.js';
import type { RemediationAction, RemediationResult } from './names.js';
import { RemediationLimiter } from './rate-limit.js';
import { ERROR_RETRY_MS, Reporter } from './reporting.js';

/**
 * Remediation of failed nodes, in the shape of Karpenter's nodeclaim/lifecycle: this file reads the
 * node and what decide() needs (breaker, limits, ledger), decides with decide() (pure, the
 * documented guard order), and dispatches to the step that acts on the decision:
 *   - ledger-gate.ts: the ledger is read before anything is deleted, and holds every deletion
 *     before it is issued;
 *   - deletion.ts: the five steps of a deletion (reserve, live re-read, fresh NodeClaim lookup,
 *     ledger record, UID-preconditioned delete), giving the slot and the charge back on failure;
 *   - reporting.ts: Events, metrics and log lines, once per node and decision.
 * tick() and consider() run on the leader only, and read the ledger first: until it has been read,
 * nothing is deleted.
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

export class Remediator {
  private readonly targets: RemediationTargets;
  private readonly gate: LedgerGate;
  private readonly reporter: Reporter;
  private readonly deletion: Deletion;
  private readonly breaker: CircuitBreaker;
  private readonly limiter: RemediationLimiter;
  private readonly dryRun: boolean;
  private readonly profiles: Profiles;
  /** Node UID -> key of the last verification recorded for the breaker. */
  private readonly seen = new Map<string, string>();
  /** Nodes whose NodeClaim or Node this remediator deleted: never acted on again. */
  private readonly remediated = new Map<string, { target: string; at: number }>();
  private readonly busy = new Set<string>();
  private breakerWindow: BreakerVerdict = { open: false };
  private readonly openPools = new Map<string, string>();
  /** Failed nodes being deleted by others, as last counted (for the in-flight gauge). */
  private external = 0;
  private readonly readState: (node: V1Node) => StateRead;
  /** When this replica started leading (startedLeading()); the stuck-node clock counts from there at the earliest. */
  private leadingSince: number | undefined;

  constructor(private readonly opts: RemediatorOptions) {
    this.readState = (node) => opts.progress.read(node);
    this.targets = opts.targets;
    this.breaker = new CircuitBreaker(opts.remediation.circuitBreaker, opts.clock);
    this.limiter = new RemediationLimiter(
      { maxInFlight: opts.remediation.maxInFlight, maxPerHour: opts.remediation.maxPerHour, inFlightTimeoutMs: opts.remediation.inFlightTimeout },
      opts.clock,
    );
    const changed = (): void => this.updateGauges();
    this.gate = new LedgerGate({
      ledger: opts.ledger,
      limiter: this.limiter,
      clock: opts.clock,
      log: opts.log,
      maxPerHour: opts.remediation.maxPerHour,
      nodes: opts.nodes,
      remember: (entry) => {
        if (!this.remediated.has(entry.uid)) this.remediated.set(entry.uid, { target: entry.target, at: entry.at });
      },
      changed,
    });
    this.reporter = new Reporter({ clock: opts.clock, log: opts.log, events: opts.events, metrics: opts.metrics });
    this.deletion = new Deletion({
      targets: opts.targets,
      gate: this.gate,
      limiter: this.limiter,
      reporter: this.reporter,
      clock: opts.clock,
      decide: (node, target, self) => this.decideNow(node, target, self),
      deleted: (uid, target) => this.remediated.set(uid, { target, at: opts.clock.now() }),
      changed,
    });
    this.dryRun = opts.dryRun || opts.remediation.dryRun;
    // Per profile (config/profiles.ts): a node's retries, timeouts and remediation switch are its profile's.
    this.profiles = new Profiles(opts.config);
    const longest = Math.max(...this.profiles.all().map((p) => longestVerificationMs(p.config)));
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
    this.reporter.forget(uid);
    this.seen.delete(uid);
    this.gate.clearWriteFailure(uid);
    this.updateGauges();
  }

  /**
   * Housekeeping (every few seconds, leader only): reads the ledger if it has not been read yet
   * (or could not be); deletions in flight for longer than inFlightTimeout are
   * reported as stalled and stop counting; the circuit breaker is re-evaluated for every NodePool,
   * so it closes (and the gauge drops) even when no node is being considered.
   */
  async tick(): Promise<void> {
    await this.gate.ensure();
    for (const stalled of this.limiter.expire()) await this.reporter.stalled(stalled);
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
      await this.gate.ensure();
      if (this.remediated.has(uid)) return { decision: { kind: 'ignore', reason: 'AlreadyRemediated' }, reported: false };
      const result = await this.considerRounds(cached);
      if (!(result.decision.kind === 'blocked' && result.decision.reason === 'ledger') && this.gate.clearWriteFailure(uid)) this.updateGauges();
      return result;
    } finally {
      this.busy.delete(uid);
    }
  }

  private async considerRounds(cached: V1Node): Promise<ConsiderResult> {
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

      // The deletion's first step (reserving a slot and a charge) runs before this call's first
      // await: nothing between the decision and the reservation can change the limits.
      const outcome = await this.deletion.run(node, decision, log);
      switch (outcome.kind) {
        case 'deleted':
          return outcome.result;
        case 'error':
          return this.reporter.error(node, decision.trigger, outcome.err, target, log);
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

  /** Every decision but delete: silent, reported once, or (dry run) charged and reported once. */
  private async handle(node: V1Node, decision: Decision, target: Target | undefined, log: Logger): Promise<ConsiderResult> {
    switch (decision.kind) {
      case 'ignore':
        return { decision, ...(decision.requeueAfterMs !== undefined ? { requeueAfterMs: decision.requeueAfterMs } : {}), reported: false };
      case 'skip':
      case 'blocked':
        return this.reporter.heldBack(node, decision, target, log);
      case 'dry-run':
        this.limiter.charge(nodeUid(node));
        this.updateGauges();
        return this.reporter.dryRun(node, decision, target, log);
      case 'delete':
        throw new Error('handle() is not for deletions');
    }
  }

  /** decide() with the breaker and limits of this moment. `self`: a node holding a reservation. */
  private decideNow(node: V1Node, target?: Target, self?: string): Decision {
    const now = this.opts.clock.now();
    const profile = this.profiles.of(node);
    return decide(node, now, {
      // A Remediator exists while deleteFailedNodes is on at the top level or in a profile; the node's profile says whether it is on for it.
      enabled: profile.config.nodeManagement.deleteFailedNodes,
      dryRun: this.dryRun,
      config: profile.config,
      remediation: this.opts.remediation,
      readState: this.readState,
      stuckClock: this.stuckClock,
      ...(target ? { target } : {}),
      breaker: () => this.checkBreaker(node, now),
      limits: () => this.checkLimits(now, self ?? nodeUid(node)),
    });
  }

  // -- What decide() reads: the breaker, the limits, the ledger ------------------------------------

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
    const ledger = this.gate.verdict();
    if (ledger) return ledger;
    return this.limiter.check({ external: this.external, self });
  }

  /** Failed nodes being deleted that this remediator did not delete (another leader, Karpenter, a person). */
  private externalInFlight(now: number): number {
    let n = 0;
    for (const node of this.opts.nodes()) {
      if (!node.metadata?.deletionTimestamp || this.limiter.isInFlight(nodeUid(node))) continue;
      if (isFailedNode(node, now, this.failedCtx(node))) n++;
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
      if (isFailedNode(node, now, this.failedCtx(node))) c.failed++;
    }
    return counts;
  }

  private failedCtx(node: V1Node): Parameters<typeof isFailedNode>[2] {
    return { config: this.profiles.of(node).config, remediation: this.opts.remediation, readState: this.readState, stuckClock: this.stuckClock };
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

  /** The block gauges, from the breaker, the limits and the ledger as they are now. */
  private updateGauges(): void {
    this.reporter.blocked(
      {
        'circuit-breaker': this.breakerWindow.open || this.openPools.size > 0,
        'in-flight': this.limiter.inFlightCount(this.external) >= this.opts.remediation.maxInFlight,
        'rate-limit': this.limiter.hourlyCount() >= this.opts.remediation.maxPerHour,
        ledger: this.gate.unavailable,
      },
      [...(this.breakerWindow.open ? [this.breakerWindow.message] : []), ...this.openPools.values()],
    );
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
