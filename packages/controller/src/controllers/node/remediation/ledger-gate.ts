import type { V1Node } from '@kubernetes/client-node';
import type { Logger } from '@kube-node-ready/core';
import { errorMessage } from '@kube-node-ready/core';
import type { Clock } from '../../../clock.js';
import { nodeUid } from '../../../kube/objects.js';
import type { LimitVerdict } from './decide.js';
import type { LedgerEntry, RemediationLedger } from './ledger.js';
import type { RemediationLimiter } from './rate-limit.js';

/**
 * The ledger gate: the remediator's side of the ledger (ledger.ts). Nothing is deleted until the
 * ledger has been read, and no deletion is issued that the ledger does not hold first:
 *   - ensure() reads it, once (again after a failed read, at most every LEDGER_RELOAD_MS); its
 *     deletions of the last hour are charged to the limiter, and those whose node still exists
 *     count as in flight and are handed to `remember` (never acted on again);
 *   - verdict() is the `ledger` block of the limits until it has been read: the hourly budget is
 *     never assumed empty;
 *   - record() writes a deletion about to be issued; unrecord() takes one out that certainly was
 *     not issued.
 * A deletion that could not be recorded is remembered per node until a later write succeeds, the
 * node is looked at without that block, or it is gone: the `ledger` gauge is 1 while any is.
 */

/** A node held back because the ledger cannot be read or written is looked at again after this long. */
export const LEDGER_RETRY_MS = 30_000;
/** An unreadable ledger is read again at most this often (tick() runs every few seconds). */
export const LEDGER_RELOAD_MS = 5_000;

export interface LedgerGateOptions {
  ledger: RemediationLedger;
  limiter: RemediationLimiter;
  clock: Clock;
  log: Logger;
  /** nodeManagement.remediation.maxPerHour: the ledger applies it in the same guarded write. */
  maxPerHour: number;
  /** Every node the controller watches: a ledger entry whose node still exists is in flight. */
  nodes: () => readonly V1Node[];
  /** A deletion in flight found in the ledger when it is first read (its node still exists). */
  remember: (entry: LedgerEntry) => void;
  /** The gate's state changed (read, failed, recorded): the block gauges are set again. */
  changed: () => void;
}

export type RecordOutcome =
  | { kind: 'ok' }
  /** Other replicas' deletions fill the hour; the limiter knows them now. */
  | { kind: 'full' }
  /** It could not be written: the deletion must not be issued. */
  | { kind: 'failed'; message: string };

type LedgerState = { kind: 'unread' } | { kind: 'loaded' } | { kind: 'failed'; message: string; at: number };

export class LedgerGate {
  private state: LedgerState = { kind: 'unread' };
  private loading: Promise<void> | undefined;
  /** Node UID -> why its deletion could not be recorded. */
  private readonly writeFailures = new Map<string, string>();

  constructor(private readonly opts: LedgerGateOptions) {}

  /** For messages: "ConfigMap <namespace>/<name>". */
  get where(): string {
    return this.opts.ledger.where;
  }

  /** The ledger cannot be read, or a deletion could not be recorded in it (the `ledger` gauge). */
  get unavailable(): boolean {
    return this.state.kind === 'failed' || this.writeFailures.size > 0;
  }

  /** Blocked while the ledger has not been read: the hourly budget is never assumed empty. */
  verdict(): LimitVerdict | undefined {
    const state = this.state;
    if (state.kind === 'loaded') return undefined;
    const message =
      state.kind === 'failed'
        ? `the remediation ledger cannot be read (${state.message}); remediation stays paused until it can be, rather than assume no deletions in the last hour`
        : `the remediation ledger (${this.where}) has not been read yet`;
    return { ok: false, reason: 'ledger', message, retryAfterMs: LEDGER_RETRY_MS };
  }

  /** Reads the ledger unless it was read already (or a read failed less than LEDGER_RELOAD_MS ago). Never throws. */
  ensure(): Promise<void> {
    const state = this.state;
    if (state.kind === 'loaded') return Promise.resolve();
    if (state.kind === 'failed' && this.opts.clock.now() - state.at < LEDGER_RELOAD_MS) return Promise.resolve();
    this.loading ??= this.load().finally(() => (this.loading = undefined));
    return this.loading;
  }

  /**
   * Records a deletion about to be issued. On success the limiter takes in the ledger as written
   * (other replicas' deletions included) and every earlier write failure is over; on failure the
   * node is remembered as held back by the ledger.
   */
  async record(entry: LedgerEntry): Promise<RecordOutcome> {
    try {
      const result = await this.opts.ledger.record(entry, this.opts.maxPerHour);
      this.writeFailures.clear();
      this.absorb(result.entries, { fromLoad: false });
      this.opts.changed();
      return result.ok ? { kind: 'ok' } : { kind: 'full' };
    } catch (err) {
      const message = errorMessage(err);
      this.writeFailures.set(entry.uid, message);
      return { kind: 'failed', message };
    }
  }

  /** A recorded deletion that was certainly not issued (precondition failed, object gone). Best effort. */
  async unrecord(uid: string, log: Logger): Promise<void> {
    try {
      await this.opts.ledger.remove(uid);
    } catch (err) {
      log.warn({ ledger: this.where, err: errorMessage(err) }, 'could not take a deletion that was not issued out of the remediation ledger; it counts against the hourly budget until it is an hour old');
    }
  }

  /** The node is no longer held back by a failed write. Returns whether it was. */
  clearWriteFailure(uid: string): boolean {
    return this.writeFailures.delete(uid);
  }

  private async load(): Promise<void> {
    const was = this.state;
    try {
      const entries = await this.opts.ledger.load();
      const inFlight = this.absorb(entries, { fromLoad: true });
      this.state = { kind: 'loaded' };
      this.opts.log.info(
        { ledger: this.where, deletionsLastHour: entries.length, inFlight, maxPerHour: this.opts.maxPerHour },
        was.kind === 'failed' ? 'remediation ledger read: remediation resumes' : 'remediation ledger read',
      );
    } catch (err) {
      const message = errorMessage(err);
      if (was.kind !== 'failed' || was.message !== message) {
        this.opts.log.error({ ledger: this.where, err: message }, 'remediation paused: the remediation ledger cannot be read; nothing is deleted until it can be');
      }
      this.state = { kind: 'failed', message, at: this.opts.clock.now() };
    }
    this.opts.changed();
  }

  /**
   * Takes the ledger's deletions into the limiter (hourly charges). On the first read, those whose
   * node still exists also count as in flight and are remembered (never acted on again). Returns
   * how many are in flight.
   */
  private absorb(entries: readonly LedgerEntry[], opts: { fromLoad: boolean }): number {
    const present = opts.fromLoad ? new Set(this.opts.nodes().map(nodeUid)) : new Set<string>();
    let inFlight = 0;
    for (const entry of entries) {
      const exists = present.has(entry.uid);
      this.opts.limiter.restore(entry, { inFlight: exists });
      if (exists) {
        inFlight++;
        this.opts.remember(entry);
      }
    }
    return inFlight;
  }
}
