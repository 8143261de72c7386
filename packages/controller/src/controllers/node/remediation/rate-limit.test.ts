import { describe, expect, it } from 'vitest';
import { FakeClock } from '../../../testing/fake-clock.js';
import { HOUR_MS, IN_FLIGHT_RECHECK_MS, RemediationLimiter } from './rate-limit.js';

const MIN = 60_000;

function setup(maxInFlight = 2, maxPerHour = 3) {
  const clock = new FakeClock('2025-01-01T00:00:00Z');
  const limiter = new RemediationLimiter({ maxInFlight, maxPerHour, inFlightTimeoutMs: 15 * MIN }, clock);
  const take = (uid: string) => limiter.reserve({ uid, node: `node-${uid}`, target: `NodeClaim ${uid}` });
  return { clock, limiter, take };
}

describe('RemediationLimiter: in flight', () => {
  it('holds back the deletion after maxInFlight until one completes', () => {
    const { limiter, take } = setup(2, 10);
    take('a');
    expect(limiter.check()).toEqual({ ok: true });
    take('b');
    expect(limiter.check()).toEqual({ ok: false, reason: 'in-flight', message: '2 deletions in progress, remediation.maxInFlight is 2', retryAfterMs: IN_FLIGHT_RECHECK_MS });
    expect(limiter.done('a')).toBe(true);
    expect(limiter.check().ok).toBe(true);
  });

  it('counts deletions it did not issue (a failed node being deleted, seen after a restart)', () => {
    const { limiter, take } = setup(2, 10);
    take('a');
    expect(limiter.check({ external: 1 })).toMatchObject({ ok: false, reason: 'in-flight' });
  });

  it('a node holding a reservation is not held back by it (the re-check before its own delete)', () => {
    const { limiter, take } = setup(1, 1);
    take('a');
    expect(limiter.check({ self: 'a' })).toEqual({ ok: true });
    expect(limiter.check({ self: 'b' }).ok).toBe(false);
  });

  it('release gives back the slot and the hourly charge (a delete that failed or was not needed)', () => {
    const { limiter, take } = setup(1, 1);
    take('a');
    limiter.release('a');
    expect(limiter.check()).toEqual({ ok: true });
    expect(limiter.hourlyCount()).toBe(0);
  });

  it('expire(): a deletion whose node is still there after inFlightTimeout stops counting', async () => {
    const { clock, limiter, take } = setup(1, 10);
    take('a');
    await clock.advance(14 * MIN);
    expect(limiter.expire()).toEqual([]);
    await clock.advance(MIN);
    expect(limiter.expire()).toMatchObject([{ uid: 'a', node: 'node-a', target: 'NodeClaim a' }]);
    expect(limiter.check().ok).toBe(true);
    expect(limiter.hourlyCount()).toBe(1); // it was issued, it stays charged
  });
});

describe('RemediationLimiter: per rolling hour', () => {
  it('holds back the deletion after maxPerHour, until the oldest is an hour old', async () => {
    const { clock, limiter, take } = setup(10, 3);
    take('a');
    await clock.advance(10 * MIN);
    take('b');
    take('c');
    limiter.done('a');
    limiter.done('b');
    limiter.done('c');
    await clock.advance(5 * MIN);
    expect(limiter.check()).toEqual({
      ok: false,
      reason: 'rate-limit',
      message: '3 deletions in the last hour, remediation.maxPerHour is 3 (next one possible in 45m)',
      retryAfterMs: 45 * MIN,
    });
    await clock.advance(45 * MIN - 1);
    expect(limiter.check().ok).toBe(false);
    await clock.advance(1);
    expect(limiter.check().ok).toBe(true);
    expect(limiter.hourlyCount()).toBe(2);
    await clock.advance(HOUR_MS);
    expect(limiter.hourlyCount()).toBe(0);
  });

  it('dry run: charge() spends the hourly budget once per node, and takes no slot', () => {
    const { limiter } = setup(1, 2);
    limiter.charge('a');
    limiter.charge('a');
    expect(limiter.hourlyCount()).toBe(1);
    expect(limiter.inFlightCount()).toBe(0);
    limiter.charge('b');
    expect(limiter.check()).toMatchObject({ ok: false, reason: 'rate-limit' });
    expect(limiter.check({ self: 'a' }).ok).toBe(true); // a node already charged is not held back by its own charge
  });
});

describe('RemediationLimiter: restored from the ledger (a new leader)', () => {
  it('charges each recorded deletion at its own time, once per node, keeping the oldest first', async () => {
    const { clock, limiter } = setup(10, 3);
    const now = clock.now();
    limiter.restore({ uid: 'b', node: 'b', target: 'Node b', at: now - 10 * MIN }, { inFlight: false });
    limiter.restore({ uid: 'a', node: 'a', target: 'Node a', at: now - 40 * MIN }, { inFlight: false });
    limiter.restore({ uid: 'a', node: 'a', target: 'Node a', at: now - 40 * MIN }, { inFlight: false });
    limiter.restore({ uid: 'old', node: 'old', target: 'Node old', at: now - HOUR_MS }, { inFlight: false });
    expect(limiter.hourlyCount()).toBe(2);
    limiter.charge('c');
    // Full: the next slot is when the oldest (a, 40 minutes ago) is an hour old.
    expect(limiter.check()).toMatchObject({ ok: false, reason: 'rate-limit', retryAfterMs: 20 * MIN });
    await clock.advance(20 * MIN);
    expect(limiter.check().ok).toBe(true);
  });

  it('a deletion whose node still exists is in flight from its recorded time, and stalls inFlightTimeout after it', async () => {
    const { clock, limiter } = setup(1, 10);
    limiter.restore({ uid: 'a', node: 'a', target: 'NodeClaim a', at: clock.now() - 10 * MIN }, { inFlight: true });
    expect(limiter.isInFlight('a')).toBe(true);
    expect(limiter.check()).toMatchObject({ ok: false, reason: 'in-flight' });
    await clock.advance(5 * MIN);
    expect(limiter.expire()).toMatchObject([{ uid: 'a', target: 'NodeClaim a' }]);
    expect(limiter.check().ok).toBe(true);
  });
});
