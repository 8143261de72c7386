import type { V1EndpointSlice } from '@kubernetes/client-node';
import { createLogger, type Logger } from '@kube-node-ready/core';
import { describe, expect, it } from 'vitest';
import { FakeClock } from '../../../testing/fake-clock.js';
import { API_ENDPOINTS_REFRESH_MS, ApiEndpoints, apiEndpointsOf } from './api-endpoints.js';

function slice(addressType: string, endpoints: V1EndpointSlice['endpoints'], ports: V1EndpointSlice['ports'] = [{ name: 'https', port: 6443, protocol: 'TCP' }]): V1EndpointSlice {
  return { addressType, endpoints, ports, metadata: { name: 'kubernetes', namespace: 'default', labels: { 'kubernetes.io/service-name': 'kubernetes' } } };
}

describe('apiEndpointsOf', () => {
  it('lists the ready addresses on the https port, IPv6 in brackets, sorted, without repeats', () => {
    const slices = [
      slice('IPv4', [
        { addresses: ['10.0.0.2'], conditions: { ready: true } },
        { addresses: ['10.0.0.1'] }, // no ready condition: ready, per the EndpointSlice API
        { addresses: ['10.0.0.3'], conditions: { ready: false } },
        { addresses: ['10.0.0.2'] },
      ]),
      slice('IPv6', [{ addresses: ['fd00::1'] }]),
    ];
    expect(apiEndpointsOf(slices)).toEqual(['10.0.0.1:6443', '10.0.0.2:6443', '[fd00::1]:6443']);
  });

  it('takes the first TCP port when none is named https, and skips slices without one, FQDN slices and non-IP addresses', () => {
    expect(apiEndpointsOf([slice('IPv4', [{ addresses: ['10.0.0.1'] }], [{ name: 'dns', port: 53, protocol: 'UDP' }, { port: 443 }])])).toEqual(['10.0.0.1:443']);
    expect(apiEndpointsOf([slice('IPv4', [{ addresses: ['10.0.0.1'] }], [{ name: 'dns', port: 53, protocol: 'UDP' }])])).toEqual([]);
    expect(apiEndpointsOf([slice('IPv4', [{ addresses: ['10.0.0.1'] }], null as unknown as V1EndpointSlice['ports'])])).toEqual([]);
    expect(apiEndpointsOf([slice('FQDN', [{ addresses: ['api.example.com'] }])])).toEqual([]);
    expect(apiEndpointsOf([slice('IPv4', [{ addresses: ['not-an-ip'] }])])).toEqual([]);
    expect(apiEndpointsOf([slice('IPv4', null as unknown as V1EndpointSlice['endpoints'])])).toEqual([]);
  });
});

/** A recording fake of the one API call: answers in order, an Error entry fails that call. */
class FakeSlices {
  readonly calls: Array<{ namespace: string; labelSelector: string }> = [];
  constructor(readonly answers: Array<V1EndpointSlice[] | Error>) {}
  listEndpointSlices(namespace: string, labelSelector: string): Promise<V1EndpointSlice[]> {
    this.calls.push({ namespace, labelSelector });
    const next = this.answers.length > 1 ? this.answers.shift() : this.answers[0];
    return next instanceof Error ? Promise.reject(next) : Promise.resolve(next ?? []);
  }
}

async function recordingLogger(): Promise<{ log: Logger; lines: Array<Record<string, unknown>> }> {
  const lines: Array<Record<string, unknown>> = [];
  const log = await createLogger({ level: 'info', destination: { write: (line: string) => void lines.push(JSON.parse(line) as Record<string, unknown>) } });
  return { log, lines };
}

describe('ApiEndpoints', () => {
  const one = [slice('IPv4', [{ addresses: ['10.0.0.1'] }])];
  const two = [slice('IPv4', [{ addresses: ['10.0.0.1'] }, { addresses: ['10.0.0.2'] }])];

  it('reads the kubernetes Service\'s EndpointSlices at start, then on every refresh, until stopped', async () => {
    const clock = new FakeClock();
    const kube = new FakeSlices([one, two]);
    const { log } = await recordingLogger();
    const endpoints = new ApiEndpoints({ kube, clock, log });
    expect(endpoints.current()).toEqual([]);

    await endpoints.start();
    expect(kube.calls).toEqual([{ namespace: 'default', labelSelector: 'kubernetes.io/service-name=kubernetes' }]);
    expect(endpoints.current()).toEqual(['10.0.0.1:6443']);

    await clock.advance(API_ENDPOINTS_REFRESH_MS - 1);
    expect(kube.calls).toHaveLength(1);
    await clock.advance(1);
    expect(kube.calls).toHaveLength(2);
    expect(endpoints.current()).toEqual(['10.0.0.1:6443', '10.0.0.2:6443']);

    endpoints.stop();
    await clock.advance(10 * API_ENDPOINTS_REFRESH_MS);
    expect(kube.calls).toHaveLength(2);
    expect(clock.timers).toBe(0);
  });

  it('keeps the last list when a read fails, says so once, and says when reads work again', async () => {
    const clock = new FakeClock();
    const forbidden = new Error('403 Forbidden: endpointslices.discovery.k8s.io is forbidden');
    const kube = new FakeSlices([one, forbidden, forbidden, two]);
    const { log, lines } = await recordingLogger();
    const endpoints = new ApiEndpoints({ kube, clock, log, refreshMs: 1_000 });

    await endpoints.start();
    await clock.advance(2_000); // two failed reads
    expect(kube.calls).toHaveLength(3);
    expect(endpoints.current()).toEqual(['10.0.0.1:6443']);
    const warnings = lines.filter((l) => l.level === 'warn');
    expect(warnings).toHaveLength(1);
    expect(warnings[0]).toMatchObject({ err: expect.stringContaining('403 Forbidden') as unknown, kept: ['10.0.0.1:6443'] });

    await clock.advance(1_000);
    expect(endpoints.current()).toEqual(['10.0.0.1:6443', '10.0.0.2:6443']);
    expect(lines.filter((l) => l.level === 'info').map((l) => l.endpoints)).toEqual([['10.0.0.1:6443'], ['10.0.0.1:6443', '10.0.0.2:6443']]);
    endpoints.stop();
  });

  it('a first read that fails leaves the list empty and start() still resolves', async () => {
    const clock = new FakeClock();
    const endpoints = new ApiEndpoints({ kube: new FakeSlices([new Error('connection refused')]), clock, log: (await recordingLogger()).log });
    await expect(endpoints.start()).resolves.toBeUndefined();
    expect(endpoints.current()).toEqual([]);
    endpoints.stop();
  });
});
