import dgram from 'node:dgram';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { startDnsServer, zone, type TestDnsServer } from '../testing/dns-server.js';
import { aSlice } from '../testing/fake-api.js';
import { runCheck, startTestCluster, type TestCluster } from '../testing/harness.js';

describe('podnet check', () => {
  let c: TestCluster;
  let answering: TestDnsServer;
  let silent: dgram.Socket;
  beforeAll(async () => {
    c = await startTestCluster();
    // Two "DNS pods" on the same port: 127.0.0.2 answers, 127.0.0.3 receives and never answers.
    answering = await startDnsServer(zone({ 'kubernetes.default.svc.cluster.local': ['10.96.0.1'] }), { host: '127.0.0.2', tcp: false });
    silent = dgram.createSocket('udp4');
    await new Promise<void>((resolve) => silent.bind(answering.server.port, '127.0.0.3', resolve));
  });
  afterAll(async () => {
    silent.close();
    await answering.close();
    await c.close();
  });

  const slices = (endpoints: Parameters<typeof aSlice>[1]) =>
    c.api.state.slices.set('kube-system/kube-dns', [aSlice('kube-dns', endpoints, { name: 'dns', port: answering.server.port, protocol: 'UDP' })]);
  // 2 s: even on loopback, a machine loaded by the sandbox suite can delay an answer.
  const run = (argv: string[]) => runCheck('podnet', ['--check-timeout', '2s', ...argv], c.env);

  it('mode any: passes when one DNS pod answers, querying each pod IP directly', async () => {
    slices([{ address: '127.0.0.2', nodeName: 'node-b' }, { address: '127.0.0.3', nodeName: 'node-a' }]);
    const before = answering.queries.length;
    const outcome = await run([]);
    expect(outcome.error).toBeUndefined();
    expect(answering.queries.length).toBe(before + 1);
    expect(outcome.details).toMatchObject({
      mode: 'any',
      pods: [
        { address: `127.0.0.2:${answering.server.port}`, ok: true, rcode: 'NOERROR', nodeName: 'node-b', sameNode: false },
        { address: `127.0.0.3:${answering.server.port}`, ok: false, nodeName: 'node-a', sameNode: true },
      ],
    });
  });

  it('mode all: fails when one DNS pod does not answer, naming it and its node', async () => {
    slices([{ address: '127.0.0.2', nodeName: 'node-b' }, { address: '127.0.0.3', nodeName: 'node-c' }]);
    const outcome = await run(['--podnet-mode', 'all']);
    expect(outcome.ok).toBe(false);
    expect(outcome.error).toBe(
      `1 of 2 DNS pods of Service kube-system/kube-dns did not answer: 127.0.0.3:${answering.server.port} on node-c: timeout: no answer over udp within 2s (podnet check timeout)`,
    );
  });

  it('mode any: fails when no DNS pod answers', async () => {
    slices([{ address: '127.0.0.3', nodeName: 'node-c' }]);
    const outcome = await run([]);
    expect(outcome.error).toMatch(/^no DNS pod of Service kube-system\/kube-dns answered: 127\.0\.0\.3:\d+ on node-c: timeout/);
  });

  it('skips endpoints that are not ready and fails when none is left', async () => {
    slices([{ address: '127.0.0.2', ready: false }]);
    const outcome = await run([]);
    expect(outcome.error).toBe('no ready endpoints in the EndpointSlices of Service kube-system/kube-dns: no DNS pod to reach');
    expect(outcome.noReadyEndpoints).toEqual(['kube-system/kube-dns']);
  });
});
