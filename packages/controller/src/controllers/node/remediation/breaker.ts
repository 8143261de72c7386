import { formatDuration } from '@kube-node-ready/core';
import type { Clock } from '../../../clock.js';
import type { CircuitBreakerConfig } from './config.js';
import type { BreakerVerdict } from './decide.js';

/**
 * The circuit breaker in front of every deletion (Karpenter node/health's "20% of a NodePool" rule,
 * plus a cluster-wide rule). Two rules, either opens it:
 *
 *   window    more than maxFailedPercent of the verifications that finished within `window`
 *             failed, once the window holds at least minSamples of them. A verification is one
 *             node's whole run: it ends when the node passes or exhausts its retries (one sample
 *             per node and verification, not per attempt, so one bad node retrying does not look
 *             like many).
 *   nodepool  more than maxFailedPercentPerNodePool of a NodePool's nodes are failed (or stuck);
 *             the allowance is rounded up, so a pool may always lose one node.
 *
 * It closes by itself: samples age out of the window, passing nodes dilute it, failed nodes are
 * replaced or repaired. There is no manual reset and no state outside memory: a new leader starts
 * with an empty window, and counts the failed nodes it finds as fresh failures (the conservative
 * side; see Remediator.observe).
 */

/** How soon a blocked node is looked at again. */
export const BREAKER_RECHECK_MS = 30_000;
/** Bound on remembered samples (a burst of thousands of nodes within one window). */
const MAX_SAMPLES = 50_000;

export interface PoolCount {
  nodes: number;
  failed: number;
}

export class CircuitBreaker {
  /** Finished verifications by key (node UID and attempt), oldest first. */
  private readonly samples = new Map<string, { failed: boolean; at: number }>();

  constructor(
    private readonly config: CircuitBreakerConfig,
    private readonly clock: Clock,
  ) {}

  /** A verification finished (`failed`: retries exhausted). Recording the same key again does nothing. */
  record(key: string, failed: boolean, at: number = this.clock.now()): void {
    if (this.samples.has(key)) return;
    this.samples.set(key, { failed, at });
    while (this.samples.size > MAX_SAMPLES) this.samples.delete(this.samples.keys().next().value as string);
  }

  /** Verifications finished within the window, and how many failed. */
  windowStats(now: number = this.clock.now()): { total: number; failed: number } {
    const since = now - this.config.window;
    let total = 0;
    let failed = 0;
    for (const [key, s] of this.samples) {
      if (s.at <= since) {
        this.samples.delete(key);
        continue;
      }
      if (s.at > now) continue;
      total++;
      if (s.failed) failed++;
    }
    return { total, failed };
  }

  /** The window rule. */
  checkWindow(now: number = this.clock.now()): BreakerVerdict {
    if (!this.config.enabled) return { open: false };
    const { total, failed } = this.windowStats(now);
    if (total < this.config.minSamples || failed * 100 <= this.config.maxFailedPercent * total) return { open: false };
    return {
      open: true,
      message: `circuit breaker open: ${failed} of the ${total} verifications finished in the last ${formatDuration(this.config.window)} failed (${pct(failed, total)} > ${this.config.maxFailedPercent}%)`,
      recheckAfterMs: BREAKER_RECHECK_MS,
    };
  }

  /** The NodePool rule, for one pool ("" = nodes in no NodePool). */
  checkPool(pool: string, count: PoolCount): BreakerVerdict {
    if (!this.config.enabled || count.nodes === 0) return { open: false };
    const allowed = Math.ceil((this.config.maxFailedPercentPerNodePool * count.nodes) / 100);
    if (count.failed <= allowed) return { open: false };
    const name = pool === '' ? 'nodes in no NodePool' : `NodePool ${pool}`;
    return {
      open: true,
      message: `circuit breaker open: ${count.failed} of ${count.nodes} ${name} have failed (${pct(count.failed, count.nodes)} > ${this.config.maxFailedPercentPerNodePool}%, at most ${allowed} allowed)`,
      recheckAfterMs: BREAKER_RECHECK_MS,
    };
  }

  /** Both rules for a node of `pool`: the window first, then its pool. */
  check(pool: string, count: PoolCount, now: number = this.clock.now()): BreakerVerdict {
    const window = this.checkWindow(now);
    return window.open ? window : this.checkPool(pool, count);
  }
}

function pct(part: number, whole: number): string {
  return `${Math.round((part * 1000) / whole) / 10}%`;
}
