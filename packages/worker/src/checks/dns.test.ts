import dns2 from 'dns2';
import { afterAll, afterEach, beforeAll, describe, expect, it } from 'vitest';
import { formatHostPort } from '../config.js';
import { closedPort } from '../testing/blackhole.js';
import { startDnsServer, zone, type TestDnsServer } from '../testing/dns-server.js';
import { aService } from '../testing/fake-api.js';
import { runCheck, startTestCluster, type TestCluster } from '../testing/harness.js';
import { serviceOfName } from './dns.js';

const { Packet } = dns2;
const KUBERNETES = 'kubernetes.default.svc.cluster.local';

const servers: TestDnsServer[] = [];
async function dnsServer(...args: Parameters<typeof startDnsServer>): Promise<TestDnsServer> {
  const s = await startDnsServer(...args);
  servers.push(s);
  return s;
}
afterEach(async () => {
  await Promise.all(servers.splice(0).map((s) => s.close()));
});

const at = (s: TestDnsServer) => formatHostPort(s.server);

describe('dns check against loopback nameservers', () => {
  it('passes and reports answer, rcode, transport and latency per nameserver and name', async () => {
    const ns = await dnsServer(zone({ [KUBERNETES]: ['10.96.0.1'] }));
    const outcome = await runCheck('dns', ['--dns-server', at(ns)]);
    expect(outcome).toMatchObject({ ok: true });
    expect(outcome.error).toBeUndefined();
    expect(outcome.details?.lookups).toEqual([
      { server: at(ns), name: KUBERNETES, rcode: 'NOERROR', type: 'A', answers: ['10.96.0.1'], transport: 'udp', latencyMs: expect.any(Number) },
    ]);
    expect(ns.queries).toEqual([{ name: KUBERNETES, type: 'A', transport: 'udp' }]);
  });

  it('fails with NXDOMAIN for a name that does not exist', async () => {
    const ns = await dnsServer(zone({}));
    const outcome = await runCheck('dns', ['--dns-server', at(ns)]);
    expect(outcome.ok).toBe(false);
    expect(outcome.error).toBe(`${KUBERNETES} @${at(ns)}: NXDOMAIN: the name does not exist`);
  });

  it('fails with SERVFAIL, a text distinct from NXDOMAIN', async () => {
    const ns = await dnsServer(() => ({ rcode: Packet.RCODE.SERVFAIL }));
    const outcome = await runCheck('dns', ['--dns-server', at(ns)]);
    expect(outcome.ok).toBe(false);
    expect(outcome.error).toBe(`${KUBERNETES} @${at(ns)}: SERVFAIL: the server failed to resolve the name`);
  });

  it('fails with a timeout bounded by the check timeout when the server never answers', async () => {
    const ns = await dnsServer(() => 'drop');
    const outcome = await runCheck('dns', ['--dns-server', at(ns), '--check-timeout', '400ms']);
    expect(outcome.ok).toBe(false);
    expect(outcome.error).toBe(`${KUBERNETES} @${at(ns)}: timeout: no answer over udp within 400ms (dns check timeout)`);
    expect(outcome.durationMs).toBeGreaterThanOrEqual(390);
    expect(outcome.durationMs).toBeLessThan(1000);
  });

  it('reports "connection refused" when nothing listens on the nameserver port', async () => {
    const port = await closedPort();
    const outcome = await runCheck('dns', ['--dns-server', formatHostPort(port), '--check-timeout', '2s']);
    expect(outcome.error).toBe(`${KUBERNETES} @${formatHostPort(port)}: connection refused: nothing listens on udp ${formatHostPort(port)}`);
    expect(outcome.durationMs).toBeLessThan(1000);
  });

  describe('a truncated UDP answer', () => {
    // 80 A records do not fit a 512-byte UDP answer: dns2's server sets TC and drops them.
    const many = Array.from({ length: 80 }, (_, i) => `10.96.${Math.floor(i / 250)}.${(i % 250) + 1}`);

    it('is repeated over TCP and succeeds', async () => {
      const ns = await dnsServer(zone({ [KUBERNETES]: many }));
      const outcome = await runCheck('dns', ['--dns-server', at(ns)]);
      expect(outcome.ok).toBe(true);
      const [lookup] = outcome.details?.lookups as Array<Record<string, unknown>>;
      expect(lookup).toMatchObject({ transport: 'tcp', rcode: 'NOERROR' });
      expect(lookup?.answers).toEqual(many);
      expect(ns.queries.map((q) => q.transport)).toEqual(['udp', 'tcp']);
    });

    it('fails when the TCP retry is impossible (the UDP answer alone holds no record)', async () => {
      const ns = await dnsServer(zone({ [KUBERNETES]: many }), { tcp: false });
      const outcome = await runCheck('dns', ['--dns-server', at(ns)]);
      expect(outcome.ok).toBe(false);
      expect(outcome.error).toContain(`connection refused: nothing listens on tcp ${at(ns)}`);
    });
  });

  it('checks every nameserver individually: one dead server fails the check, the good one is reported too', async () => {
    const good = await dnsServer(zone({ [KUBERNETES]: ['10.96.0.1'] }));
    const dead = await dnsServer(() => 'drop');
    const outcome = await runCheck('dns', ['--dns-server', `${at(good)},${at(dead)}`, '--check-timeout', '400ms']);
    expect(outcome.ok).toBe(false);
    expect(outcome.error).toBe(`${KUBERNETES} @${at(dead)}: timeout: no answer over udp within 400ms (dns check timeout)`);
    // The server it failed against, for the controller to see when several nodes fail against it.
    expect(outcome.target).toBe(at(dead));
    const lookups = outcome.details?.lookups as Array<Record<string, unknown>>;
    expect(lookups.map((l) => [l.server, l.answers ?? l.error])).toEqual([
      [at(good), ['10.96.0.1']],
      [at(dead), 'timeout: no answer over udp within 400ms (dns check timeout)'],
    ]);
  });

  it('resolves external names only when configured', async () => {
    const ns = await dnsServer(zone({ [KUBERNETES]: ['10.96.0.1'], 'registry.example.com': ['10.20.30.40'] }));
    const without = await runCheck('dns', ['--dns-server', at(ns)]);
    expect(ns.queries.map((q) => q.name)).toEqual([KUBERNETES]);
    expect(without.ok).toBe(true);
    const withExternal = await runCheck('dns', ['--dns-server', at(ns), '--external-dns-names', 'registry.example.com,missing.example.com']);
    expect(withExternal.error).toBe(`missing.example.com @${at(ns)}: NXDOMAIN: the name does not exist`);
  });

  it('fails when there is no name to resolve', async () => {
    const ns = await dnsServer(zone({}));
    const outcome = await runCheck('dns', ['--dns-server', at(ns), '--dns-names', '']);
    expect(outcome.error).toBe('no name to resolve: dns.names and dns.externalNames are both empty');
    expect(ns.queries).toEqual([]);
  });

  it('falls back to AAAA when the name has no A record', async () => {
    const ns = await dnsServer(zone({ [KUBERNETES]: ['fd00:10:96::1'] }));
    const outcome = await runCheck('dns', ['--dns-server', at(ns)]);
    expect(outcome.ok).toBe(true);
    expect(outcome.details?.lookups).toEqual([expect.objectContaining({ type: 'AAAA', answers: ['fd00:10:96::1'] })]);
  });

  describe('a slow nameserver', () => {
    it('passes with a warning when an answer takes longer than dns.slowAfter (default 1s)', async () => {
      const ns = await dnsServer(() => ({ addresses: ['10.96.0.1'], delayMs: 1500 }));
      const outcome = await runCheck('dns', ['--dns-server', at(ns)]);
      expect(outcome.ok).toBe(true);
      expect(outcome.warnings).toEqual([expect.stringMatching(new RegExp(`^${KUBERNETES} @${at(ns).replace(/\./g, '\\.')}: slow: 1\\.5\\d*s, the UDP query was sent 2 times \\(over dns\\.slowAfter 1s\\)$`))]);
    });

    it('fails instead with onSlow: fail', async () => {
      const ns = await dnsServer(() => ({ addresses: ['10.96.0.1'], delayMs: 300 }));
      const outcome = await runCheck('dns', ['--dns-server', at(ns), '--dns-slow-after', '200ms', '--on-slow', 'fail']);
      expect(outcome.ok).toBe(false);
      // At least the server's 300 ms delay; a loaded machine may add to it.
      expect(outcome.error).toMatch(/: slow: (([3-9]\d\d)ms|\d+(\.\d+)?s) \(over dns\.slowAfter 200ms\)$/);
      expect(outcome.warnings).toBeUndefined();
    });

    it('a fast answer gives no warning', async () => {
      const ns = await dnsServer(zone({ [KUBERNETES]: ['10.96.0.1'] }));
      expect((await runCheck('dns', ['--dns-server', at(ns)])).warnings).toBeUndefined();
    });
  });

  it('states a server that does not answer once, with every name it was asked', async () => {
    const port = await closedPort();
    const outcome = await runCheck('dns', ['--dns-server', formatHostPort(port), '--external-dns-names', 'registry.example.com,mirror.example.com']);
    expect(outcome.error).toBe(
      `${KUBERNETES}, registry.example.com, mirror.example.com @${formatHostPort(port)}: connection refused: nothing listens on udp ${formatHostPort(port)}`,
    );
  });

  it('fails when a name exists without any address', async () => {
    const ns = await dnsServer(() => ({ addresses: [] }));
    const outcome = await runCheck('dns', ['--dns-server', at(ns)]);
    expect(outcome.error).toBe(`${KUBERNETES} @${at(ns)}: no A or AAAA record (NOERROR with an empty answer)`);
  });
});

describe('dns check compared with the API', () => {
  let cluster: TestCluster;
  beforeAll(async () => {
    cluster = await startTestCluster();
    cluster.api.state.services.set('default/kubernetes', aService('default', 'kubernetes', { clusterIP: '10.96.0.1' }));
  });
  afterAll(() => cluster.close());

  it('fails when the answer disagrees with the ClusterIP of default/kubernetes', async () => {
    const ns = await dnsServer(zone({ [KUBERNETES]: ['10.0.0.9'] }));
    // The api check is enabled too, so the API is in use and the answer is compared.
    const outcome = await runCheck('dns', ['--checks', 'dns,api', '--dns-server', at(ns)], cluster.env);
    expect(outcome.ok).toBe(false);
    expect(outcome.error).toBe(`${KUBERNETES} @${at(ns)}: answered 10.0.0.9 but Service default/kubernetes has address 10.96.0.1`);
  });

  it('passes when the answer is the ClusterIP, and records what it compared', async () => {
    const ns = await dnsServer(zone({ [KUBERNETES]: ['10.96.0.1'] }));
    const outcome = await runCheck('dns', ['--checks', 'dns,api', '--dns-server', at(ns)], cluster.env);
    expect(outcome.ok).toBe(true);
    expect(outcome.details?.lookups).toEqual([expect.objectContaining({ answers: ['10.96.0.1'], expected: ['10.96.0.1'] })]);
  });

  it('does not compare when only the dns check runs (no API in use)', async () => {
    const ns = await dnsServer(zone({ [KUBERNETES]: ['10.0.0.9'] }));
    const before = cluster.api.state.requests.length;
    const outcome = await runCheck('dns', ['--dns-server', at(ns)], cluster.env);
    expect(outcome.ok).toBe(true);
    expect(cluster.api.state.requests.length).toBe(before);
  });
});

describe('serviceOfName', () => {
  it.each([
    ['kubernetes.default.svc.cluster.local', 'cluster.local', { namespace: 'default', name: 'kubernetes' }],
    ['kube-dns.kube-system.svc.corp.example', 'corp.example', { namespace: 'kube-system', name: 'kube-dns' }],
    ['kubernetes.default.svc.cluster.local', 'other.domain', undefined],
    ['a.b.c.svc.cluster.local', 'cluster.local', undefined],
    ['example.com', 'cluster.local', undefined],
  ])('%s in %s', (name, domain, ref) => expect(serviceOfName(name, domain)).toEqual(ref));
});
