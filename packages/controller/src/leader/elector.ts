import type { Logger } from '@kube-node-ready/core';
import { errorMessage } from '@kube-node-ready/core';
import { withDeadline, type Clock } from '../clock.js';

/**
 * Leader election on a coordination.k8s.io/v1 Lease with client-go semantics
 * (k8s.io/client-go/tools/leaderelection), written against a small LeaseClient so the protocol is
 * unit-tested with a recording fake and a fake clock (ADR 0003):
 *
 *   - acquire: try at once, then every retryPeriod x (1 + random x 1.2) until it succeeds;
 *   - a lease held by someone else counts as expired only when its record has not changed for
 *     leaseDuration *as observed on our clock* (never by comparing their clock with ours);
 *   - every write is an update guarded by the resourceVersion we read (or a create);
 *   - renew every retryPeriod; if renewing keeps failing for renewDeadline, leadership is lost;
 *   - on stop, a leader releases the lease (empty holder, 1 s duration) so a follower takes over
 *     at once instead of waiting out the lease.
 */
export interface LeaseRecord {
  /** Empty when released. */
  holderIdentity: string;
  leaseDurationSeconds: number;
  acquireTime?: number;
  renewTime?: number;
  leaseTransitions: number;
}

export interface ObservedLease {
  record: LeaseRecord;
  resourceVersion: string;
}

/** The three calls the protocol needs. Errors other than "not found" are thrown. */
export interface LeaseClient {
  /** Undefined when the Lease does not exist. */
  get(): Promise<ObservedLease | undefined>;
  /** Fails (throws) if the Lease exists. */
  create(record: LeaseRecord): Promise<ObservedLease>;
  /** Fails (throws) if the Lease's resourceVersion is no longer `resourceVersion`. */
  update(record: LeaseRecord, resourceVersion: string): Promise<ObservedLease>;
}

export interface LeaderElectorOptions {
  client: LeaseClient;
  identity: string;
  clock: Clock;
  log: Logger;
  leaseDurationMs: number;
  renewDeadlineMs: number;
  retryPeriodMs: number;
  /** client-go JitterFactor. */
  jitterFactor?: number;
  /** Injected randomness for the jitter, [0, 1). */
  random?: () => number;
  /** Release the lease when run() is stopped by its signal (client-go ReleaseOnCancel). */
  releaseOnCancel?: boolean;
  /** Called when this replica starts leading; `signal` aborts when leadership ends. */
  onStartedLeading: (signal: AbortSignal) => void;
  /** Called when leadership ends (lost or stopped). */
  onStoppedLeading?: () => void;
  /** Called whenever the observed leader changes (including to us). */
  onNewLeader?: (identity: string) => void;
}

export type RunResult = 'stopped' | 'lost';

export const JITTER_FACTOR = 1.2;

export class LeaderElector {
  private observed: ObservedLease | undefined;
  /** Our clock's time when `observed.record` last changed. */
  private observedAt = 0;
  private leading = false;
  private reportedLeader: string | undefined;

  constructor(private readonly opts: LeaderElectorOptions) {
    if (opts.leaseDurationMs <= opts.renewDeadlineMs) throw new Error('leaseDuration must be greater than renewDeadline');
    if (opts.renewDeadlineMs <= (opts.jitterFactor ?? JITTER_FACTOR) * opts.retryPeriodMs) {
      throw new Error('renewDeadline must be greater than retryPeriod x jitterFactor');
    }
  }

  isLeader(): boolean {
    return this.leading;
  }

  /** The identity in the last observed record ('' when released, undefined before the first read). */
  leader(): string | undefined {
    return this.observed?.record.holderIdentity;
  }

  /**
   * Acquires, leads while renewals succeed, and returns when leadership is lost or `signal`
   * aborts (after releasing the lease, if held and releaseOnCancel).
   */
  async run(signal: AbortSignal): Promise<RunResult> {
    // 1. Acquire (or stop trying when asked to stop).
    if (!(await this.acquire(signal))) return 'stopped';

    // 2. Lead until renewing fails for renewDeadline, or we are stopped.
    const leadership = new AbortController();
    this.leading = true;
    this.opts.log.info({ identity: this.opts.identity }, 'became leader');
    this.opts.onStartedLeading(leadership.signal);
    const result = await this.renewUntilLost(signal);

    // 3. Step down.
    this.leading = false;
    leadership.abort();
    if (result === 'stopped' && (this.opts.releaseOnCancel ?? true)) await this.release();
    if (result === 'lost') this.opts.log.warn({ identity: this.opts.identity }, 'lost leadership');
    this.opts.onStoppedLeading?.();
    return result;
  }

  private async acquire(signal: AbortSignal): Promise<boolean> {
    for (;;) {
      if (signal.aborted) return false;
      if (await this.tryAcquireOrRenew(this.opts.renewDeadlineMs)) return true;
      await this.opts.clock.sleep(this.jittered(this.opts.retryPeriodMs), signal);
    }
  }

  private async renewUntilLost(signal: AbortSignal): Promise<RunResult> {
    const { clock, retryPeriodMs, renewDeadlineMs } = this.opts;
    for (;;) {
      await clock.sleep(retryPeriodMs, signal);
      if (signal.aborted) return 'stopped';
      const deadline = clock.now() + renewDeadlineMs;
      for (;;) {
        if (await this.tryAcquireOrRenew(deadline - clock.now())) break;
        if (clock.now() >= deadline) return 'lost';
        await clock.sleep(Math.min(retryPeriodMs, deadline - clock.now()), signal);
        if (signal.aborted) return 'stopped';
        if (clock.now() >= deadline) return 'lost';
      }
    }
  }

  /** One round of the protocol; false on any failure (logged at debug). Bounded by `budgetMs`. */
  private async tryAcquireOrRenew(budgetMs: number): Promise<boolean> {
    try {
      return await withDeadline(this.opts.clock, this.acquireOrRenewOnce(), budgetMs, `lease call took longer than ${budgetMs} ms`);
    } catch (err) {
      this.opts.log.debug({ err: errorMessage(err) }, 'lease acquire/renew failed');
      return false;
    }
  }

  private async acquireOrRenewOnce(): Promise<boolean> {
    const { client, identity, clock } = this.opts;
    const now = clock.now();
    const durationSeconds = Math.ceil(this.opts.leaseDurationMs / 1000);

    // 1. No lease yet: create it, holding it.
    const current = await client.get();
    if (!current) {
      const created = await client.create({ holderIdentity: identity, leaseDurationSeconds: durationSeconds, acquireTime: now, renewTime: now, leaseTransitions: 0 });
      this.observe(created, clock.now());
      return true;
    }

    // 2. Remember when the record last changed, on our clock.
    if (!this.observed || !sameRecord(this.observed.record, current.record)) this.observe(current, now);
    else this.observed = current;

    // 3. Held by someone else and not expired: not ours to take.
    const holder = current.record.holderIdentity;
    const held = holder !== '' && holder !== identity;
    if (held && this.observedAt + current.record.leaseDurationSeconds * 1000 > now) return false;

    // 4. Take or renew it, guarded by the resourceVersion we read.
    const ours = holder === identity;
    const record: LeaseRecord = {
      holderIdentity: identity,
      leaseDurationSeconds: durationSeconds,
      acquireTime: ours ? (current.record.acquireTime ?? now) : now,
      renewTime: now,
      leaseTransitions: ours ? current.record.leaseTransitions : current.record.leaseTransitions + 1,
    };
    const updated = await client.update(record, current.resourceVersion);
    this.observe(updated, clock.now());
    return true;
  }

  /** Gives the lease up so a follower need not wait for it to expire. Best effort. */
  private async release(): Promise<void> {
    const observed = this.observed;
    if (!observed || observed.record.holderIdentity !== this.opts.identity) return;
    const now = this.opts.clock.now();
    try {
      const released = await withDeadline(
        this.opts.clock,
        this.opts.client.update(
          { holderIdentity: '', leaseDurationSeconds: 1, acquireTime: now, renewTime: now, leaseTransitions: observed.record.leaseTransitions },
          observed.resourceVersion,
        ),
        this.opts.renewDeadlineMs,
        'releasing the lease took too long',
      );
      this.observe(released, now);
      this.opts.log.info({ identity: this.opts.identity }, 'released the leader lease');
    } catch (err) {
      this.opts.log.warn({ err: errorMessage(err) }, 'could not release the leader lease');
    }
  }

  private observe(lease: ObservedLease, at: number): void {
    this.observed = lease;
    this.observedAt = at;
    const holder = lease.record.holderIdentity;
    if (holder !== this.reportedLeader) {
      this.reportedLeader = holder;
      if (holder) this.opts.onNewLeader?.(holder);
    }
  }

  private jittered(ms: number): number {
    return ms + (this.opts.random ?? Math.random)() * (this.opts.jitterFactor ?? JITTER_FACTOR) * ms;
  }
}

function sameRecord(a: LeaseRecord, b: LeaseRecord): boolean {
  return (
    a.holderIdentity === b.holderIdentity &&
    a.leaseDurationSeconds === b.leaseDurationSeconds &&
    a.acquireTime === b.acquireTime &&
    a.renewTime === b.renewTime &&
    a.leaseTransitions === b.leaseTransitions
  );
}
