import https from 'node:https';
import type { AddressInfo } from 'node:net';
import type { TestPki } from './pki.js';

/**
 * A tiny HTTPS "API server" on 127.0.0.1 serving the few reads the worker makes, with bearer-token
 * authentication and per-path RBAC denials. It records every request path.
 */
export interface FakeApiState {
  token: string;
  /** Service account the token belongs to (used in 403 messages). */
  user: string;
  services: Map<string, object>;
  slices: Map<string, object[]>;
  /** Paths (without query) answered 403. */
  forbidden: Set<string>;
  /** Paths (without query) answered with this HTTP error status (503, 429...). */
  failing: Map<string, number>;
  requests: string[];
}

export interface FakeApi {
  host: string;
  port: number;
  state: FakeApiState;
  close(): Promise<void>;
}

export async function startFakeApi(pki: TestPki, token: string): Promise<FakeApi> {
  const state: FakeApiState = {
    token,
    user: 'system:serviceaccount:kube-system:kube-node-ready-worker',
    services: new Map(),
    slices: new Map(),
    forbidden: new Set(),
    failing: new Map(),
    requests: [],
  };
  const server = https.createServer({ cert: pki.serverCert, key: pki.serverKey }, (req, res) => {
    const url = new URL(req.url ?? '/', 'https://fake');
    state.requests.push(`${url.pathname}${url.search}`);
    const send = (code: number, body: object) => {
      res.writeHead(code, { 'Content-Type': 'application/json' });
      res.end(JSON.stringify(body));
    };
    const status = (code: number, reason: string, message: string) =>
      send(code, { kind: 'Status', apiVersion: 'v1', metadata: {}, status: 'Failure', message, reason, code });

    if (req.headers.authorization !== `Bearer ${state.token}`) return status(401, 'Unauthorized', 'Unauthorized');
    const failing = state.failing.get(url.pathname);
    if (failing !== undefined) return status(failing, failing === 429 ? 'TooManyRequests' : 'ServiceUnavailable', failing === 429 ? 'too many requests, please try again later' : 'the server is currently unable to handle the request');
    if (url.pathname === '/version') return send(200, { major: '1', minor: '33', gitVersion: 'v1.33.1', platform: 'linux/amd64' });

    let m = /^\/api\/v1\/namespaces\/([^/]+)\/services\/([^/]+)$/.exec(url.pathname);
    if (m) {
      const [, ns, name] = m as unknown as [string, string, string];
      if (state.forbidden.has(url.pathname)) {
        return status(403, 'Forbidden', `services "${name}" is forbidden: User "${state.user}" cannot get resource "services" in API group "" in the namespace "${ns}"`);
      }
      const svc = state.services.get(`${ns}/${name}`);
      return svc ? send(200, svc) : status(404, 'NotFound', `services "${name}" not found`);
    }
    m = /^\/apis\/discovery\.k8s\.io\/v1\/namespaces\/([^/]+)\/endpointslices$/.exec(url.pathname);
    if (m) {
      const ns = m[1] as string;
      if (state.forbidden.has(url.pathname)) {
        return status(403, 'Forbidden', `endpointslices.discovery.k8s.io is forbidden: User "${state.user}" cannot list resource "endpointslices" in API group "discovery.k8s.io" in the namespace "${ns}"`);
      }
      const service = /^kubernetes\.io\/service-name=(.+)$/.exec(url.searchParams.get('labelSelector') ?? '')?.[1];
      return send(200, { kind: 'EndpointSliceList', apiVersion: 'discovery.k8s.io/v1', metadata: {}, items: state.slices.get(`${ns}/${service}`) ?? [] });
    }
    return status(404, 'NotFound', 'the server could not find the requested resource');
  });
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  return {
    host: '127.0.0.1',
    port: (server.address() as AddressInfo).port,
    state,
    close: () =>
      new Promise((resolve) => {
        server.closeAllConnections();
        server.close(() => resolve());
      }),
  };
}

export function aService(namespace: string, name: string, opts: { clusterIP?: string; port?: number; portName?: string; protocol?: string; type?: string } = {}): object {
  const clusterIP = opts.clusterIP ?? '10.96.0.1';
  return {
    kind: 'Service',
    apiVersion: 'v1',
    metadata: { name, namespace },
    spec: {
      type: opts.type ?? 'ClusterIP',
      clusterIP,
      clusterIPs: [clusterIP],
      ports: [{ name: opts.portName ?? 'https', port: opts.port ?? 443, protocol: opts.protocol ?? 'TCP' }],
    },
  };
}

export interface SliceEndpoint {
  address: string;
  ready?: boolean;
  nodeName?: string;
}

export function aSlice(service: string, endpoints: SliceEndpoint[], port: { name: string; port: number; protocol?: string }): object {
  return {
    kind: 'EndpointSlice',
    apiVersion: 'discovery.k8s.io/v1',
    metadata: { name: `${service}-abcde`, labels: { 'kubernetes.io/service-name': service } },
    addressType: 'IPv4',
    endpoints: endpoints.map((e) => ({
      addresses: [e.address],
      conditions: e.ready === undefined ? {} : { ready: e.ready },
      ...(e.nodeName ? { nodeName: e.nodeName } : {}),
    })),
    ports: [{ name: port.name, port: port.port, protocol: port.protocol ?? 'TCP' }],
  };
}
