import { describe, expect, it } from 'vitest';
import { DurationError, formatDuration, parseDuration } from './duration.js';

describe('parseDuration', () => {
  it.each([
    ['0', 0],
    ['500ms', 500],
    ['2s', 2000],
    ['1.5s', 1500],
    ['1m', 60_000],
    ['1h30m', 5_400_000],
    ['1m30s250ms', 90_250],
  ])('%s -> %d ms', (input, ms) => expect(parseDuration(input)).toBe(ms));

  it.each(['', '10', 's', '10x', '-1s', '1s garbage', '1 s'])('rejects %j with a message showing the format', (input) => {
    expect(() => parseDuration(input)).toThrow(DurationError);
    expect(() => parseDuration(input)).toThrow(/like "500ms"/);
  });
});

describe('formatDuration', () => {
  it.each([
    [250, '250ms'],
    [1500, '1.5s'],
    [90_000, '1m30s'],
    [3_600_000, '1h'],
  ])('%d ms -> %s', (ms, text) => expect(formatDuration(ms)).toBe(text));
});
