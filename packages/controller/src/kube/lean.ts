import { ApiException, RequestContext, type HttpMethod, type KubeConfig } from '@kubernetes/client-node';

/** One API request of the lean path: the body is sent as JSON, the answer parsed as plain JSON. */
export interface LeanRequest {
  method: 'GET' | 'POST' | 'PUT' | 'PATCH' | 'DELETE';
  /** The API path, e.g. /api/v1/nodes/NAME (segments already escaped: apiPath()). */
  path: string;
  query?: Readonly<Record<string, string | number | boolean | undefined>>;
  body?: unknown;
  /** Default application/json (a JSON patch or merge patch names its own). */
  contentType?: string;
}

/**
 * API requests without `@kubernetes/client-node`'s generated layers, for the calls made for every
 * node (its patches, its worker pod, its NodeVerification, its Events). client-node still does
 * what it is good at: it authenticates each request (a bearer token as it reads it, exec and auth
 * plugins, client certificates) and the kubeconfig's TLS settings make the connection pool
 * (PooledKubeConfig: one pool, shared with the typed calls and the watches). What it does not do
 * here: the WHATWG fetch around each request (Request, Headers and Response objects, the body as a
 * stream that fetch tees), the typed serialisation of the body and the typed walk over every field
 * of the answer (ObjectSerializer): each costs CPU on every request of every node. Sent through
 * undici's own request() on that pool and parsed with JSON.parse instead
 * (bench/results/2026-11-27-lean-requests-and-runtime.md has what it saved).
 *
 * Answers are plain JSON, as the informer caches hold them: times are RFC 3339 strings, not Date
 * objects (read them with kube/objects toMillis). An answer outside 2xx is thrown as client-node's
 * ApiException with the body as text, as the generated code throws it, so kube/errors reads both
 * alike.
 */
export class LeanRequests {
  constructor(private readonly kubeConfig: KubeConfig) {}

  /** The request's answer, parsed. */
  async json<T>(req: LeanRequest): Promise<T> {
    const text = await this.send(req);
    return (text ? JSON.parse(text) : undefined) as T;
  }

  /** Sends the request; the answer's body is read (the connection goes back to the pool) but not parsed. */
  async send(req: LeanRequest): Promise<string> {
    const { answer, path } = await this.open(req);
    const text = await answer.body.text();
    if (answer.statusCode >= 200 && answer.statusCode <= 299) return text;
    const headers: Record<string, string> = {};
    for (const [name, value] of Object.entries(answer.headers)) if (value !== undefined) headers[name] = Array.isArray(value) ? value.join(', ') : value;
    throw new ApiException(answer.statusCode, `${req.method} ${path}`, text, headers);
  }

  /**
   * Sends the request and returns the answer as it starts, whatever its status: its body is a stream
   * the caller must read or destroy (a watch). `signal` aborts the request and the body's stream.
   */
  async open(req: LeanRequest, signal?: AbortSignal): Promise<{ answer: ResponseData; path: string }> {
    const server = this.kubeConfig.getCurrentCluster()?.server;
    if (!server) throw new Error('kubeconfig: the current context names no cluster with a server; set current-context to a context whose cluster has a server URL');
    const query = Object.entries(req.query ?? {})
      .filter((entry): entry is [string, string | number | boolean] => entry[1] !== undefined)
      .map(([key, value]) => `${encodeURIComponent(key)}=${encodeURIComponent(value)}`)
      .join('&');
    const url = new URL(`${server.replace(/\/+$/, '')}${req.path}${query ? `?${query}` : ''}`);
    const context = new RequestContext(url.href, req.method as HttpMethod);
    context.setHeaderParam('Accept', 'application/json');
    const body = req.body === undefined ? undefined : JSON.stringify(req.body);
    if (body !== undefined) context.setHeaderParam('Content-Type', req.contentType ?? 'application/json');
    await this.kubeConfig.applySecurityAuthentication(context);
    const dispatcher = context.getDispatcher();
    if (!dispatcher) throw new Error('no connection pool for the API server: the kubeconfig must be a PooledKubeConfig (kube/config.ts loadKubeConfig)');
    const answer = await dispatcher.request({
      origin: url.origin,
      path: `${url.pathname}${url.search}`,
      method: req.method,
      headers: context.getHeaders(),
      ...(body !== undefined ? { body } : {}),
      ...(signal ? { signal } : {}),
    });
    return { answer, path: url.pathname };
  }
}

type Dispatcher = NonNullable<ReturnType<RequestContext['getDispatcher']>>;
type ResponseData = Awaited<ReturnType<Dispatcher['request']>>;

/** An API path from its segments, each escaped: apiPath('api/v1/nodes', name) is /api/v1/nodes/<name>. */
export function apiPath(...segments: string[]): string {
  return segments.map((s, i) => (i === 0 ? `/${s}` : `/${encodeURIComponent(s)}`)).join('');
}
