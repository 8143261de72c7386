import { describe, expect, it } from 'vitest';
import { parseBatchFailures } from './ip.js';

describe('parseBatchFailures', () => {
  it('maps each failed line of `ip -force -b -` to its message', () => {
    const stderr = [
      'Cannot find device "knr1p5"',
      'Command failed -:2',
      'RTNETLINK answers: File exists',
      'Command failed -:7',
      'Cannot remove namespace file "/run/netns/knr1-p9": No such file or directory',
      'Command failed -:9',
      '',
    ].join('\n');
    expect([...parseBatchFailures(stderr)]).toEqual([
      [2, 'Cannot find device "knr1p5"'],
      [7, 'RTNETLINK answers: File exists'],
      [9, 'Cannot remove namespace file "/run/netns/knr1-p9": No such file or directory'],
    ]);
  });
  it('finds nothing in a clean run', () => expect(parseBatchFailures('').size).toBe(0));
});
