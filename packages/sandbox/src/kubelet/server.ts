import { existsSync, readFileSync, renameSync, writeFileSync } from 'node:fs';
import { createServer, type Server } from 'node:https';
import type { IncomingMessage, ServerResponse } from 'node:http';
import { join } from 'node:path';
import type { Logger } from '@kube-node-ready/core';
import { certPaths } from '../certs.js';
import type { SandboxLayout } from '../layout.js';
import { runOk } from '../proc.js';
import { followLog, readLog, type ContainerLogFile, type LogOptions } from './container-log.js';

/** The kubelet API's port (a node's status.daemonEndpoints.kubeletEndpoint.Port). */
export const KUBELET_PORT = 10250;

/** Where a container's log is, or why it cannot be read (the kubelet's own status codes and words). */
export type LogLookup = { ok: true; path: string; live?: ContainerLogFile } | { ok: false; status: number; message: string };

export interface LogSource {
  containerLog(namespace: string, pod: string, container: string, previous: boolean): LogLookup;
}

export interface KubeletCerts {
  /** The kubelet API's serving certificate, signed by the sandbox CA. */
  serverCert: string;
  serverKey: string;
}

export function kubeletCertPaths(certsDir: string): KubeletCerts {
  return { serverCert: join(certsDir, 'kubelet.crt'), serverKey: join(certsDir, 'kubelet.key') };
}

/**
 * Generates (once) the kubelet API's serving certificate, signed by the sandbox CA (ensureCerts
 * must have run). One certificate stands for every simulated node: its SANs cannot list every node
 * address, and the API server checks a kubelet's serving certificate only when given
 * --kubelet-certificate-authority (a real kubelet's is self-signed by default). The API server
 * authenticates to the kubelet API with any client certificate the sandbox CA signed
 * (--kubelet-client-certificate).
 */
export async function ensureKubeletCerts(layout: SandboxLayout): Promise<KubeletCerts> {
  const dir = layout.paths.certs;
  const ca = certPaths(dir);
  const k = kubeletCertPaths(dir);
  if (existsSync(k.serverCert)) return k;
  const ossl = (...args: string[]) => runOk('openssl', args, { cwd: dir });
  const ext = `${k.serverCert}.ext`;
  const csr = `${k.serverCert}.csr`;
  writeFileSync(ext, `subjectAltName=IP:127.0.0.1,IP:${layout.advertiseAddress},DNS:localhost\nkeyUsage=digitalSignature\nextendedKeyUsage=serverAuth\n`);
  await ossl('req', '-newkey', 'ec', '-pkeyopt', 'ec_paramgen_curve:prime256v1', '-nodes', '-keyout', k.serverKey, '-out', csr, '-subj', '/O=system:nodes/CN=system:node:sandbox-kubelet');
  // Written under a temporary name and renamed, so a half-written certificate is never taken as done.
  await ossl('x509', '-req', '-in', csr, '-CA', ca.caCert, '-CAkey', ca.caKey, '-CAcreateserial', '-out', `${k.serverCert}.tmp`, '-days', '3650', '-extfile', ext);
  renameSync(`${k.serverCert}.tmp`, k.serverCert);
  return k;
}

export interface KubeletServerOptions {
  certFile: string;
  keyFile: string;
  /** Clients must present a certificate signed by this CA (the API server does). */
  caFile: string;
  logs: LogSource;
  log: Logger;
}

/**
 * The part of the kubelet API the sandbox serves, over TLS with client-certificate authentication:
 * GET /containerLogs/{namespace}/{pod}/{container} with follow, previous, timestamps, tailLines,
 * limitBytes, sinceSeconds and sinceTime (what `kubectl logs` sends through the API server), and
 * GET /healthz.
 */
export function buildKubeletServer(opts: KubeletServerOptions): Server {
  return createServer(
    {
      cert: readFileSync(opts.certFile),
      key: readFileSync(opts.keyFile),
      ca: readFileSync(opts.caFile),
      requestCert: true,
      rejectUnauthorized: true,
    },
    (req, res) => {
      handle(req, res, opts).catch((err: unknown) => {
        opts.log.debug({ err: String(err), url: req.url }, 'kubelet API request failed');
        if (!res.headersSent) text(res, 500, String(err));
        else res.destroy();
      });
    },
  );
}

/** Starts the kubelet API on 0.0.0.0:KUBELET_PORT (inside the sandbox namespace every node address is local). */
export async function startKubeletServer(opts: KubeletServerOptions, port = KUBELET_PORT, host = '0.0.0.0'): Promise<Server> {
  const server = buildKubeletServer(opts);
  await new Promise<void>((resolve, reject) => {
    server.once('error', reject);
    server.listen(port, host, () => {
      server.off('error', reject);
      resolve();
    });
  });
  server.on('error', (err) => opts.log.warn({ err: String(err) }, 'kubelet API server error'));
  return server;
}

async function handle(req: IncomingMessage, res: ServerResponse, opts: KubeletServerOptions): Promise<void> {
  const url = new URL(req.url ?? '/', 'https://kubelet');
  if (req.method !== 'GET') return text(res, 405, 'method not allowed');
  if (url.pathname === '/healthz') return text(res, 200, 'ok');
  const m = /^\/containerLogs\/([^/]+)\/([^/]+)\/([^/]+)\/?$/.exec(url.pathname);
  if (!m) return text(res, 404, '404 page not found');
  const [ns, pod, container] = m.slice(1).map(decodeURIComponent) as [string, string, string];
  let o: LogOptions & { follow: boolean; previous: boolean };
  try {
    o = logOptions(url.searchParams);
  } catch (err) {
    return text(res, 400, (err as Error).message);
  }
  const found = opts.logs.containerLog(ns, pod, container, o.previous);
  if (!found.ok) return text(res, found.status, found.message);
  res.writeHead(200, { 'Content-Type': 'text/plain' });
  if (!o.follow || !found.live || found.live.ended) {
    res.end(await readLog(found.path, o));
    return;
  }
  res.flushHeaders();
  const abort = new AbortController();
  res.once('close', () => abort.abort());
  await followLog(found.live, o, (b) => !res.destroyed && (res.write(b), true), abort.signal);
  res.end();
}

/** The kubelet's query parameters (k8s.io/api/core/v1 PodLogOptions). */
export function logOptions(q: URLSearchParams, now = Date.now()): LogOptions & { follow: boolean; previous: boolean } {
  const bool = (name: string) => ['true', '1'].includes(q.get(name) ?? '');
  const int = (name: string, min: number): number | undefined => {
    const v = q.get(name);
    if (v === null || v === '') return undefined;
    const n = Number(v);
    if (!Number.isInteger(n) || n < min) throw new Error(`invalid ${name} ${JSON.stringify(v)}: must be an integer >= ${min}`);
    return n;
  };
  const o: LogOptions & { follow: boolean; previous: boolean } = { follow: bool('follow'), previous: bool('previous'), timestamps: bool('timestamps') };
  const tail = int('tailLines', 0);
  if (tail !== undefined) o.tailLines = tail;
  const limit = int('limitBytes', 1);
  if (limit !== undefined) o.limitBytes = limit;
  const since = int('sinceSeconds', 1);
  if (since !== undefined) o.sinceMs = now - since * 1000;
  const sinceTime = q.get('sinceTime');
  if (sinceTime) {
    const t = Date.parse(sinceTime);
    if (!Number.isFinite(t)) throw new Error(`invalid sinceTime ${JSON.stringify(sinceTime)}`);
    o.sinceMs = t;
  }
  return o;
}

function text(res: ServerResponse, status: number, body: string): void {
  res.writeHead(status, { 'Content-Type': 'text/plain; charset=utf-8' });
  res.end(body);
}
