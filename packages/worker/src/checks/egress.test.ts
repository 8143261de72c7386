import net, { type AddressInfo } from 'node:net';
import tls from 'node:tls';
import { afterAll, afterEach, beforeAll, describe, expect, it } from 'vitest';
import { formatHostPort } from '../config.js';
import { startBlackhole } from '../testing/blackhole.js';
import { startDnsServer, zone, type TestDnsServer } from '../testing/dns-server.js';
import { runCheck } from '../testing/harness.js';
import { makePki } from '../testing/pki.js';

/**
 * The egress check on loopback: external names resolve (through a local nameserver) to 127.0.0.1,
 * where a TLS server, a listener that never speaks TLS, or a blackholed port stands in for the
 * outside world.
 */
describe('egress check', () => {
  const REGISTRY = 'registry.example.com';
  let ns: TestDnsServer;
  let tlsServer: tls.Server;
  let silent: net.Server;
  const held: net.Socket[] = [];
  const cleanups: Array<() => void> = [];
  const portOf = (s: net.Server) => (s.address() as AddressInfo).port;

  beforeAll(async () => {
    ns = await startDnsServer(zone({ [REGISTRY]: ['127.0.0.1'], 'kubernetes.default.svc.cluster.local': ['10.96.0.1'] }));
    const pki = makePki();
    tlsServer = tls.createServer({ cert: pki.serverCert, key: pki.serverKey }, (socket) => socket.end());
    await new Promise<void>((resolve) => tlsServer.listen(0, '127.0.0.1', resolve));
    // Accepts the connection and never answers the ClientHello: a handshake that stalls.
    silent = net.createServer((socket) => void held.push(socket));
    await new Promise<void>((resolve) => silent.listen(0, '127.0.0.1', resolve));
  });
  afterAll(async () => {
    for (const s of held) s.destroy();
    await Promise.all([ns.close(), new Promise((r) => tlsServer.close(r)), new Promise((r) => silent.close(r))]);
  });
  afterEach(() => cleanups.splice(0).forEach((f) => f()));

  const run = (argv: string[]) => runCheck('egress', ['--dns-server', formatHostPort(ns.server), ...argv]);

  it('tests nothing outside the cluster when no external name is configured (the air-gapped default)', async () => {
    const before = ns.queries.length;
    const outcome = await run([]);
    expect(outcome).toMatchObject({ ok: true, details: { note: expect.stringContaining('no dns.externalNames configured: egress not tested') } });
    expect(ns.queries.length).toBe(before);
  });

  it('passes when each address of an external name completes a TLS handshake on egress.port', async () => {
    const outcome = await run(['--external-dns-names', REGISTRY, '--egress-port', String(portOf(tlsServer))]);
    expect(outcome.error).toBeUndefined();
    expect(outcome.details?.names).toEqual([
      {
        name: REGISTRY,
        server: formatHostPort(ns.server),
        connections: [
          expect.objectContaining({
            address: `127.0.0.1:${portOf(tlsServer)}`,
            ok: true,
            protocol: expect.stringMatching(/^TLSv1\.[23]$/),
            // The test CA is not a system CA: recorded, not required.
            authorized: false,
            authorizationError: expect.any(String),
          }),
        ],
      },
    ]);
  });

  it('fails when the address does not accept connections in time (blocked egress), although the name resolves', async () => {
    const hole = await startBlackhole();
    cleanups.push(hole.close);
    const argv = ['--external-dns-names', REGISTRY, '--egress-port', String(hole.target.port), '--check-timeout', '600ms'];
    expect((await runCheck('dns', ['--dns-server', formatHostPort(ns.server), ...argv])).ok).toBe(true);
    const outcome = await run(argv);
    expect(outcome.ok).toBe(false);
    expect(outcome.error).toBe(`${REGISTRY} 127.0.0.1:${hole.target.port}: timeout: no connection within 600ms (egress check timeout)`);
  });

  it('fails naming the stalled TLS handshake when the connection opens but no handshake follows', async () => {
    const outcome = await run(['--external-dns-names', REGISTRY, '--egress-port', String(portOf(silent)), '--check-timeout', '600ms']);
    expect(outcome.error).toBe(
      `${REGISTRY} 127.0.0.1:${portOf(silent)}: timeout: connected, but the TLS handshake did not finish within 600ms (egress check timeout) (large packets from there may be dropped on the way)`,
    );
  });

  it('says a name that does not resolve was not tested, leaving the reason to the dns check', async () => {
    const outcome = await runCheck('egress', ['--checks', 'dns,egress', '--dns-server', formatHostPort(ns.server), '--external-dns-names', 'missing.example.com']);
    expect(outcome.error).toBe('not tested for missing.example.com: the name did not resolve (the dns check says why)');
  });
});
