import { isIP } from 'node:net';
import type { V1EndpointSlice } from '@kubernetes/client-node';
import type { Logger } from '@kube-node-ready/core';
import type { Clock, Timer } from '../../../clock.js';
import type { KubeClient } from '../../../kube/client.js';
import { messageOf } from '../../../kube/errors.js';

/**
 * The API server addresses the worker is given as `--api-endpoints`, from the EndpointSlices of
 * the `default/kubernetes` Service. With them, a node whose Service routing (kube-proxy) is broken
 * while the API servers answer is reported as such by the worker, instead of as API timeouts.
 *
 * The controller reads them, not the worker: the worker reaches the API through that very Service
 * address, so on exactly the nodes that need the list it could not read it. The list is a
 * fallback the worker dials only when the Service address does not connect, and it only ever
 * changes which failure is reported (a node never passes through it), so a slow refresh is
 * enough: read when leadership starts and every API_ENDPOINTS_REFRESH_MS, one list request each.
 * A failed read keeps the last list (an old list still names the right failure on most nodes).
 */
export const KUBERNETES_SERVICE = { namespace: 'default', name: 'kubernetes' } as const;
export const KUBERNETES_SLICE_SELECTOR = `kubernetes.io/service-name=${KUBERNETES_SERVICE.name}`;
export const API_ENDPOINTS_REFRESH_MS = 5 * 60_000;

/**
 * Ready endpoints (`conditions.ready` not false: absent means ready, per the API) with an IP
 * address, on the slice's `https` TCP port (else its first TCP port), as `IP:PORT` / `[IPv6]:PORT`,
 * sorted and without repeats so the worker pods' arguments do not churn.
 */
export function apiEndpointsOf(slices: readonly V1EndpointSlice[]): string[] {
  const out = new Set<string>();
  for (const slice of slices) {
    if (slice.addressType !== 'IPv4' && slice.addressType !== 'IPv6') continue;
    const ports = (slice.ports ?? []).filter((p) => (p.protocol ?? 'TCP') === 'TCP' && typeof p.port === 'number');
    const port = (ports.find((p) => p.name === 'https') ?? ports[0])?.port;
    if (port === undefined) continue;
    for (const endpoint of slice.endpoints ?? []) {
      if (endpoint.conditions?.ready === false) continue;
      for (const address of endpoint.addresses ?? []) {
        const family = isIP(address);
        if (family === 4) out.add(`${address}:${port}`);
        else if (family === 6) out.add(`[${address}]:${port}`);
      }
    }
  }
  return [...out].sort();
}

export interface ApiEndpointsDeps {
  kube: Pick<KubeClient, 'listEndpointSlices'>;
  clock: Clock;
  log: Logger;
  refreshMs?: number;
}

export class ApiEndpoints {
  private endpoints: readonly string[] = [];
  private timer: Timer | undefined;
  private stopped = false;
  /** The last read's error, logged once until a read succeeds. */
  private problem: string | undefined;

  constructor(private readonly deps: ApiEndpointsDeps) {}

  /** The addresses as last read (empty until a read succeeds). */
  current(): readonly string[] {
    return this.endpoints;
  }

  /** Reads now, then every refreshMs until stop(). Never rejects. */
  async start(): Promise<void> {
    this.stopped = false;
    await this.refresh();
    this.schedule();
  }

  stop(): void {
    this.stopped = true;
    this.timer?.cancel();
    this.timer = undefined;
  }

  async refresh(): Promise<void> {
    const { kube, log } = this.deps;
    try {
      const next = apiEndpointsOf(await kube.listEndpointSlices(KUBERNETES_SERVICE.namespace, KUBERNETES_SLICE_SELECTOR));
      if (this.problem !== undefined || next.join() !== this.endpoints.join()) log.info({ endpoints: next }, 'API server endpoints for the worker pods (--api-endpoints)');
      this.endpoints = next;
      this.problem = undefined;
    } catch (err) {
      const problem = messageOf(err);
      if (problem !== this.problem) {
        log.warn(
          { err: problem, kept: this.endpoints },
          `cannot read the EndpointSlices of ${KUBERNETES_SERVICE.namespace}/${KUBERNETES_SERVICE.name}: worker pods get the last known API server endpoints, if any`,
        );
      }
      this.problem = problem;
    }
  }

  private schedule(): void {
    if (this.stopped) return;
    this.timer = this.deps.clock.setTimer(this.deps.refreshMs ?? API_ENDPOINTS_REFRESH_MS, () => {
      void this.refresh().then(() => this.schedule());
    });
  }
}
