// The fault proxy when the apiserver restarts under it: it restarts the apiserver, so it runs in
// the serial project, on a sandbox of its own.
import { readFileSync } from 'node:fs';
import { request } from 'node:https';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { sandbox, waitFor } from '../../../test/sandbox.js';
import { certPaths } from './certs.js';
import { sandboxControl } from './control.js';
import { startFaultProxy, type FaultProxy } from './fault-proxy.js';

let proxy: FaultProxy;

beforeAll(async () => {
  const { layout } = sandbox();
  const c = certPaths(layout.paths.certs);
  proxy = await startFaultProxy({ upstreamHost: layout.apiHost, upstreamPort: layout.apiPort, caFile: c.caCert, certFile: c.serverCert, keyFile: c.serverKey });
});
afterAll(async () => proxy?.close());

describe('fault proxy and an apiserver restart', () => {
  it('breaks a watch it forwards when the apiserver goes away, as a direct connection would (no silent hang)', async () => {
    const { layout, kc } = sandbox();
    const ca = readFileSync(certPaths(layout.paths.certs).caCert);
    const opts = { host: '127.0.0.1', port: proxy.port, path: '/api/v1/namespaces?watch=true', ca, headers: {} as Record<string, string> };
    await kc.applyToHTTPSOptions(opts);
    let ended: string | undefined;
    const opened = new Promise<void>((resolve) => {
      const req = request(opts, (res) => {
        resolve();
        res.on('data', () => {});
        res.on('end', () => (ended ??= 'end'));
        res.on('error', (err) => (ended ??= `error: ${err.message}`));
        res.on('close', () => (ended ??= 'close'));
      });
      req.on('error', (err) => (ended ??= `error: ${err.message}`));
      req.end();
    });
    await opened;
    await sandboxControl(layout.dir, 'POST', '/restart/kube-apiserver');
    // The fault suite's apiserver-restart and etcd-compaction scenarios rely on this: a stream that
    // stayed open would look like a silent watch stall instead (a different scenario).
    await waitFor(async () => ended !== undefined, 'the forwarded watch to break', 10_000);
    expect(ended).toBeDefined();
  });
});
