import { describe, expect, it } from 'vitest';
import { containerLimits, parseQuantity } from './cgroups.js';

describe('parseQuantity', () => {
  it.each([
    ['128Mi', 128 * 2 ** 20],
    ['1Gi', 2 ** 30],
    ['64M', 64e6],
    ['1.5G', 1.5e9],
    ['1e9', 1e9],
    ['2E', 2e18],
    ['500m', 0.5],
    ['2', 2],
    ['.5', 0.5],
    ['100k', 1e5],
    ['3Ki', 3072],
  ])('%s -> %d', (q, n) => expect(parseQuantity(q)).toBe(n));

  it.each(['', 'Mi', '12 MB', '1.2.3', '5mi'])('rejects %j', (q) => expect(() => parseQuantity(q)).toThrow(/invalid quantity/));
});

describe('containerLimits', () => {
  it('takes limits only, memory in bytes (rounded up) and CPU in millicores', () => {
    expect(containerLimits({ memory: '64Mi', cpu: '250m' })).toEqual({ memoryBytes: 64 * 2 ** 20, cpuMillis: 250 });
    expect(containerLimits({ memory: '1000.5', cpu: '1.5' })).toEqual({ memoryBytes: 1001, cpuMillis: 1500 });
    expect(containerLimits({ 'ephemeral-storage': '1Gi' })).toEqual({});
    expect(containerLimits(undefined)).toEqual({});
  });
});
