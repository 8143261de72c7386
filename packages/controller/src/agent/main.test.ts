import { describe, expect, it } from 'vitest';
import { runAgent } from './main.js';

function capture() {
  const err: string[] = [];
  const out: string[] = [];
  return { io: { stderr: (l: string) => err.push(l), stdout: (l: string) => out.push(l), signal: new AbortController().signal }, err, out };
}

describe('kube-node-ready agent: command line', () => {
  it('--help prints the usage and exits 0', async () => {
    const c = capture();
    expect(await runAgent(['--help'], {}, c.io)).toBe(0);
    expect(c.out.join('\n')).toContain('Usage: kube-node-ready agent');
  });

  it('without NODE_NAME: exit 2, saying where it comes from', async () => {
    const c = capture();
    expect(await runAgent([], {}, c.io)).toBe(2);
    expect(c.err.join('\n')).toContain('NODE_NAME is not set');
    expect(c.err.join('\n')).toContain('fieldRef spec.nodeName');
  });

  it('a controller-only flag: exit 2, naming it', async () => {
    const c = capture();
    expect(await runAgent(['--leader-elect'], { NODE_NAME: 'n' }, c.io)).toBe(2);
    expect(c.err.join('\n')).toContain('--leader-elect is a controller flag');
  });
});
