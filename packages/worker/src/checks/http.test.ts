import { mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import http from 'node:http';
import https from 'node:https';
import { createServer, type AddressInfo, type Server, type Socket } from 'node:net';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, afterEach, beforeAll, describe, expect, it } from 'vitest';
import { closedPort, startBlackhole } from '../testing/blackhole.js';
import { runCheck } from '../testing/harness.js';
import { makePki, type TestPki } from '../testing/pki.js';

/**
 * The http check against real servers on 127.0.0.1: plain HTTP and HTTPS with a certificate of
 * a test CA, a server that never answers, a blackholed and a closed port.
 */
describe('http check', () => {
  let pki: TestPki;
  let plain: http.Server;
  let secure: https.Server;
  /** Request paths each server received, in order. */
  const seen: { plain: string[]; secure: string[] } = { plain: [], secure: [] };
  const dir = mkdtempSync(join(tmpdir(), 'knr-http-check-'));
  const cleanups: Array<() => void> = [];
  let files = 0;

  /** Answers /status/NNN with NNN, /redirect with a 302 to /elsewhere, /endless with a 200 whose body never ends. */
  const handler = (log: string[]) => (req: http.IncomingMessage, res: http.ServerResponse) => {
    const path = req.url ?? '/';
    log.push(path);
    const status = /^\/status\/(\d{3})$/.exec(path);
    if (status) {
      res.writeHead(Number(status[1]), { 'Content-Type': 'text/plain' }).end('answer\n');
    } else if (path === '/redirect') {
      res.writeHead(302, { Location: '/elsewhere' }).end();
    } else if (path === '/endless') {
      res.writeHead(200, { 'Content-Type': 'application/octet-stream' });
      const chunk = Buffer.alloc(64 * 1024, 'x');
      const pump = () => {
        while (!res.destroyed && res.write(chunk));
        if (!res.destroyed) res.once('drain', pump);
      };
      pump();
    } else if (path === '/silent') {
      // Reads the request and never answers.
    } else {
      res.writeHead(200).end('ok\n');
    }
  };
  const listen = async (server: Server) => {
    await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
    return (server.address() as AddressInfo).port;
  };
  let plainUrl: string;
  let secureUrl: string;

  beforeAll(async () => {
    pki = makePki();
    plain = http.createServer(handler(seen.plain));
    secure = https.createServer({ cert: pki.serverCert, key: pki.serverKey }, handler(seen.secure));
    plainUrl = `http://127.0.0.1:${await listen(plain)}`;
    secureUrl = `https://127.0.0.1:${await listen(secure)}`;
  });
  afterAll(async () => {
    for (const server of [plain, secure]) server.closeAllConnections();
    await Promise.all([new Promise((r) => plain.close(r)), new Promise((r) => secure.close(r))]);
    rmSync(dir, { recursive: true, force: true });
  });
  afterEach(() => {
    cleanups.splice(0).forEach((f) => f());
    seen.plain.length = 0;
    seen.secure.length = 0;
  });

  /** A worker configuration file with these http settings (JSON is YAML). */
  const configFile = (httpSection: unknown, top: Record<string, unknown> = {}) => {
    const path = join(dir, `worker-${files++}.yaml`);
    writeFileSync(path, JSON.stringify({ ...top, http: httpSection }));
    return path;
  };
  /** The time a timeout message says it waited ("timeout after 602ms"). */
  const elapsedIn = (error: string | undefined) => {
    const [, n, unit] = /timeout after ([\d.]+)(ms|s)/.exec(error ?? '') ?? [];
    return Number(n) * (unit === 's' ? 1000 : 1);
  };
  const run = (targets: unknown[], argv: string[] = [], top: Record<string, unknown> = {}) =>
    runCheck('http', ['--config', configFile({ targets }, top), ...argv]);

  it('contacts nothing and passes when no target is configured (the default)', async () => {
    const outcome = await runCheck('http', []);
    expect(outcome).toMatchObject({ ok: true, details: { note: 'no http.targets configured: http not tested' } });
    expect(seen.plain).toEqual([]);
  });

  it('passes when the answer is in the expected range: 401 from a registry-like /v2/ with expectStatus 200-499', async () => {
    const outcome = await run([{ url: `${plainUrl}/status/401`, expectStatus: '200-499' }]);
    expect(outcome.error).toBeUndefined();
    expect(outcome.ok).toBe(true);
    expect(outcome.details?.targets).toEqual([
      expect.objectContaining({ url: `${plainUrl}/status/401`, ok: true, status: 401, expected: '200-499', address: plainUrl.slice('http://'.length) }),
    ]);
    expect(seen.plain).toEqual(['/status/401']);
  });

  it('fails when the answer is outside the range, naming the URL, the status and the range; target is the URL', async () => {
    const url = `${plainUrl}/status/401`;
    const outcome = await run([{ url }]);
    expect(outcome.ok).toBe(false);
    expect(outcome.error).toBe(`${url} answered 401 (expected 200-399)`);
    expect(outcome.target).toBe(url);
  });

  it('takes expectStatus as a list of codes and ranges', async () => {
    const outcome = await run([
      { url: `${plainUrl}/status/401`, expectStatus: [200, 401] },
      { url: `${plainUrl}/status/503`, expectStatus: ['200-299', 401] },
    ]);
    expect(outcome.error).toBe(`${plainUrl}/status/503 answered 503 (expected 200-299, 401)`);
  });

  it('does not follow a redirect: the 3xx is the answer, compared with the range and named with its Location', async () => {
    expect((await run([{ url: `${plainUrl}/redirect` }])).ok).toBe(true); // 302 is within the default 200-399
    const outcome = await run([{ url: `${plainUrl}/redirect`, expectStatus: '200-299' }]);
    expect(outcome.error).toBe(`${plainUrl}/redirect answered 302 (expected 200-299), a redirect to /elsewhere (not followed)`);
    expect(seen.plain).toEqual(['/redirect', '/redirect']);
  });

  it('does not read the body: a 200 whose body never ends passes at once', async () => {
    const outcome = await run([{ url: `${plainUrl}/endless` }], ['--check-timeout', '2s']);
    expect(outcome.error).toBeUndefined();
    expect(outcome.durationMs).toBeLessThan(1000);
  });

  it('fails with a TLS error when the server certificate is not signed by a trusted CA (no ca: the built-in list)', async () => {
    const outcome = await run([{ url: `${secureUrl}/` }]);
    const address = secureUrl.slice('https://'.length);
    expect(outcome.error).toBe(
      `${secureUrl}/: TLS error from ${address}: the certificate is not signed by a trusted CA (UNABLE_TO_VERIFY_LEAF_SIGNATURE); trusted: Node.js's built-in CA list (set ca or caFile for a private CA)`,
    );
    expect(seen.secure).toEqual([]);
  });

  it('fails with a TLS error when the configured CA is not the one that signed the certificate', async () => {
    const outcome = await run([{ url: `${secureUrl}/`, ca: pki.otherCa }]);
    expect(outcome.error).toMatch(/^https:\/\/127\.0\.0\.1:\d+\/: TLS error from 127\.0\.0\.1:\d+: the certificate is not signed by a trusted CA \(UNABLE_TO_VERIFY_LEAF_SIGNATURE\); trusted: the certificates of its ca$/);
  });

  it('passes over HTTPS with the CA bundle given inline (ca) or as a file (caFile)', async () => {
    const caPath = join(dir, 'ca.pem');
    writeFileSync(caPath, `${pki.otherCa}${pki.ca}`); // a bundle: the right CA is the second
    const outcome = await run([
      { url: `${secureUrl}/status/204`, ca: pki.ca },
      { url: `${secureUrl}/status/200`, caFile: caPath },
    ]);
    expect(outcome.error).toBeUndefined();
    expect(outcome.details?.targets).toEqual([
      expect.objectContaining({ status: 204, ok: true, protocol: expect.stringMatching(/^TLSv1\.[23]$/) }),
      expect.objectContaining({ status: 200, ok: true }),
    ]);
    expect(seen.secure.sort()).toEqual(['/status/200', '/status/204']);
  });

  it('times out naming how far it got and the time waited: connected, request sent, no answer', async () => {
    const url = `${plainUrl}/silent`;
    const outcome = await run([{ url }], ['--check-timeout', '600ms']);
    expect(outcome.error).toMatch(
      new RegExp(`^${url.replace(/[.]/g, '\\.')}: timeout after [\\d.]+m?s \\(http check timeout 600ms\\): connected to 127\\.0\\.0\\.1:\\d+, request sent, no answer \\(status line and headers\\)$`),
    );
    expect(elapsedIn(outcome.error)).toBeGreaterThanOrEqual(590);
  });

  it('times out on a target of its own timeout, before the check timeout, and names the missing connection', async () => {
    const hole = await startBlackhole();
    cleanups.push(hole.close);
    const url = `http://127.0.0.1:${hole.target.port}/`;
    const outcome = await run([{ url, timeout: '300ms' }], ['--check-timeout', '5s']);
    expect(outcome.error).toMatch(/^http:\/\/127\.0\.0\.1:\d+\/: timeout after [\d.]+m?s \(http target timeout 300ms\): no connection to 127\.0\.0\.1:\d+$/);
    expect(elapsedIn(outcome.error)).toBeGreaterThanOrEqual(290);
    expect(outcome.durationMs).toBeLessThan(2000);
  });

  it('times out in the TLS handshake when the server accepts but never completes it', async () => {
    // Accepts the connection and never answers the ClientHello.
    const held: Socket[] = [];
    const silent = createServer((socket) => void held.push(socket));
    const port = await listen(silent);
    cleanups.push(() => {
      for (const socket of held) socket.destroy();
      silent.close();
    });
    const outcome = await run([{ url: `https://127.0.0.1:${port}/` }], ['--check-timeout', '500ms']);
    expect(outcome.error).toMatch(/: timeout after [\d.]+m?s \(http check timeout 500ms\): connected to 127\.0\.0\.1:\d+ in [\d.]+m?s, but the TLS handshake did not finish$/);
  });

  it('names a TLS error when an https URL reaches a server that does not speak TLS', async () => {
    const url = `${plainUrl.replace('http:', 'https:')}/`;
    const outcome = await run([{ url }]);
    expect(outcome.error).toBe(
      `${url}: TLS error from ${plainUrl.slice('http://'.length)}: the server did not answer with TLS (is it plain HTTP on that port?) (EPROTO: wrong version number); trusted: Node.js's built-in CA list (set ca or caFile for a private CA)`,
    );
  });

  it('fails at once with "could not connect" when the port refuses the connection', async () => {
    const closed = await closedPort();
    const url = `http://127.0.0.1:${closed.port}/v2/`;
    const outcome = await run([{ url }]);
    expect(outcome.error).toBe(`${url}: could not connect to 127.0.0.1:${closed.port}: connection refused (ECONNREFUSED)`);
    expect(outcome.durationMs).toBeLessThan(1000);
  });

  it('names the address a host name resolved to when it refuses the connection', async () => {
    const closed = await closedPort();
    const outcome = await run([{ url: `http://localhost:${closed.port}/` }]);
    expect(outcome.error).toMatch(new RegExp(`^http://localhost:${closed.port}/: could not connect to (127\\.0\\.0\\.1|\\[::1\\]):${closed.port}: connection refused \\(ECONNREFUSED\\)$`));
  });

  it('reports every target: one passing, two failing, joined in one error', async () => {
    const closed = await closedPort();
    const outcome = await run([{ url: `${plainUrl}/` }, { url: `${plainUrl}/status/500` }, { url: `http://127.0.0.1:${closed.port}/` }]);
    expect(outcome.error?.split('; ')).toEqual([
      `${plainUrl}/status/500 answered 500 (expected 200-399)`,
      `http://127.0.0.1:${closed.port}/: could not connect to 127.0.0.1:${closed.port}: connection refused (ECONNREFUSED)`,
    ]);
    expect(outcome.target).toBe([`${plainUrl}/status/500`, `http://127.0.0.1:${closed.port}/`].sort().join(', '));
  });

  it('goes straight to the URL even when the global agents use a proxy (NODE_USE_ENV_PROXY with HTTP_PROXY/HTTPS_PROXY)', async () => {
    const proxied: string[] = [];
    const proxy = http.createServer((req, res) => {
      proxied.push(`${req.method ?? ''} ${req.url ?? ''}`);
      res.writeHead(502).end();
    });
    proxy.on('connect', (req, socket) => {
      proxied.push(`CONNECT ${req.url ?? ''}`);
      socket.end('HTTP/1.1 502 Bad Gateway\r\n\r\n');
    });
    const proxyUrl = `http://127.0.0.1:${await listen(proxy)}`;
    // What Node.js sets up from the environment with NODE_USE_ENV_PROXY=1.
    const saved = { http: http.globalAgent, https: https.globalAgent };
    http.globalAgent = new http.Agent({ proxyEnv: { HTTP_PROXY: proxyUrl } });
    https.globalAgent = new https.Agent({ proxyEnv: { HTTPS_PROXY: proxyUrl } });
    cleanups.push(() => {
      http.globalAgent = saved.http;
      https.globalAgent = saved.https;
      proxy.close();
    });
    // The proxy is in use for requests that take the global agent.
    const viaGlobal = await new Promise<number | undefined>((resolve) => http.get(`${plainUrl}/`, (res) => resolve(res.statusCode)).on('error', () => resolve(undefined)));
    expect(viaGlobal).toBe(502);
    proxied.length = 0;
    const outcome = await run([{ url: `${plainUrl}/status/204` }, { url: `${secureUrl}/status/204`, ca: pki.ca }]);
    expect(outcome.error).toBeUndefined();
    expect(proxied).toEqual([]);
  });

  it('warns about a slow answer over http.slowAfter', async () => {
    const slowServer = http.createServer((_req, res) => void setTimeout(() => res.writeHead(200).end(), 150));
    const port = await listen(slowServer);
    cleanups.push(() => slowServer.close());
    const outcome = await runCheck('http', ['--config', configFile({ targets: [{ url: `http://127.0.0.1:${port}/` }], slowAfter: '50ms' })]);
    expect(outcome.ok).toBe(true);
    expect(outcome.warnings).toEqual([expect.stringMatching(new RegExp(`^http://127\\.0\\.0\\.1:${port}/: slow: \\d+ms \\(over http\\.slowAfter 50ms\\)$`))]);
  });
});
