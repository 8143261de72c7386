import { describe, expect, it } from 'vitest';
import { line } from '../../bench/src/scale.js';

// The slope the scale scenario reports (bytes per cached node) is this fit: it must be the
// least-squares line, not the first or last pair of points.
describe('bench scale: line()', () => {
  it('recovers an exact line', () => {
    const { a, b } = line([1000, 2000, 5000], [150, 155, 170]);
    expect(a).toBeCloseTo(145, 9);
    expect(b).toBeCloseTo(0.005, 12);
  });

  it('fits noisy points by least squares', () => {
    // y = 2x + 1 with residuals +1, -2, +1 (summing to zero, orthogonal to x - mean): the fit is exact.
    const { a, b } = line([0, 1, 2], [2, 1, 6]);
    expect(b).toBeCloseTo(2, 9);
    expect(a).toBeCloseTo(1, 9);
  });

  it('has no slope with one point', () => {
    expect(line([5000], [170])).toEqual({ a: 170, b: 0 });
  });
});
