import { describe, expect, it } from 'vitest';
import { FakeClock } from '../../../testing/fake-clock.js';
import { BREAKER_RECHECK_MS, CircuitBreaker } from './breaker.js';
import { parseRemediationConfig, type RemediationConfigInput } from './config.js';

const MIN = 60_000;

function setup(input: RemediationConfigInput['circuitBreaker'] = {}) {
  const clock = new FakeClock('2025-01-01T00:00:00Z');
  const breaker = new CircuitBreaker(parseRemediationConfig({ circuitBreaker: input }).circuitBreaker, clock);
  let n = 0;
  const finish = (failed: boolean) => breaker.record(`uid-${n++}/1`, failed);
  return { clock, breaker, finish };
}

describe('CircuitBreaker: the window rule', () => {
  it('stays closed below minSamples, however many of them failed', () => {
    const { breaker, finish } = setup();
    for (let i = 0; i < 4; i++) finish(true);
    expect(breaker.checkWindow()).toEqual({ open: false });
  });

  it('opens when more than maxFailedPercent of the window failed, once the sample is large enough', () => {
    const { breaker, finish } = setup();
    for (let i = 0; i < 7; i++) finish(false);
    for (let i = 0; i < 3; i++) finish(true);
    expect(breaker.checkWindow().open).toBe(false); // 30% is not more than 30%
    finish(true); // 4 of 11 = 36.4%
    expect(breaker.checkWindow()).toEqual({
      open: true,
      message: 'circuit breaker open: 4 of the 11 verifications finished in the last 15m failed (36.4% > 30%)',
      recheckAfterMs: BREAKER_RECHECK_MS,
    });
  });

  it('closes by itself when the failures age out of the window (fake clock)', async () => {
    const { clock, breaker, finish } = setup({ window: '10m' });
    for (let i = 0; i < 5; i++) finish(true);
    expect(breaker.checkWindow().open).toBe(true);
    await clock.advance(9 * MIN);
    expect(breaker.checkWindow().open).toBe(true);
    await clock.advance(MIN);
    expect(breaker.checkWindow()).toEqual({ open: false });
    expect(breaker.windowStats()).toEqual({ total: 0, failed: 0 });
  });

  it('closes when nodes start passing again (the share drops), without waiting for the window', () => {
    const { breaker, finish } = setup();
    for (let i = 0; i < 5; i++) finish(true);
    expect(breaker.checkWindow().open).toBe(true);
    for (let i = 0; i < 12; i++) finish(false); // 5 of 17 = 29%
    expect(breaker.checkWindow().open).toBe(false);
  });

  it('counts one sample per node and verification: recording the same key again changes nothing', () => {
    const { breaker } = setup({ minSamples: 1 });
    for (let i = 0; i < 10; i++) breaker.record('uid-a/6', true);
    breaker.record('uid-b/1', false);
    breaker.record('uid-c/1', false);
    expect(breaker.windowStats()).toEqual({ total: 3, failed: 1 });
    expect(breaker.checkWindow().open).toBe(true); // 33% > 30%
  });

  it('a sample recorded with an old time (a node that passed long ago) does not count', () => {
    const { clock, breaker } = setup({ minSamples: 1 });
    breaker.record('uid-old/1', true, clock.now() - 20 * MIN);
    expect(breaker.windowStats()).toEqual({ total: 0, failed: 0 });
  });

  it('off: never opens', () => {
    const { breaker, finish } = setup({ enabled: false });
    for (let i = 0; i < 50; i++) finish(true);
    expect(breaker.checkWindow().open).toBe(false);
    expect(breaker.checkPool('gpu', { nodes: 10, failed: 10 }).open).toBe(false);
  });
});

describe('CircuitBreaker: the NodePool rule', () => {
  it.each([
    // nodes, failed, open?   (allowance: ceil(20% x nodes))
    [1, 1, false],
    [3, 1, false],
    [5, 1, false],
    [5, 2, true],
    [10, 2, false],
    [10, 3, true],
    [20, 4, false],
    [20, 5, true],
  ])('%i nodes, %i failed: open %s', (nodes, failed, open) => {
    const { breaker } = setup();
    expect(breaker.checkPool('general', { nodes, failed }).open).toBe(open);
  });

  it('names the pool, or the group of nodes in no NodePool', () => {
    const { breaker } = setup();
    const gpu = breaker.checkPool('gpu', { nodes: 10, failed: 5 });
    expect(gpu.open && gpu.message).toBe('circuit breaker open: 5 of 10 NodePool gpu have failed (50% > 20%, at most 2 allowed)');
    const none = breaker.checkPool('', { nodes: 4, failed: 2 });
    expect(none.open && none.message).toContain('2 of 4 nodes in no NodePool have failed');
  });

  it('check(): the window first, then the pool', () => {
    const { breaker, finish } = setup();
    expect(breaker.check('gpu', { nodes: 10, failed: 1 }).open).toBe(false);
    expect(breaker.check('gpu', { nodes: 10, failed: 5 }).open).toBe(true);
    for (let i = 0; i < 5; i++) finish(true);
    const both = breaker.check('gpu', { nodes: 10, failed: 5 });
    expect(both.open && both.message).toMatch(/verifications finished/);
  });

  it('100% never opens on that rule', () => {
    const { breaker } = setup({ maxFailedPercentPerNodePool: 100 });
    expect(breaker.checkPool('gpu', { nodes: 3, failed: 3 }).open).toBe(false);
  });
});
