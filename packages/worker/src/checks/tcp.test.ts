import { afterAll, afterEach, beforeAll, describe, expect, it } from 'vitest';
import { formatHostPort } from '../config.js';
import { closedPort, startBlackhole } from '../testing/blackhole.js';
import { aService, aSlice } from '../testing/fake-api.js';
import { runCheck, startTestCluster, type TestCluster } from '../testing/harness.js';

describe('tcp check', () => {
  let c: TestCluster;
  const cleanups: Array<() => void> = [];
  beforeAll(async () => {
    c = await startTestCluster();
    // The fake API stands in for both the kubernetes Service ClusterIP and the API endpoint.
    c.api.state.services.set('default/kubernetes', aService('default', 'kubernetes', { clusterIP: '127.0.0.1', port: c.api.port }));
    c.api.state.slices.set('default/kubernetes', [aSlice('kubernetes', [{ address: '127.0.0.1', ready: true }], { name: 'https', port: c.api.port })]);
  });
  afterAll(() => c.close());
  afterEach(() => cleanups.splice(0).forEach((f) => f()));

  it('connects to the kubernetes Service, each API endpoint and the configured targets', async () => {
    const outcome = await runCheck('tcp', ['--tcp-targets', `127.0.0.1:${c.api.port}`], c.env);
    expect(outcome.error).toBeUndefined();
    expect(outcome.details?.connections).toEqual([
      { via: 'kubernetes Service', address: `127.0.0.1:${c.api.port}`, ok: true, latencyMs: expect.any(Number) },
      { via: 'API endpoint', address: `127.0.0.1:${c.api.port}`, ok: true, latencyMs: expect.any(Number) },
      { via: 'target', address: `127.0.0.1:${c.api.port}`, ok: true, latencyMs: expect.any(Number) },
    ]);
  });

  it('reports "connection refused" for a dead target', async () => {
    const dead = await closedPort();
    const outcome = await runCheck('tcp', ['--tcp-targets', formatHostPort(dead)], c.env);
    expect(outcome.ok).toBe(false);
    expect(outcome.error).toBe(`target ${formatHostPort(dead)}: connection refused`);
  });

  it('reports "timeout" for a blackholed target, bounded by the check timeout', async () => {
    const hole = await startBlackhole();
    cleanups.push(hole.close);
    const outcome = await runCheck('tcp', ['--tcp-targets', formatHostPort(hole.target), '--check-timeout', '500ms'], c.env);
    expect(outcome.ok).toBe(false);
    expect(outcome.error).toBe(`target ${formatHostPort(hole.target)}: timeout: no connection within 500ms (tcp check timeout)`);
    expect(outcome.durationMs).toBeLessThan(1200);
  });

  it('reports an API endpoint that refuses connections', async () => {
    const dead = await closedPort();
    c.api.state.slices.set('default/kubernetes', [
      aSlice('kubernetes', [{ address: '127.0.0.1', ready: true }], { name: 'https', port: dead.port }),
    ]);
    const outcome = await runCheck('tcp', [], c.env);
    expect(outcome.error).toBe(`API endpoint ${formatHostPort(dead)}: connection refused`);
    c.api.state.slices.set('default/kubernetes', [aSlice('kubernetes', [{ address: '127.0.0.1', ready: true }], { name: 'https', port: c.api.port })]);
  });

  it('still dials configured targets when the API read fails, and says why the API part is missing', async () => {
    c.api.state.forbidden.add('/api/v1/namespaces/default/services/kubernetes');
    try {
      const outcome = await runCheck('tcp', ['--tcp-targets', `127.0.0.1:${c.api.port}`], c.env);
      expect(outcome.ok).toBe(false);
      expect(outcome.error).toMatch(/^cannot read Service default\/kubernetes: GET \/api\/v1\/namespaces\/default\/services\/kubernetes: 403 Forbidden/);
      expect(outcome.details?.connections).toEqual([
        expect.objectContaining({ via: 'API endpoint', ok: true }),
        expect.objectContaining({ via: 'target', ok: true }),
      ]);
    } finally {
      c.api.state.forbidden.clear();
    }
  });
});
