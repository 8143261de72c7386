import { mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, describe, expect, it } from 'vitest';
import { auditClient, countWrites } from '../../bench/src/race.js';

// The race's writes per node come from the API server's audit log: who made each write is read from
// the identity and user agent it carried, and only the run's window counts.
const event = (t: string, username: string, verb: string, resource: string, extra: { subresource?: string; userAgent?: string; code?: number } = {}) => ({
  requestReceivedTimestamp: t,
  user: { username },
  verb,
  objectRef: { resource, ...(extra.subresource ? { subresource: extra.subresource } : {}) },
  userAgent: extra.userAgent ?? 'node',
  responseStatus: { code: extra.code ?? 201 },
});

describe('bench race: auditClient()', () => {
  it.each([
    [event('', 'system:serviceaccount:kube-system:kube-node-ready-controller', 'create', 'pods'), 'controller'],
    [event('', 'system:serviceaccount:kube-system:kube-node-ready-worker', 'create', 'events'), 'worker pods'],
    [event('', 'system:serviceaccount:node-readiness-controller:node-readiness-controller', 'patch', 'nodes'), 'controller'],
    [event('', 'system:serviceaccount:node-readiness-controller:cni-reporter', 'update', 'nodes', { subresource: 'status' }), 'reporter pods'],
    [event('', 'system:kube-scheduler', 'create', 'pods', { subresource: 'binding', userAgent: 'kube-scheduler/v1.36.3 (linux/amd64)' }), 'kube-scheduler'],
    [event('', 'sandbox-admin', 'patch', 'nodes', { userAgent: 'kube-controller-manager/v1.36.3 (linux/amd64) kubernetes/abc/system:serviceaccount:kube-system:node-controller' }), 'kube-controller-manager'],
    [event('', 'sandbox-admin', 'create', 'events', { userAgent: 'karpenter' }), 'karpenter'],
    [event('', 'sandbox-admin', 'create', 'nodes'), 'bench'],
    [event('', 'sandbox-admin', 'patch', 'nodes', { subresource: 'status' }), 'kubelet'],
  ])('%o -> %s', (e, client) => expect(auditClient(e)).toBe(client));
});

describe('bench race: countWrites()', () => {
  const dir = mkdtempSync(join(tmpdir(), 'knr-race-test-'));
  afterAll(() => rmSync(dir, { recursive: true, force: true }));

  it('counts the window per node by client, leaves out Leases and the bench, and counts refused writes', () => {
    const file = join(dir, 'audit.log');
    const lines = [
      event('2026-11-29T08:00:00.000000Z', 'system:serviceaccount:kube-system:kube-node-ready-controller', 'create', 'pods'), // before the window
      event('2026-11-29T08:00:01.000000Z', 'system:serviceaccount:kube-system:kube-node-ready-controller', 'create', 'pods'),
      event('2026-11-29T08:00:01.500000Z', 'system:serviceaccount:kube-system:kube-node-ready-controller', 'patch', 'nodes', { code: 409 }),
      event('2026-11-29T08:00:02.000000Z', 'sandbox-admin', 'patch', 'nodes', { subresource: 'status' }),
      event('2026-11-29T08:00:02.000000Z', 'sandbox-admin', 'update', 'leases'),
      event('2026-11-29T08:00:02.000000Z', 'sandbox-admin', 'create', 'nodes'),
      event('2026-11-29T08:00:09.000000Z', 'sandbox-admin', 'create', 'events'), // after the window
    ];
    writeFileSync(file, lines.map((l) => JSON.stringify(l)).join('\n') + '\n{"partial lin');
    const w = countWrites(file, Date.parse('2026-11-29T08:00:01Z'), Date.parse('2026-11-29T08:00:05Z'), 2);
    expect(w.byRequest).toEqual({ 'controller: create pods': 1, 'controller: patch nodes': 1, 'kubelet: patch nodes/status': 1 });
    expect(w.byClient).toEqual({ controller: 1, kubelet: 0.5 });
    expect(w.perNode).toBe(1.5);
    expect(w.refused).toBe(1);
    // From the log's size before a run on: an earlier run's lines are not read at all.
    const offset = Buffer.byteLength(lines.slice(0, 2).map((l) => JSON.stringify(l) + '\n').join(''));
    const later = countWrites(file, 0, Date.parse('2026-11-29T08:00:05Z'), 1, offset);
    expect(later.byRequest).toEqual({ 'controller: patch nodes': 1, 'kubelet: patch nodes/status': 1 });
  });
});
