import { request as httpsRequest } from 'node:https';
import { createServer, type Server } from 'node:https';
import type { IncomingMessage, ServerResponse } from 'node:http';
import type { Socket } from 'node:net';
import { readFileSync } from 'node:fs';

/**
 * A fault-injecting HTTPS proxy in front of the apiserver, on 127.0.0.1. It terminates TLS with
 * the apiserver's own certificate (valid for 127.0.0.1, signed by the sandbox CA) and forwards each
 * request, Authorization header included, so a client using a bearer token (a service-account
 * kubeconfig) keeps its identity and RBAC. Faults apply per request and can change at any time:
 */
export interface Faults {
  /** Added before forwarding each request. */
  latencyMs?: number;
  /**
   * Added before forwarding each request to these resources, named as requestKind() names them
   * (`configmaps`), instead of latencyMs.
   */
  slowResources?: Readonly<Record<string, number>>;
  /** Probability [0,1] that a request's connection is reset instead of answered. */
  resetRate?: number;
  /** Probability that a request is answered 429 Too Many Requests (with Retry-After: 1). */
  throttleRate?: number;
  /** Probability that a request is answered 500. */
  errorRate?: number;
  /**
   * Open watch streams stop receiving data but stay open (a silently dead connection): every
   * watch, or only the watches of these resources, named as requestKind() names them (`nodes`).
   */
  stallWatches?: boolean | readonly string[];
  /**
   * Every request to these resources, named as requestKind() names them
   * (`leases.coordination.k8s.io`), is answered 500; the other requests are not touched by it.
   */
  failResources?: readonly string[];
  /**
   * A watch of these resources (named as requestKind() names them) is answered as the apiserver
   * answers a watch from a resourceVersion it no longer has: 200 and one ERROR event with a
   * 410 Expired Status. The client must list again. Watches already open are not touched: cutAll()
   * makes them reconnect.
   */
  expireWatches?: readonly string[];
}

export interface FaultProxy {
  url: string;
  port: number;
  set(faults: Faults): void;
  /** Counters since start: requests seen, faults injected, TCP connections clients opened. */
  stats(): { requests: number; resets: number; throttled: number; errors: number; stalled: number; expired: number; connections: number };
  /**
   * Requests seen since start, by Kubernetes verb and resource as the apiserver would name them
   * (`create pods`, `patch nodes/status`, `watch nodes`, `update leases.coordination.k8s.io`,
   * `get /version`), counted when they arrive, faulted or not. See requestKind().
   */
  requestsByKind(): Record<string, number>;
  /** Cuts every open connection (resets), e.g. to break long-running watches at once. */
  cutAll(): void;
  close(): Promise<void>;
}

export interface FaultProxyOptions {
  upstreamHost: string;
  upstreamPort: number;
  caFile: string;
  certFile: string;
  keyFile: string;
  /** Random source, injectable for reproducible scenarios. */
  random?: () => number;
}

export async function startFaultProxy(opts: FaultProxyOptions): Promise<FaultProxy> {
  const ca = readFileSync(opts.caFile);
  const random = opts.random ?? Math.random;
  let faults: Faults = {};
  const counters = { requests: 0, resets: 0, throttled: 0, errors: 0, stalled: 0, expired: 0, connections: 0 };
  const sockets = new Set<Socket>();
  /** Each open watch stream's stall function, and its resource. */
  const stalledStreams = new Map<() => void, string>();
  const stalls = (resource: string) => faults.stallWatches === true || (Array.isArray(faults.stallWatches) && faults.stallWatches.includes(resource));
  const byKind = new Map<string, number>();

  const handle = (req: IncomingMessage, res: ServerResponse) => {
    counters.requests++;
    const kind = requestKind(req.method ?? 'GET', req.url ?? '/');
    byKind.set(kind, (byKind.get(kind) ?? 0) + 1);
    const f = faults;
    const roll = (p?: number) => p !== undefined && p > 0 && random() < p;
    if (roll(f.resetRate)) {
      counters.resets++;
      req.socket.destroy();
      return;
    }
    if (roll(f.throttleRate)) {
      counters.throttled++;
      res.writeHead(429, { 'content-type': 'application/json', 'retry-after': '1' });
      res.end(JSON.stringify({ kind: 'Status', apiVersion: 'v1', status: 'Failure', message: 'injected: too many requests', reason: 'TooManyRequests', code: 429 }));
      return;
    }
    const resource = kind.slice(kind.indexOf(' ') + 1).split('/')[0] ?? '';
    if (roll(f.errorRate) || f.failResources?.includes(resource)) {
      counters.errors++;
      res.writeHead(500, { 'content-type': 'application/json' });
      res.end(JSON.stringify({ kind: 'Status', apiVersion: 'v1', status: 'Failure', message: 'injected: internal error', reason: 'InternalError', code: 500 }));
      return;
    }
    if (kind.startsWith('watch ') && f.expireWatches?.includes(resource)) {
      counters.expired++;
      const status = { kind: 'Status', apiVersion: 'v1', metadata: {}, status: 'Failure', message: 'injected: too old resource version', reason: 'Expired', code: 410 };
      res.writeHead(200, { 'content-type': 'application/json' });
      res.end(`${JSON.stringify({ type: 'ERROR', object: status })}\n`);
      return;
    }
    const forward = () => {
      const headers = { ...req.headers, host: `${opts.upstreamHost}:${opts.upstreamPort}` };
      const up = httpsRequest(
        { host: opts.upstreamHost, port: opts.upstreamPort, method: req.method, path: req.url, headers, ca },
        (upRes) => {
          res.writeHead(upRes.statusCode ?? 502, upRes.headers);
          // The apiserver went away mid-response (killed in a restart): break the client's
          // connection too, as a direct one would break, instead of leaving it hanging until the
          // client's own inactivity timeout.
          upRes.on('close', () => {
            if (!upRes.complete) res.destroy();
          });
          if (kind.startsWith('watch ')) {
            const resource = kind.slice('watch '.length);
            // Forward chunk by chunk so a stall can start in the middle of a stream.
            const stall = () => {
              counters.stalled++;
              upRes.removeAllListeners('data');
              upRes.pause();
            };
            upRes.on('data', (chunk: Buffer) => {
              if (stalls(resource)) return stall();
              res.write(chunk);
            });
            upRes.on('end', () => res.end());
            stalledStreams.set(stall, resource);
            res.on('close', () => {
              stalledStreams.delete(stall);
              upRes.destroy();
            });
          } else {
            upRes.pipe(res);
          }
        },
      );
      up.on('error', () => req.socket.destroy());
      req.pipe(up);
    };
    const latency = f.slowResources?.[resource] ?? f.latencyMs;
    if (latency) setTimeout(forward, latency);
    else forward();
  };

  const server: Server = createServer({ cert: readFileSync(opts.certFile), key: readFileSync(opts.keyFile) }, handle);
  server.on('connection', (s: Socket) => {
    counters.connections++;
    sockets.add(s);
    s.on('close', () => sockets.delete(s));
  });
  server.on('tlsClientError', () => {});
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  const port = (server.address() as { port: number }).port;
  return {
    url: `https://127.0.0.1:${port}`,
    port,
    set: (next) => {
      faults = { ...next };
      for (const [stall, resource] of stalledStreams) if (stalls(resource)) stall();
    },
    stats: () => ({ ...counters }),
    requestsByKind: () => Object.fromEntries([...byKind].sort(([a], [b]) => a.localeCompare(b))),
    cutAll: () => {
      for (const s of sockets) s.destroy();
    },
    close: () =>
      new Promise<void>((resolve) => {
        for (const s of sockets) s.destroy();
        server.close(() => resolve());
      }),
  };
}

/**
 * The Kubernetes verb and resource of an API request, as the apiserver's request metrics name them:
 * `<verb> <resource>[.<group>][/<subresource>]`, verbs get/list/watch/create/update/patch/delete/
 * deletecollection; a non-resource URL is `<lowercase method> <path>` (`get /version`).
 */
export function requestKind(method: string, url: string): string {
  const [path = '/', query = ''] = url.split('?', 2);
  const parts = path.split('/').filter(Boolean);
  let rest: string[];
  let group = '';
  if (parts[0] === 'api' && parts.length >= 3) rest = parts.slice(2);
  else if (parts[0] === 'apis' && parts.length >= 4) {
    group = parts[1]!;
    rest = parts.slice(3);
  } else return `${method.toLowerCase()} ${path}`;
  // namespaces/<ns>/<resource>/... (but namespaces/<name>/status and /finalize are the Namespace's own).
  if (rest[0] === 'namespaces' && (rest.length >= 4 || (rest.length === 3 && rest[2] !== 'status' && rest[2] !== 'finalize'))) rest = rest.slice(2);
  const [resource = '', name, subresource] = rest;
  const what = `${resource}${group ? `.${group}` : ''}${subresource ? `/${subresource}` : ''}`;
  const watch = /(^|&)watch=(true|1)(&|$)/.test(query);
  const verb =
    method === 'GET' ? (watch ? 'watch' : name ? 'get' : 'list')
    : method === 'POST' ? 'create'
    : method === 'PUT' ? 'update'
    : method === 'PATCH' ? 'patch'
    : method === 'DELETE' ? (name ? 'delete' : 'deletecollection')
    : method.toLowerCase();
  return `${verb} ${what}`;
}
