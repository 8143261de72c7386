import type { Logger } from '@kube-node-ready/core';
import type { Clock } from '../../../clock.js';
import type { KubeClient } from '../../../kube/client.js';
import { messageOf } from '../../../kube/errors.js';

/** How long one read of the cluster DNS Service's endpoints is reused. */
export const DNS_ENDPOINTS_TTL_MS = 10_000;

/**
 * Whether the cluster DNS Service (`reconciliation.clusterDnsService`, `kube-system/kube-dns` by
 * default) has a ready endpoint: the direct evidence that a node's failed dns check is the
 * cluster's fault (CoreDNS not running anywhere: a cold start, a bad rollout), not the node's.
 *
 * Read only when an attempt failed a DNS check, one EndpointSlice list (by the
 * `kubernetes.io/service-name` label) per DNS_ENDPOINTS_TTL_MS at most, so a burst of failing nodes
 * costs one request every 10 s. A failed read is no evidence (undefined): the node is then judged
 * as without it, by the failures of other nodes.
 */
export class ClusterDnsEndpoints {
  private last: { at: number; ready: number | undefined } | undefined;
  private reading: Promise<number | undefined> | undefined;
  private problem: string | undefined;
  readonly namespace: string;
  readonly name: string;

  constructor(
    private readonly deps: { kube: Pick<KubeClient, 'listEndpointSlices'>; clock: Pick<Clock, 'now'>; log: Logger; service: string; ttlMs?: number },
  ) {
    const [namespace = '', name = ''] = deps.service.split('/');
    this.namespace = namespace;
    this.name = name;
  }

  /** `kube-system/kube-dns`. */
  get service(): string {
    return `${this.namespace}/${this.name}`;
  }

  /** Ready endpoints of the Service (0: none anywhere), or undefined when they cannot be read. */
  async ready(): Promise<number | undefined> {
    const now = this.deps.clock.now();
    if (this.last && now - this.last.at < (this.deps.ttlMs ?? DNS_ENDPOINTS_TTL_MS)) return this.last.ready;
    this.reading ??= this.read().finally(() => (this.reading = undefined));
    return this.reading;
  }

  private async read(): Promise<number | undefined> {
    let ready: number | undefined;
    try {
      const slices = await this.deps.kube.listEndpointSlices(this.namespace, `kubernetes.io/service-name=${this.name}`);
      // `conditions.ready` absent means ready (the API's rule); ports do not matter here.
      ready = slices.reduce((n, s) => n + (s.endpoints ?? []).filter((e) => e.conditions?.ready !== false && (e.addresses ?? []).length > 0).length, 0);
      if (this.problem !== undefined) this.deps.log.info({ service: this.service }, 'the cluster DNS Service\'s EndpointSlices can be read again');
      this.problem = undefined;
    } catch (err) {
      const problem = messageOf(err);
      if (problem !== this.problem) {
        this.deps.log.warn(
          { service: this.service, err: problem },
          'cannot read the cluster DNS Service\'s EndpointSlices: a failed dns check is judged without them (grant list on endpointslices in its namespace, or set reconciliation.clusterDnsService to "")',
        );
      }
      this.problem = problem;
    }
    this.last = { at: this.deps.clock.now(), ready };
    return ready;
  }
}
