import { k8s, listWatch } from './kube.js';

/** The addresses of a slice's ready endpoints (an endpoint without a ready condition counts as ready, as kube-proxy takes it). */
export function readyAddresses(slice: k8s.V1EndpointSlice): string[] {
  return (slice.endpoints ?? []).filter((ep) => ep.conditions?.ready !== false).flatMap((ep) => ep.addresses);
}

const key = (o: k8s.KubernetesObject) => `${o.metadata?.namespace}/${o.metadata?.name}`;

/**
 * Services and EndpointSlices of the whole cluster, kept current by one list+watch each, shared
 * by the cluster DNS and the service proxy. Listeners run after every change.
 */
export class ServiceCatalog {
  services = new Map<string, k8s.V1Service>();
  slices = new Map<string, k8s.V1EndpointSlice>();
  private listeners: Array<() => void> = [];
  private watches: Array<{ stop: () => void }> = [];

  constructor(private readonly kc: k8s.KubeConfig) {}

  onChange(fn: () => void): void {
    this.listeners.push(fn);
  }

  start(): void {
    const core = this.kc.makeApiClient(k8s.CoreV1Api);
    const discovery = this.kc.makeApiClient(k8s.DiscoveryV1Api);
    this.watches.push(
      this.track('/api/v1/services', () => core.listServiceForAllNamespaces(), this.services),
      this.track('/apis/discovery.k8s.io/v1/endpointslices', () => discovery.listEndpointSliceForAllNamespaces(), this.slices),
    );
  }

  stop(): void {
    for (const w of this.watches) w.stop();
  }

  /** The EndpointSlices of a Service (by the kubernetes.io/service-name label). */
  slicesOf(namespace: string | undefined, name: string | undefined): k8s.V1EndpointSlice[] {
    return [...this.slices.values()].filter(
      (s) => s.metadata?.namespace === namespace && s.metadata?.labels?.['kubernetes.io/service-name'] === name,
    );
  }

  private track<T extends k8s.KubernetesObject>(
    path: string,
    list: () => Promise<{ items: T[]; metadata?: { resourceVersion?: string } }>,
    into: Map<string, T>,
  ): { stop: () => void } {
    const changed = () => this.listeners.forEach((fn) => fn());
    return listWatch<T>(
      this.kc,
      path,
      list,
      (type, obj) => {
        if (type === 'DELETED') into.delete(key(obj));
        else into.set(key(obj), obj);
        changed();
      },
      (items) => {
        into.clear();
        for (const o of items) into.set(key(o), o);
        changed();
      },
    );
  }
}
