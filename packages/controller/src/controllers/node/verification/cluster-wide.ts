import { formatDuration } from '@kube-node-ready/core';
import type { Clock } from '../../../clock.js';
import type { Action } from './decide.js';
import { bounded } from './pod-result.js';
import type { CheckSummary } from './summary.js';
import { Outcome } from './types.js';

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
}

/**
 * Recent failed checks as (check, target, node) with the time last seen, in a sliding window.
 * Pure apart from the injected clock. Recording the same node again (a retried write of the same
 * attempt, or its next attempt) only moves its time: a node counts once per check and target.
 */
export class ClusterWideFailures {
  /** Key `check \n target \n node`, in insertion order (oldest first), re-inserted when seen again. */
  private readonly seen = new Map<string, { check: string; target: string; node: string; at: number }>();

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
      const nodes = this.nodesFailing(check, target);
      if (nodes - 1 >= this.opts.minOtherNodes) shared.push({ check, target, nodes });
    }
    return shared;
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
 * A failed attempt whose check failed against the same target on other nodes too, recorded and
 * named: its message (stored, in the condition and the Events) says so first, where truncation
 * cannot cut it off. Recording is idempotent per node, so a write retried after a conflict counts
 * the node once.
 */
export function noteClusterWide(failures: ClusterWideFailures, node: string, action: Extract<Action, { kind: 'Complete' }>): Extract<Action, { kind: 'Complete' }> {
  if (action.result.outcome !== Outcome.ChecksFailed) return action;
  const prefix = clusterWidePrefix(failures.record(node, action.result.checks), failures.windowMs);
  if (prefix === '') return action;
  const message = bounded(prefix + action.result.message);
  return { ...action, result: { ...action.result, message }, state: { ...action.state, lastMessage: message } };
}
