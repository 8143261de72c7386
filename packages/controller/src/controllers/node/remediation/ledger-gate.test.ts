import { pino } from 'pino';
import { describe, expect, it } from 'vitest';
import { aNode } from '../../../testing/builders.js';
import { FakeClock } from '../../../testing/fake-clock.js';
import { FakeLedger } from '../../../testing/fake-ledger.js';
import type { LedgerEntry } from './ledger.js';
import { LEDGER_RELOAD_MS, LEDGER_RETRY_MS, LedgerGate } from './ledger-gate.js';
import { RemediationLimiter } from './rate-limit.js';

// The gate on its own, with a ledger in memory. The remediator's use of it (nothing deleted before
// the ledger is read, a record before every delete) is pinned in remediator.test.ts.

const T0 = Date.UTC(2025, 0, 1, 12);
const MIN = 60_000;

function setup(o: { nodes?: string[]; maxPerHour?: number } = {}) {
  const clock = new FakeClock(T0);
  const ledger = new FakeLedger(clock);
  const limiter = new RemediationLimiter({ maxInFlight: 2, maxPerHour: o.maxPerHour ?? 5, inFlightTimeoutMs: 15 * MIN }, clock);
  const remembered: string[] = [];
  let changes = 0;
  const nodes = (o.nodes ?? []).map((n) => aNode(n).build());
  const gate = new LedgerGate({
    ledger,
    limiter,
    clock,
    log: pino({ level: 'silent' }),
    maxPerHour: o.maxPerHour ?? 5,
    nodes: () => nodes,
    remember: (entry) => remembered.push(entry.node),
    changed: () => changes++,
  });
  return { clock, ledger, limiter, gate, remembered, changes: () => changes };
}

const entry = (node: string, at: number): LedgerEntry => ({ uid: `uid-${node}`, node, target: `Node ${node}`, at });

describe('LedgerGate', () => {
  it('blocks until the ledger is read: the hourly budget is never assumed empty', async () => {
    const { ledger, gate } = setup();
    expect(gate.verdict()).toEqual({ ok: false, reason: 'ledger', message: `the remediation ledger (${ledger.where}) has not been read yet`, retryAfterMs: LEDGER_RETRY_MS });
    await gate.ensure();
    expect(gate.verdict()).toBeUndefined();
    expect(gate.unavailable).toBe(false);
  });

  it('on reading, charges every deletion of the hour and remembers those whose node still exists as in flight', async () => {
    const { ledger, limiter, gate, remembered } = setup({ nodes: ['still-here'] });
    ledger.entries = [entry('gone', T0 - 30 * MIN), entry('still-here', T0 - 10 * MIN)];
    await gate.ensure();
    expect(limiter.hourlyCount()).toBe(2);
    expect(limiter.inFlightCount()).toBe(1);
    expect(remembered).toEqual(['still-here']);
  });

  it('a ledger that cannot be read blocks with its reason, and is read again at most every LEDGER_RELOAD_MS', async () => {
    const { clock, ledger, gate } = setup();
    ledger.loadError = new Error('forbidden');
    await gate.ensure();
    expect(gate.verdict()).toMatchObject({ reason: 'ledger', message: expect.stringContaining('the remediation ledger cannot be read (forbidden)') as string });
    expect(gate.unavailable).toBe(true);
    ledger.loadError = undefined;
    await clock.advance(LEDGER_RELOAD_MS - 1);
    await gate.ensure();
    expect(ledger.loads).toBe(1);
    await clock.advance(1);
    await gate.ensure();
    expect(ledger.loads).toBe(2);
    expect(gate.verdict()).toBeUndefined();
    expect(gate.unavailable).toBe(false);
  });

  it('concurrent calls share one read', async () => {
    const { ledger, gate } = setup();
    await Promise.all([gate.ensure(), gate.ensure(), gate.ensure()]);
    expect(ledger.loads).toBe(1);
  });

  it('a write that fails holds the node back until a later write succeeds or the node is cleared', async () => {
    const { clock, ledger, gate, changes } = setup();
    await gate.ensure();
    ledger.writeError = new Error('conflict');
    expect(await gate.record(entry('a', clock.now()))).toEqual({ kind: 'failed', message: 'conflict' });
    expect(gate.unavailable).toBe(true);
    expect(gate.clearWriteFailure('uid-a')).toBe(true);
    expect(gate.clearWriteFailure('uid-a')).toBe(false);
    expect(gate.unavailable).toBe(false);

    expect(await gate.record(entry('b', clock.now()))).toMatchObject({ kind: 'failed' });
    ledger.writeError = undefined;
    const before = changes();
    expect(await gate.record(entry('c', clock.now()))).toEqual({ kind: 'ok' });
    expect(gate.unavailable).toBe(false);
    expect(changes()).toBe(before + 1);
  });

  it("a full hour (other replicas' deletions) is 'full', and the limiter learns of them", async () => {
    const { clock, ledger, limiter, gate } = setup({ maxPerHour: 2 });
    await gate.ensure();
    ledger.entries = [entry('x', T0 - 20 * MIN), entry('y', T0 - 5 * MIN)];
    expect(await gate.record(entry('z', clock.now()))).toEqual({ kind: 'full' });
    expect(limiter.hourlyCount()).toBe(2);
  });
});
