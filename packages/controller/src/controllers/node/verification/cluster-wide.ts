import { formatDuration } from '@kube-node-ready/core';
import type { Clock } from '../../../clock.js';
import type { ControllerConfig } from '../../../config/schema.js';
import { backoffDelay, type Action } from './decide.js';
import { bounded } from './pod-result.js';
import type { CheckSummary } from './summary.js';
import { Outcome, Phase, type VerificationState } from './types.js';

/** How far back failures of other nodes count. */
export const CLUSTER_WIDE_WINDOW_MS = 10 * 60_000;
/** Other nodes that must fail the same check against the same target for a fault to look cluster-wide. */
export const CLUSTER_WIDE_MIN_OTHER_NODES = 2;
/** Most failures remembered; the oldest go first (bounds memory on a cluster full of failing nodes). */
export const CLUSTER_WIDE_MAX_ENTRIES = 2000;

/** One check of one node failing against one target: several nodes sharing it point at the target, not the nodes. */
export interface SharedFailure {
  check: string;
  target: string;
  /** Distinct nodes that failed it in the window, this one included. */
  nodes: number;
  /** Nodes that passed since this fault was first seen in the window (and did not fail it since). */
  passedSince: number;
  /** More nodes failed it than passed since it began: the fault is outside the nodes (attempt inconclusive). */
  most: boolean;
}

/**
 * Recent failed checks as (check, target, node) with the time last seen, in a sliding window.
 * Pure apart from the injected clock. Recording the same node again (a retried write of the same
 * attempt, or its next attempt) only moves its time: a node counts once per check and target.
 */
export class ClusterWideFailures {
  /** Key `check \n target \n node`, in insertion order (oldest first), re-inserted when seen again. */
  private readonly seen = new Map<string, { check: string; target: string; node: string; at: number }>();
  /** Nodes whose latest attempt passed, with its time, in insertion order (oldest first). */
  private readonly passed = new Map<string, number>();
  /** Key `check \n target`: when it was first seen failing (while any node's failure of it is in the window). */
  private readonly since = new Map<string, number>();

  constructor(
    private readonly clock: Pick<Clock, 'now'>,
    private readonly opts: { windowMs: number; minOtherNodes: number; maxEntries: number } = {
      windowMs: CLUSTER_WIDE_WINDOW_MS,
      minOtherNodes: CLUSTER_WIDE_MIN_OTHER_NODES,
      maxEntries: CLUSTER_WIDE_MAX_ENTRIES,
    },
  ) {}

  get windowMs(): number {
    return this.opts.windowMs;
  }

  /**
   * Records the failed checks of `node` that name a target, and returns those that at least
   * minOtherNodes other nodes failed against the same target in the window.
   */
  record(node: string, checks: readonly CheckSummary[]): SharedFailure[] {
    const now = this.clock.now();
    this.prune(now);
    const shared: SharedFailure[] = [];
    for (const { name: check, target } of checks.filter((c) => !c.ok && c.target !== undefined && c.target !== '')) {
      if (target === undefined) continue;
      const key = `${check}\n${target}\n${node}`;
      this.seen.delete(key);
      while (this.seen.size >= this.opts.maxEntries) this.seen.delete(this.seen.keys().next().value as string);
      this.seen.set(key, { check, target, node, at: now });
      if (!this.since.has(`${check}\n${target}`)) this.since.set(`${check}\n${target}`, now);
      this.passed.delete(node);
      const nodes = this.nodesFailing(check, target);
      if (nodes - 1 < this.opts.minOtherNodes) continue;
      const began = this.since.get(`${check}\n${target}`) ?? now;
      let passedSince = 0;
      for (const at of this.passed.values()) if (at >= began) passedSince++;
      shared.push({ check, target, nodes, passedSince, most: nodes > passedSince });
    }
    return shared;
  }

  /** `node` passed: it counts against a fault looking cluster-wide while that fault's failures are in the window. */
  recordPass(node: string): void {
    const now = this.clock.now();
    this.prune(now);
    this.passed.delete(node);
    while (this.passed.size >= this.opts.maxEntries) this.passed.delete(this.passed.keys().next().value as string);
    this.passed.set(node, now);
  }

  /** Per check: the most distinct nodes failing it against one target in the window (for the gauge). */
  maxNodesByCheck(): Map<string, number> {
    this.prune(this.clock.now());
    const perTarget = new Map<string, { check: string; nodes: number }>();
    for (const { check, target } of this.seen.values()) {
      const key = `${check}\n${target}`;
      const entry = perTarget.get(key) ?? { check, nodes: 0 };
      entry.nodes++;
      perTarget.set(key, entry);
    }
    const max = new Map<string, number>();
    for (const { check, nodes } of perTarget.values()) max.set(check, Math.max(max.get(check) ?? 0, nodes));
    return max;
  }

  private nodesFailing(check: string, target: string): number {
    let n = 0;
    for (const e of this.seen.values()) if (e.check === check && e.target === target) n++;
    return n;
  }

  /** Entries are in time order (re-inserted when seen), so the expired ones are at the front. */
  private prune(now: number): void {
    for (const [key, e] of this.seen) {
      if (now - e.at < this.opts.windowMs) break;
      this.seen.delete(key);
    }
    for (const [node, at] of this.passed) {
      if (now - at < this.opts.windowMs) break;
      this.passed.delete(node);
    }
    for (const key of this.since.keys()) {
      const [check, target] = key.split('\n') as [string, string];
      if (this.nodesFailing(check, target) === 0) this.since.delete(key);
    }
  }
}

/**
 * The line put first in a failed attempt's message (so it survives truncation):
 * `cluster-wide? dns against 10.96.0.10:53 is failing on 5 nodes in the last 10m (this one and 4 others): `.
 */
export function clusterWidePrefix(shared: readonly SharedFailure[], windowMs: number): string {
  if (shared.length === 0) return '';
  const window = formatDuration(windowMs);
  const parts = shared.map((s) => `${s.check} against ${s.target} is failing on ${s.nodes} nodes in the last ${window} (this one and ${s.nodes - 1} others)`);
  return `cluster-wide? ${parts.join('; ')}: `;
}

/**
 * A finished attempt, recorded. A failed one whose check failed against the same target on other
 * nodes too is named: its message (stored, in the condition and the Events) says so first, where
 * truncation cannot cut it off. When more nodes failed that check since the fault began than
 * passed, the fault is outside the node: the attempt is inconclusive (outcome ClusterWide), not
 * counted against the node (its failure count stays), no remediation signal, and tried again after
 * a backoff that grows with the attempts not counted (reconciliation.initialBackoff x backoffFactor^n,
 * up to maxBackoff). Recording is idempotent per node, so a write retried after a
 * conflict counts the node once.
 */
export function noteClusterWide(
  failures: ClusterWideFailures,
  node: string,
  action: Extract<Action, { kind: 'Complete' }>,
  now: number,
  config: ControllerConfig,
): Extract<Action, { kind: 'Complete' }> {
  if (action.result.outcome === Outcome.Passed) failures.recordPass(node);
  if (action.result.outcome !== Outcome.ChecksFailed) return action;
  const shared = failures.record(node, action.result.checks);
  if (shared.length === 0) return action;
  const most = shared.filter((s) => s.most);
  if (most.length === 0) {
    const message = bounded(clusterWidePrefix(shared, failures.windowMs) + action.result.message);
    return { ...action, result: { ...action.result, message }, state: { ...action.state, lastMessage: message } };
  }
  const message = bounded(clusterWideInconclusive(most, failures.windowMs) + action.result.message);
  // decide() counted this attempt as failed (failedState: one more); it is not.
  const counted = Math.max(0, action.state.failures - 1);
  // A short blip costs a short wait; a long outage is not hammered.
  const delay = backoffDelay(Math.max(1, action.state.attempt - counted), config.reconciliation);
  const state: VerificationState = {
    uid: action.state.uid,
    attempt: action.state.attempt,
    failures: counted,
    phase: Phase.Backoff,
    nextAttemptAt: now + delay,
    lastOutcome: Outcome.ClusterWide,
    lastMessage: message,
  };
  if (action.state.verifiedAt !== undefined) state.verifiedAt = action.state.verifiedAt;
  return { ...action, result: { ...action.result, outcome: Outcome.ClusterWide, message }, state, open: false, requeueAfterMs: delay };
}

/**
 * `cluster-wide: dns against 10.96.0.10:53 failed on 5 nodes in the last 10m, and 0 passed since
 * it began; not this node's fault: `.
 */
function clusterWideInconclusive(most: readonly SharedFailure[], windowMs: number): string {
  const window = formatDuration(windowMs);
  const parts = most.map((s) => `${s.check} against ${s.target} failed on ${s.nodes} nodes in the last ${window}, and ${s.passedSince} passed since it began`);
  return `cluster-wide: ${parts.join('; ')}; not this node's fault: `;
}
