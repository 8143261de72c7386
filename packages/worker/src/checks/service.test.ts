import { afterAll, afterEach, beforeAll, describe, expect, it } from 'vitest';
import { formatHostPort } from '../config.js';
import { closedPort } from '../testing/blackhole.js';
import { startDnsServer, zone, type TestDnsServer } from '../testing/dns-server.js';
import { aService, aSlice } from '../testing/fake-api.js';
import { runCheck, startTestCluster, type TestCluster } from '../testing/harness.js';

describe('service check', () => {
  let c: TestCluster;
  let dns: TestDnsServer;
  const records: Record<string, string[]> = {};
  beforeAll(async () => {
    c = await startTestCluster();
    dns = await startDnsServer((q, t) => zone(records)(q, t));
  });
  afterAll(async () => {
    await dns.close();
    await c.close();
  });
  afterEach(() => {
    c.api.state.services.clear();
    c.api.state.slices.clear();
    for (const k of Object.keys(records)) delete records[k];
  });

  const healthy = () => {
    c.api.state.services.set('default/kubernetes', aService('default', 'kubernetes', { clusterIP: '10.96.0.1' }));
    c.api.state.slices.set('default/kubernetes', [aSlice('kubernetes', [{ address: '10.0.0.1', ready: true }], { name: 'https', port: 6443 })]);
    c.api.state.services.set('kube-system/kube-dns', aService('kube-system', 'kube-dns', { clusterIP: '10.96.0.10', port: 53, portName: 'dns', protocol: 'UDP' }));
    c.api.state.slices.set('kube-system/kube-dns', [
      aSlice('kube-dns', [{ address: '10.244.1.5' }, { address: '10.244.2.7', ready: false }], { name: 'dns', port: 53, protocol: 'UDP' }),
    ]);
    records['kubernetes.default.svc.cluster.local'] = ['10.96.0.1'];
    records['kube-dns.kube-system.svc.cluster.local'] = ['10.96.0.10'];
  };
  const run = (argv: string[] = []) => runCheck('service', ['--dns-server', formatHostPort(dns.server), ...argv], c.env);

  it('passes when both Services exist, have ready endpoints and DNS agrees', async () => {
    healthy();
    const outcome = await run();
    expect(outcome.error).toBeUndefined();
    expect(outcome.details?.services).toEqual([
      expect.objectContaining({ service: 'default/kubernetes', clusterIPs: ['10.96.0.1'], readyEndpoints: 1, notReadyEndpoints: 0 }),
      expect.objectContaining({ service: 'kube-system/kube-dns', clusterIPs: ['10.96.0.10'], readyEndpoints: 1, notReadyEndpoints: 1 }),
    ]);
  });

  it('fails a Service without ready endpoints', async () => {
    healthy();
    c.api.state.slices.set('kube-system/kube-dns', [aSlice('kube-dns', [{ address: '10.244.1.5', ready: false }], { name: 'dns', port: 53, protocol: 'UDP' })]);
    const outcome = await run();
    expect(outcome.ok).toBe(false);
    expect(outcome.error).toBe('Service kube-system/kube-dns: no ready endpoints (1 endpoint(s), none ready)');
    // The cluster's state, read from the API: the controller does not count it against the node.
    expect(outcome.noReadyEndpoints).toEqual(['kube-system/kube-dns']);
  });

  it('fails a Service with no EndpointSlice at all', async () => {
    healthy();
    c.api.state.services.set('team/web', aService('team', 'web', { clusterIP: '10.96.5.5', port: 80, portName: 'http' }));
    const outcome = await run(['--service', 'default/kubernetes,team/web']);
    expect(outcome.error).toBe('Service team/web: no ready endpoints (no EndpointSlice)');
    expect(outcome.noReadyEndpoints).toEqual(['team/web']);
  });

  it('fails a Service that does not exist', async () => {
    healthy();
    const outcome = await run(['--service', 'team/missing']);
    expect(outcome.error).toMatch(/^Service team\/missing: not found \(GET \/api\/v1\/namespaces\/team\/services\/missing: 404 Not Found: services "missing" not found\)$/);
    expect(outcome.noReadyEndpoints).toBeUndefined();
  });

  it('a Service without ready endpoints beside another problem is not only the cluster\'s state', async () => {
    healthy();
    c.api.state.slices.set('kube-system/kube-dns', [aSlice('kube-dns', [{ address: '10.244.1.5', ready: false }], { name: 'dns', port: 53, protocol: 'UDP' })]);
    const outcome = await run(['--service', 'default/kubernetes,team/missing']);
    expect(outcome.ok).toBe(false);
    expect(outcome.noReadyEndpoints).toBeUndefined();
  });

  it('fails when DNS and the API disagree', async () => {
    healthy();
    records['kube-dns.kube-system.svc.cluster.local'] = ['10.96.0.99'];
    const outcome = await run();
    expect(outcome.error).toBe(
      'Service kube-system/kube-dns: DNS and API disagree: kube-dns.kube-system.svc.cluster.local answered 10.96.0.99 but Service kube-system/kube-dns has address 10.96.0.10',
    );
  });

  it('fails when DNS does not know the Service', async () => {
    healthy();
    delete records['kube-dns.kube-system.svc.cluster.local'];
    const outcome = await run();
    expect(outcome.error).toBe(
      `Service kube-system/kube-dns: DNS kube-dns.kube-system.svc.cluster.local @${formatHostPort(dns.server)}: NXDOMAIN: the name does not exist`,
    );
  });

  it('states once, for every Service, that no nameserver answered, leaving the cause to the dns check', async () => {
    healthy();
    const dead = formatHostPort(await closedPort());
    const withDns = await runCheck('service', ['--checks', 'dns,service', '--dns-server', dead], c.env);
    expect(withDns.error).toBe('DNS not compared for Services default/kubernetes, kube-system/kube-dns: no nameserver answered (the dns check says why)');
    // Without the dns check, the service check says why itself (once).
    const alone = await runCheck('service', ['--dns-server', dead], c.env);
    expect(alone.error).toBe(
      `DNS not compared for Services default/kubernetes, kube-system/kube-dns: no nameserver answered (@${dead}: connection refused: nothing listens on udp ${dead})`,
    );
  });
});
