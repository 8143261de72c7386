import { Registry } from 'prom-client';
import { describe, expect, it } from 'vitest';
import { ControllerMetrics } from '../metrics/metrics.js';
import { buildServer, parseBindAddress, type Probe } from './server.js';

function setup(state: { live: Probe; ready: Probe }, serve?: { metrics?: boolean; health?: boolean }) {
  const registry = new Registry();
  new ControllerMetrics(registry, { version: 'v', commit: 'c' });
  return buildServer({ registry, liveness: () => state.live, readiness: () => state.ready, ...(serve ? { serve } : {}) });
}

describe('buildServer', () => {
  it('serves Prometheus metrics from the injected registry', async () => {
    const server = setup({ live: { ok: true }, ready: { ok: true } });
    const res = await server.inject({ method: 'GET', url: '/metrics' });
    expect(res.statusCode).toBe(200);
    expect(res.headers['content-type']).toMatch(/^text\/plain; version=0.0.4/);
    expect(res.body).toContain('kube_node_ready_controller_healthy 0');
  });

  it('reports liveness and readiness, and their reasons when failing', async () => {
    const state = { live: { ok: true } as Probe, ready: { ok: false, reason: 'node cache not synced' } as Probe };
    const server = setup(state);
    expect((await server.inject('/healthz')).statusCode).toBe(200);
    const notReady = await server.inject('/readyz');
    expect(notReady.statusCode).toBe(503);
    expect(notReady.body).toBe('not ok: node cache not synced\n');

    state.ready = { ok: true };
    state.live = { ok: false, reason: 'node watch stalled' };
    expect((await server.inject('/readyz')).statusCode).toBe(200);
    const dead = await server.inject('/healthz');
    expect(dead.statusCode).toBe(500);
    expect(dead.body).toContain('node watch stalled');
  });

  it('can serve health and metrics on separate instances', async () => {
    const healthOnly = setup({ live: { ok: true }, ready: { ok: true } }, { metrics: false });
    expect((await healthOnly.inject('/metrics')).statusCode).toBe(404);
    expect((await healthOnly.inject('/readyz')).statusCode).toBe(200);
    const metricsOnly = setup({ live: { ok: true }, ready: { ok: true } }, { health: false });
    expect((await metricsOnly.inject('/healthz')).statusCode).toBe(404);
  });

  it('listens on a real port', async () => {
    const server = setup({ live: { ok: true }, ready: { ok: true } });
    await server.listen({ host: '127.0.0.1', port: 0 });
    try {
      const address = server.server.address();
      const port = typeof address === 'object' && address ? address.port : 0;
      const res = await fetch(`http://127.0.0.1:${port}/healthz`);
      expect(await res.text()).toBe('ok\n');
    } finally {
      await server.close();
    }
  });
});

describe('parseBindAddress', () => {
  it.each([
    ['0.0.0.0:8080', { host: '0.0.0.0', port: 8080 }],
    [':9090', { host: '0.0.0.0', port: 9090 }],
    ['127.0.0.1:0', { host: '127.0.0.1', port: 0 }],
    ['[::1]:8080', { host: '::1', port: 8080 }],
  ])('%s', (input, expected) => expect(parseBindAddress(input)).toEqual(expected));
});
