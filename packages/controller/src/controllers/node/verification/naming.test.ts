import { describe, expect, it } from 'vitest';
import { MAX_POD_NAME, nodeLabelValue, workerPodName } from './naming.js';

const DNS1123_LABEL = /^[a-z0-9]([-a-z0-9]*[a-z0-9])?$/;
const LONG = `${'very-long-segment.'.repeat(14)}example.internal`.slice(0, 253);

describe('workerPodName', () => {
  it('is tested with a node name of the maximum length', () => expect(LONG).toHaveLength(253));

  it('is readable, short and deterministic for ordinary names', () => {
    const name = workerPodName('ip-10-0-1-23.ec2.internal', 'uid-1', 1);
    expect(name).toMatch(/^knr-ip-10-0-1-23-ec2-internal-[0-9a-f]{8}-a1$/);
    expect(workerPodName('ip-10-0-1-23.ec2.internal', 'uid-1', 1)).toBe(name);
  });

  it.each([
    ['a', 1],
    ['node-1', 7],
    [LONG, 1],
    [LONG, 123_456],
    ['x'.repeat(253), 99],
    [`${'a'.repeat(60)}-.-b`, 3],
  ])('fits 63 characters and is a DNS label for %s attempt %d', (node, attempt) => {
    const name = workerPodName(node, 'd6f3b0f4-5b8e-4c1a-9a57-0c4d7c1e2f33', attempt);
    expect(name.length).toBeLessThanOrEqual(MAX_POD_NAME);
    expect(name).toMatch(DNS1123_LABEL);
    expect(name.endsWith(`-a${attempt}`)).toBe(true);
  });

  it('differs by attempt, by node UID (a recreated node), and by full name even when truncation makes the prefix equal', () => {
    const base = workerPodName(LONG, 'uid-1', 1);
    expect(workerPodName(LONG, 'uid-1', 2)).not.toBe(base);
    expect(workerPodName(LONG, 'uid-2', 1)).not.toBe(base);
    expect(workerPodName(`${LONG.slice(0, 252)}x`, 'uid-1', 1)).not.toBe(base);
  });

  it('rejects attempt numbers that are not positive integers', () => {
    expect(() => workerPodName('n', 'u', 0)).toThrow(RangeError);
    expect(() => workerPodName('n', 'u', 1.5)).toThrow(RangeError);
  });
});

describe('nodeLabelValue', () => {
  it('is the node name when that is a valid label value', () => {
    expect(nodeLabelValue('ip-10-0-1-23.ec2.internal')).toBe('ip-10-0-1-23.ec2.internal');
  });

  it('hashes names longer than 63 characters, distinctly', () => {
    const a = nodeLabelValue(LONG);
    const b = nodeLabelValue(`${LONG.slice(0, 252)}x`);
    expect(a.length).toBeLessThanOrEqual(63);
    expect(a).toMatch(/^([A-Za-z0-9][-A-Za-z0-9_.]*)?[A-Za-z0-9]$/);
    expect(a).not.toBe(b);
  });
});
