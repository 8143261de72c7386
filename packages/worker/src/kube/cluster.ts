import type * as z from 'zod/mini';
import { formatHostPort, type HostPort, type PodEnvironment, type ServiceRef } from '../config.js';
import { abortable, deadline, describeAbort } from '../net/deadline.js';
import { ApiError, KubeApiClient, readServiceAccount, type ApiResponse } from './api-client.js';
import { endpointSliceListSchema, serviceSchema, versionSchema, type EndpointSlice, type Service, type VersionInfo } from './objects.js';

/**
 * What the checks read from the API, fetched once per run and shared: the dns, api, tcp and
 * service checks all want the `kubernetes` Service, and each read happens a single time however
 * many checks ask. Each request is bounded by `requestTimeoutMs` and the run's deadline; each
 * caller additionally waits no longer than its own signal allows.
 */
export class ClusterApi {
  private readonly client: KubeApiClient | undefined;
  private readonly setupError: ApiError | undefined;
  private readonly cache = new Map<string, Promise<ApiResponse<unknown>>>();

  constructor(
    pod: PodEnvironment,
    private readonly runSignal: AbortSignal,
    private readonly requestTimeoutMs: number,
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

  tlsHandshake(signal: AbortSignal): Promise<{ latencyMs: number; protocol: string }> {
    if (!this.client) return Promise.reject(this.setupError);
    return this.client.tlsHandshake(signal);
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
      return await this.client.get(path, schema, request.signal);
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
