import { createServer, request } from 'node:https';
import type { AddressInfo } from 'node:net';
import { readFileSync } from 'node:fs';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { core, createNamespace, sandbox } from '../../../test/sandbox.js';
import { certPaths } from './certs.js';
import { requestKind, startFaultProxy, type FaultProxy } from './fault-proxy.js';

let proxy: FaultProxy;
let token: string;

beforeAll(async () => {
  const { layout } = sandbox();
  const c = certPaths(layout.paths.certs);
  proxy = await startFaultProxy({ upstreamHost: layout.apiHost, upstreamPort: layout.apiPort, caFile: c.caCert, certFile: c.serverCert, keyFile: c.serverKey });
  const ns = await createNamespace('proxy');
  const tr = await core().createNamespacedServiceAccountToken({ name: 'default', namespace: ns, body: { spec: { audiences: [] } } });
  token = tr.status?.token ?? "";
  expect(token).not.toBe("");
});
afterAll(async () => proxy?.close());

function get(path: string): Promise<{ status: number; body: string } | { error: string }> {
  const ca = readFileSync(certPaths(sandbox().layout.paths.certs).caCert);
  return new Promise((resolve) => {
    const req = request({ host: '127.0.0.1', port: proxy.port, path, ca, headers: { authorization: `Bearer ${token}` } }, (res) => {
      let body = '';
      res.on('data', (d: Buffer) => (body += d.toString()));
      res.on('end', () => resolve({ status: res.statusCode ?? 0, body }));
    });
    req.on('error', (err: NodeJS.ErrnoException) => resolve({ error: err.code ?? err.message }));
    req.end();
  });
}

describe('fault proxy in front of the apiserver', () => {
  it('forwards with the caller identity, then injects 429, 500 and resets on demand', async () => {
    proxy.set({});
    expect(await get('/version')).toMatchObject({ status: 200 });
    const forbidden = await get('/api/v1/nodes');
    expect(forbidden).toMatchObject({ status: 403 });
    expect((forbidden as { body: string }).body).toContain('system:serviceaccount:');

    proxy.set({ throttleRate: 1 });
    expect(await get('/version')).toMatchObject({ status: 429 });
    proxy.set({ errorRate: 1 });
    expect(await get('/version')).toMatchObject({ status: 500 });
    proxy.set({ resetRate: 1 });
    expect(await get('/version')).toEqual({ error: 'ECONNRESET' });
    proxy.set({ latencyMs: 300 });
    const started = Date.now();
    expect(await get('/version')).toMatchObject({ status: 200 });
    expect(Date.now() - started).toBeGreaterThanOrEqual(300);
    expect(proxy.stats()).toMatchObject({ throttled: 1, errors: 1, resets: 1 });
    expect(proxy.requestsByKind()).toEqual({ 'get /version': 5, 'list nodes': 1 });
    proxy.set({});
  });

  it('fails only the requests to the resources named in failResources', async () => {
    proxy.set({ failResources: ['leases.coordination.k8s.io'] });
    const errors = proxy.stats().errors;
    expect(await get('/apis/coordination.k8s.io/v1/namespaces/kube-system/leases/any')).toMatchObject({ status: 500 });
    expect(await get('/apis/coordination.k8s.io/v1/leases')).toMatchObject({ status: 500 });
    expect(await get('/version')).toMatchObject({ status: 200 });
    expect(await get('/api/v1/nodes')).toMatchObject({ status: 403 }); // forwarded: the apiserver's answer
    expect(proxy.stats().errors).toBe(errors + 2);
    proxy.set({});
  });

  it('answers the watches named in expireWatches as a compacted resourceVersion is answered (ERROR 410), and forwards the rest', async () => {
    proxy.set({ expireWatches: ['nodes'] });
    const expired = await get('/api/v1/nodes?watch=true&resourceVersion=5');
    expect(expired).toMatchObject({ status: 200 });
    const event = JSON.parse((expired as { body: string }).body) as { type: string; object: { code: number; reason: string } };
    expect(event).toMatchObject({ type: 'ERROR', object: { code: 410, reason: 'Expired' } });
    expect(await get('/api/v1/nodes')).toMatchObject({ status: 403 }); // a list is forwarded
    expect(await get('/api/v1/namespaces?watch=true')).toMatchObject({ status: 403 }); // another resource's watch too
    expect(proxy.stats().expired).toBe(1);
    proxy.set({});
  });

  it('breaks the client connection when the apiserver dies mid-response, as a direct connection would', async () => {
    // A stand-in apiserver that answers, sends part of a watch stream, then dies (an apiserver
    // killed during its restart). The proxy must break the client's connection too: otherwise the
    // client waits out its own inactivity timeout (30 s for client-node watches), and a restart of
    // the apiserver looks like a stall.
    const c = certPaths(sandbox().layout.paths.certs);
    const upstream = createServer({ cert: readFileSync(c.serverCert), key: readFileSync(c.serverKey) }, (_req, res) => {
      res.writeHead(200, { 'content-type': 'application/json' });
      res.write('{"type":"ADDED","object":{}}\n');
      setTimeout(() => res.socket?.destroy(), 200);
    });
    await new Promise<void>((resolve) => upstream.listen(0, '127.0.0.1', resolve));
    const dying = await startFaultProxy({ upstreamHost: '127.0.0.1', upstreamPort: (upstream.address() as AddressInfo).port, caFile: c.caCert, certFile: c.serverCert, keyFile: c.serverKey });
    try {
      for (const path of ['/api/v1/namespaces?watch=true', '/api/v1/namespaces']) {
        const outcome = await new Promise<string>((resolve) => {
          const req = request({ host: '127.0.0.1', port: dying.port, path, ca: readFileSync(c.caCert) }, (res) => {
            res.on('data', () => {});
            res.on('error', (err) => resolve(`error: ${err.message}`));
            res.on('close', () => resolve(res.complete ? 'complete' : 'broken'));
          });
          req.on('error', (err) => resolve(`error: ${err.message}`));
          req.end();
          setTimeout(() => resolve('still open after 5 s'), 5000);
        });
        expect(outcome, path).not.toBe('still open after 5 s');
        expect(outcome, path).not.toBe('complete');
      }
    } finally {
      await dying.close();
      await new Promise<void>((resolve) => upstream.close(() => resolve()));
    }
  });

  it('names each request by Kubernetes verb and resource', () => {
    expect(requestKind('GET', '/api/v1/namespaces/kube-system/pods?labelSelector=a%3Db&watch=true&resourceVersion=5')).toBe('watch pods');
    expect(requestKind('GET', '/api/v1/namespaces/kube-system/pods/knr-a-1')).toBe('get pods');
    expect(requestKind('GET', '/api/v1/nodes?limit=500')).toBe('list nodes');
    expect(requestKind('POST', '/api/v1/namespaces/default/events')).toBe('create events');
    expect(requestKind('PATCH', '/api/v1/nodes/node-a/status')).toBe('patch nodes/status');
    expect(requestKind('DELETE', '/api/v1/namespaces/kube-system/pods/knr-a-1')).toBe('delete pods');
    expect(requestKind('PUT', '/apis/coordination.k8s.io/v1/namespaces/kube-system/leases/x')).toBe('update leases.coordination.k8s.io');
    expect(requestKind('GET', '/api/v1/namespaces/kube-system')).toBe('get namespaces');
    expect(requestKind('PUT', '/api/v1/namespaces/kube-system/finalize')).toBe('update namespaces/finalize');
    expect(requestKind('GET', '/version')).toBe('get /version');
  });
});
