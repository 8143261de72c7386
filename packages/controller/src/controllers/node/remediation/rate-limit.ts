import { formatDuration } from '@kube-node-ready/core';
import type { Clock } from '../../../clock.js';
import type { LimitVerdict } from './decide.js';

/**
 * At most `maxInFlight` deletions in progress and `maxPerHour` issued per rolling hour.
 *
 * A deletion is in flight from the moment it is reserved (before the API call, synchronously with
 * the check, so two reconciles can never both take the last slot) until its node is seen gone, or
 * until inFlightTimeout passes (then it is reported as stalled and the slot is freed; the node is
 * not deleted again). Deletions the remediator did not issue but can see (a failed node with a
 * deletionTimestamp, e.g. after a leader change) count as in flight too: the caller passes them.
 *
 * Dry-run decisions are charged to the hourly budget but take no in-flight slot, so a dry run
 * reports which nodes the hourly limit would hold back; nothing is deleted, so nothing is in flight.
 */

export const HOUR_MS = 3_600_000;
/** How soon a node held back by the in-flight limit is looked at again (a slot may free sooner). */
export const IN_FLIGHT_RECHECK_MS = 30_000;

export interface InFlight {
  uid: string;
  node: string;
  /** What was deleted: "NodeClaim x" or "Node y". */
  target: string;
  at: number;
}

export interface RateLimitOptions {
  maxInFlight: number;
  maxPerHour: number;
  inFlightTimeoutMs: number;
}

export class RemediationLimiter {
  private readonly inFlight = new Map<string, InFlight>();
  /** Deletions (and dry-run decisions) issued in the last hour, oldest first. */
  private issued: Array<{ uid: string; at: number }> = [];

  constructor(
    private readonly opts: RateLimitOptions,
    private readonly clock: Clock,
  ) {}

  /**
   * May one more deletion start now? `external`: deletions in progress the limiter did not issue.
   * `self`: the node asking, whose own earlier charge (a repeated dry-run decision) is not held against it.
   */
  check(opts: { external?: number; self?: string } = {}): LimitVerdict {
    const now = this.clock.now();
    const inFlight = this.inFlightCount(opts.external ?? 0, opts.self);
    if (inFlight >= this.opts.maxInFlight) {
      return {
        ok: false,
        reason: 'in-flight',
        message: `${inFlight} deletion${inFlight === 1 ? '' : 's'} in progress, remediation.maxInFlight is ${this.opts.maxInFlight}`,
        retryAfterMs: IN_FLIGHT_RECHECK_MS,
      };
    }
    const recent = this.recent(now).filter((e) => e.uid !== opts.self);
    if (recent.length >= this.opts.maxPerHour) {
      const oldest = recent[0]?.at ?? now;
      const retryAfterMs = Math.max(1000, oldest + HOUR_MS - now);
      return {
        ok: false,
        reason: 'rate-limit',
        message: `${recent.length} deletion${recent.length === 1 ? '' : 's'} in the last hour, remediation.maxPerHour is ${this.opts.maxPerHour} (next one possible in ${formatDuration(retryAfterMs)})`,
        retryAfterMs,
      };
    }
    return { ok: true };
  }

  /** Takes an in-flight slot and an hourly charge for a deletion about to be issued. */
  reserve(entry: Omit<InFlight, 'at'>): void {
    const at = this.clock.now();
    this.inFlight.set(entry.uid, { ...entry, at });
    this.charge(entry.uid, at);
  }

  /** An hourly charge only (dry run). A node is charged once per hour however often it is decided. */
  charge(uid: string, at: number = this.clock.now()): void {
    if (this.recent(at).some((e) => e.uid === uid)) return;
    this.issued.push({ uid, at });
  }

  /**
   * A deletion recorded in the ledger (by this leader or an earlier one): charged at its own time,
   * once per node; `inFlight` (its node still exists) also takes a slot from that time on, so it is
   * reported as stalled once inFlightTimeout has passed since it was recorded.
   */
  restore(entry: InFlight, opts: { inFlight: boolean }): void {
    const now = this.clock.now();
    const at = Math.min(entry.at, now);
    if (now - at >= HOUR_MS) return;
    if (!this.recent(now).some((e) => e.uid === entry.uid)) {
      this.issued.push({ uid: entry.uid, at });
      this.issued.sort((a, b) => a.at - b.at);
    }
    if (opts.inFlight && !this.inFlight.has(entry.uid)) this.inFlight.set(entry.uid, { ...entry, at });
  }

  /** The deletion was not issued after all (or failed): give back its slot and its charge. */
  release(uid: string): void {
    const entry = this.inFlight.get(uid);
    this.inFlight.delete(uid);
    if (entry) this.issued = this.issued.filter((e) => !(e.uid === uid && e.at === entry.at));
  }

  /** Updates what a reserved deletion targets (known only after the lookup). */
  describe(uid: string, target: string): void {
    const entry = this.inFlight.get(uid);
    if (entry) entry.target = target;
  }

  /** The node is gone: its deletion is complete. Its hourly charge stays. */
  done(uid: string): boolean {
    return this.inFlight.delete(uid);
  }

  /** Removes and returns the deletions in flight for longer than inFlightTimeout. */
  expire(): InFlight[] {
    const now = this.clock.now();
    const stalled: InFlight[] = [];
    for (const entry of this.inFlight.values()) {
      if (now - entry.at >= this.opts.inFlightTimeoutMs) stalled.push(entry);
    }
    for (const entry of stalled) this.inFlight.delete(entry.uid);
    return stalled;
  }

  isInFlight(uid: string): boolean {
    return this.inFlight.has(uid);
  }

  inFlightCount(external = 0, self?: string): number {
    return this.inFlight.size - (self !== undefined && this.inFlight.has(self) ? 1 : 0) + external;
  }

  hourlyCount(): number {
    return this.recent(this.clock.now()).length;
  }

  private recent(now: number): Array<{ uid: string; at: number }> {
    this.issued = this.issued.filter((e) => now - e.at < HOUR_MS);
    return this.issued;
  }
}
