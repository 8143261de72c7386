import { describe, expect, it } from 'vitest';
import { compareQuantities, parseQuantity } from './quantity.js';

const cmp = (a: string, b: string): number => compareQuantities(parseQuantity(a)!, parseQuantity(b)!);

describe('parseQuantity and compareQuantities (resource.Quantity, exactly)', () => {
  it.each<[string, string, number]>([
    ['1', '1', 0],
    ['0', '1', -1],
    ['2', '1', 1],
    ['100m', '1', -1],
    ['1000m', '1', 0],
    ['1.5Gi', '1536Mi', 0],
    ['1536Mi', '1610612736', 0],
    ['1Gi', '1G', 1],
    ['1k', '1000', 0],
    ['1Ki', '1000', 1],
    ['1e3', '1k', 0],
    ['1E-3', '1m', 0],
    ['.5', '500m', 0],
    ['1.', '1', 0],
    ['+2', '2', 0],
    ['500u', '1m', -1],
    ['1n', '0', 1],
    ['110', '1e2', 1],
  ])('%s vs %s: %d', (a, b, expected) => {
    expect(cmp(a, b)).toBe(expected);
  });

  it.each(['', 'one', '1Kb', '1.2.3', '1e', 'Gi', '1 Gi', '1e999'])('refuses %j', (text) => {
    expect(parseQuantity(text)).toBeUndefined();
  });
});
