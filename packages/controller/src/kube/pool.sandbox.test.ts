// PooledKubeConfig against the sandbox's apiserver, through the fault proxy, which counts the TCP
// connections its clients open: client-node 2.0 gives every request a connection (and a TLS
// handshake) of its own; PooledKubeConfig gives every request the first one's pool.
import { readFileSync } from 'node:fs';
import { afterAll, beforeAll, expect, it } from 'vitest';
import { KubeConfig, VersionApi } from '@kubernetes/client-node';
import { certPaths, startFaultProxy, type FaultProxy } from '@kube-node-ready/sandbox';
import { core, createNamespace, sandbox } from '../../../../test/sandbox.js';
import { PooledKubeConfig } from './config.js';

let proxy: FaultProxy;
let token = '';

beforeAll(async () => {
  const { layout } = sandbox();
  const c = certPaths(layout.paths.certs);
  proxy = await startFaultProxy({ upstreamHost: layout.apiHost, upstreamPort: layout.apiPort, caFile: c.caCert, certFile: c.serverCert, keyFile: c.serverKey });
  const ns = await createNamespace('pool');
  token = (await core().createNamespacedServiceAccountToken({ name: 'default', namespace: ns, body: { spec: { audiences: [] } } })).status?.token ?? '';
  expect(token).not.toBe('');
});
afterAll(async () => proxy?.close());

/** `kc` pointed at the proxy with the token and the sandbox CA (TLS options, as every real kubeconfig has). */
function through(kc: KubeConfig): KubeConfig {
  const ca = readFileSync(certPaths(sandbox().layout.paths.certs).caCert).toString('base64');
  kc.loadFromOptions({
    clusters: [{ name: 'proxy', server: proxy.url, caData: ca, skipTLSVerify: false }],
    users: [{ name: 'sa', token }],
    contexts: [{ name: 'proxy', cluster: 'proxy', user: 'sa' }],
    currentContext: 'proxy',
  });
  return kc;
}

/** Connections opened for `calls` GET /version in a row, then `calls` at once. */
async function connectionsFor(kc: KubeConfig, calls: number): Promise<{ sequential: number; parallel: number }> {
  const api = kc.makeApiClient(VersionApi);
  let before = proxy.stats().connections;
  for (let i = 0; i < calls; i++) await api.getCode();
  const sequential = proxy.stats().connections - before;
  before = proxy.stats().connections;
  await Promise.all(Array.from({ length: calls }, () => api.getCode()));
  return { sequential, parallel: proxy.stats().connections - before };
}

it('API calls share connections with PooledKubeConfig; a plain KubeConfig opens one per call', async () => {
  // In a row: two connections at most however many calls (measured: 2 for 20 and for 40).
  const pooled = await connectionsFor(through(new PooledKubeConfig()), 40);
  expect(pooled.sequential, 'PooledKubeConfig: 40 calls in a row').toBeLessThanOrEqual(2);
  // At once, the pool opens what it needs (undici's default has no limit per origin).
  expect(pooled.parallel, 'PooledKubeConfig: 40 calls at once').toBeLessThanOrEqual(40);

  // Once the pool exists, later requests build no Agent of their own to throw away.
  const kc = through(new PooledKubeConfig());
  expect(kc.createDispatcherOptions(kc.getCurrentCluster(), { ca: Buffer.from('x') }).type, 'before the first request').toBe('agent');
  await kc.makeApiClient(VersionApi).getCode();
  expect(kc.createDispatcherOptions(kc.getCurrentCluster(), { ca: Buffer.from('x') }).type, 'after it').toBe('none');

  const plain = await connectionsFor(through(new KubeConfig()), 20);
  // If this fails, client-node reuses connections by itself now and PooledKubeConfig can go.
  expect(plain.sequential, 'client-node 2.0 KubeConfig: a connection per call').toBeGreaterThanOrEqual(15);
});
