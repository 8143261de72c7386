import type * as z from 'zod/mini';
import { formatHostPort, type HostPort, type PodEnvironment, type ServiceRef } from '../config.js';
import { abortable, deadline, describeAbort } from '../net/deadline.js';
import { tcpConnect } from '../net/tcp-connect.js';
import { ApiError, KubeApiClient, readServiceAccount, type ApiResponse } from './api-client.js';
import { endpointSliceListSchema, serviceSchema, versionSchema, type EndpointSlice, type Service, type VersionInfo } from './objects.js';

/**
 * What the checks read from the API, fetched once per run and shared: the dns, api, tcp and
 * service checks all want the `kubernetes` Service, and each read happens a single time however
 * many checks ask. Each request is bounded by `requestTimeoutMs` and the run's deadline; each
 * caller additionally waits no longer than its own signal allows.
 */
/** How the API is reached this run: through the Service address, or an endpoint when the Service does not connect. */
export type ApiRoute = { via: 'service'; server: HostPort } | { via: 'endpoint'; server: HostPort; service: HostPort; serviceError: string };

/** How long a TCP connect to the Service address may take before the configured endpoints are tried. */
export const ROUTE_PROBE_MS = 2000;

export class ClusterApi {
  private readonly client: KubeApiClient | undefined;
  private readonly setupError: ApiError | undefined;
  private readonly cache = new Map<string, Promise<ApiResponse<unknown>>>();
  private routing: Promise<{ route: ApiRoute; client: KubeApiClient }> | undefined;
  private direct: KubeApiClient | undefined;

  /**
   * `endpoints`: API server addresses (api.endpoints) to read through when the Service address
   * (KUBERNETES_SERVICE_HOST) does not connect: Service routing (kube-proxy) broken on this node
   * must not hide every other finding behind API timeouts.
   */
  constructor(
    pod: PodEnvironment,
    private readonly runSignal: AbortSignal,
    private readonly requestTimeoutMs: number,
    private readonly endpoints: HostPort[] = [],
  ) {
    let client: KubeApiClient | undefined;
    let setupError: ApiError | undefined;
    if (!pod.apiServer) {
      setupError = new ApiError('setup', 'KUBERNETES_SERVICE_HOST is not set: the worker is not running in a pod, so the API server is unknown');
    } else {
      try {
        client = new KubeApiClient(pod.apiServer, readServiceAccount(pod.serviceAccountDir));
      } catch (err) {
        setupError = err instanceof ApiError ? err : new ApiError('setup', String(err));
      }
    }
    this.client = client;
    this.setupError = setupError;
  }

  get server(): HostPort | undefined {
    return this.client?.server;
  }

  /** The configured API endpoints (api.endpoints), for checks that dial them when the API cannot be read. */
  get configuredEndpoints(): HostPort[] {
    return this.endpoints;
  }

  /**
   * Through the Service address, unless endpoints are configured, the Service address does not
   * connect within ROUTE_PROBE_MS and an endpoint does. Decided once per run.
   */
  route(): Promise<ApiRoute> {
    return this.routed().then((r) => r.route);
  }

  async tlsHandshake(signal: AbortSignal): Promise<{ latencyMs: number; protocol: string }> {
    const { client } = await abortable(this.routed(), signal, () => new ApiError('timeout', `TLS handshake: timeout: no answer from ${this.describeServer()} within ${describeAbort(signal)}`));
    return client.tlsHandshake(signal);
  }

  private routed(): Promise<{ route: ApiRoute; client: KubeApiClient }> {
    if (!this.client) return Promise.reject(this.setupError ?? new ApiError('setup', 'no API client'));
    const client = this.client;
    if (this.endpoints.length === 0) return Promise.resolve({ route: { via: 'service', server: client.server }, client });
    this.routing ??= this.chooseRoute(client);
    return this.routing;
  }

  private async chooseRoute(client: KubeApiClient): Promise<{ route: ApiRoute; client: KubeApiClient }> {
    const probe = (target: HostPort) => {
      const limit = deadline(Math.min(ROUTE_PROBE_MS, this.requestTimeoutMs), 'API route probe', this.runSignal);
      return tcpConnect(target, limit.signal).finally(() => limit.dispose());
    };
    const service = client.server;
    try {
      await probe(service);
      return { route: { via: 'service', server: service }, client };
    } catch (err) {
      const serviceError = err instanceof Error ? err.message : String(err);
      try {
        const endpoint = await Promise.any(this.endpoints.map((e) => probe(e).then(() => e)));
        this.direct = client.via(endpoint);
        return { route: { via: 'endpoint', server: endpoint, service, serviceError }, client: this.direct };
      } catch {
        return { route: { via: 'service', server: service }, client };
      }
    }
  }

  version(signal: AbortSignal): Promise<ApiResponse<VersionInfo>> {
    return this.read('/version', versionSchema, signal);
  }

  service(ref: ServiceRef, signal: AbortSignal): Promise<ApiResponse<Service>> {
    return this.read(`/api/v1/namespaces/${ref.namespace}/services/${ref.name}`, serviceSchema, signal);
  }

  /** The EndpointSlices of a Service (label kubernetes.io/service-name). */
  async endpointSlices(ref: ServiceRef, signal: AbortSignal): Promise<ApiResponse<EndpointSlice[]>> {
    const selector = encodeURIComponent(`kubernetes.io/service-name=${ref.name}`);
    const path = `/apis/discovery.k8s.io/v1/namespaces/${ref.namespace}/endpointslices?labelSelector=${selector}`;
    const list = await this.read(path, endpointSliceListSchema, signal);
    return { body: list.body.items, latencyMs: list.latencyMs };
  }

  /** Closes kept-alive connections so nothing holds the process open. */
  close(): void {
    this.client?.close();
    this.direct?.close();
  }

  private read<T>(path: string, schema: z.ZodMiniType<T>, signal: AbortSignal): Promise<ApiResponse<T>> {
    let shared = this.cache.get(path) as Promise<ApiResponse<T>> | undefined;
    if (!shared) {
      shared = this.fetch(path, schema);
      shared.catch(() => {});
      this.cache.set(path, shared);
    }
    return abortable(shared, signal, () => new ApiError('timeout', `GET ${path}: timeout: no answer from ${this.describeServer()} within ${describeAbort(signal)}`));
  }

  private async fetch<T>(path: string, schema: z.ZodMiniType<T>): Promise<ApiResponse<T>> {
    if (!this.client) throw this.setupError;
    const request = deadline(this.requestTimeoutMs, 'API request timeout', this.runSignal);
    try {
      const { client } = await this.routed();
      return await client.get(path, schema, request.signal);
    } catch (err) {
      if (err instanceof ApiError && err.kind !== 'timeout' && !err.message.startsWith('GET ')) {
        throw new ApiError(err.kind, `GET ${path}: ${err.message}`, err.status);
      }
      throw err;
    } finally {
      request.dispose();
    }
  }

  private describeServer(): string {
    return this.client ? formatHostPort(this.client.server) : 'the API server';
  }
}
