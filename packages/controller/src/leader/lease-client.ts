import { V1MicroTime, type CoordinationV1Api, type V1Lease } from '@kubernetes/client-node';
import { FIELD_MANAGER } from '../api/well-known.js';
import { isNotFound } from '../kube/errors.js';
import { toMillis } from '../kube/objects.js';
import type { LeaseClient, LeaseRecord, ObservedLease } from './elector.js';

/** LeaseClient over coordination.k8s.io/v1 (the real one; the protocol is in elector.ts). */
export class KubeLeaseClient implements LeaseClient {
  constructor(
    private readonly api: CoordinationV1Api,
    private readonly namespace: string,
    private readonly name: string,
  ) {}

  async get(): Promise<ObservedLease | undefined> {
    try {
      return fromLease(await this.api.readNamespacedLease({ name: this.name, namespace: this.namespace }));
    } catch (err) {
      if (isNotFound(err)) return undefined;
      throw err;
    }
  }

  async create(record: LeaseRecord): Promise<ObservedLease> {
    const body = toLease(this.namespace, this.name, record);
    return fromLease(await this.api.createNamespacedLease({ namespace: this.namespace, body, fieldManager: FIELD_MANAGER }));
  }

  async update(record: LeaseRecord, resourceVersion: string): Promise<ObservedLease> {
    const body = toLease(this.namespace, this.name, record, resourceVersion);
    return fromLease(await this.api.replaceNamespacedLease({ name: this.name, namespace: this.namespace, body, fieldManager: FIELD_MANAGER }));
  }
}

function toLease(namespace: string, name: string, r: LeaseRecord, resourceVersion?: string): V1Lease {
  return {
    apiVersion: 'coordination.k8s.io/v1',
    kind: 'Lease',
    metadata: { name, namespace, ...(resourceVersion ? { resourceVersion } : {}) },
    spec: {
      holderIdentity: r.holderIdentity,
      leaseDurationSeconds: r.leaseDurationSeconds,
      leaseTransitions: r.leaseTransitions,
      // MicroTime: the API server wants six fractional digits.
      ...(r.acquireTime !== undefined ? { acquireTime: new V1MicroTime(r.acquireTime) } : {}),
      ...(r.renewTime !== undefined ? { renewTime: new V1MicroTime(r.renewTime) } : {}),
    },
  };
}

function fromLease(lease: V1Lease): ObservedLease {
  const spec = lease.spec ?? {};
  const record: LeaseRecord = {
    holderIdentity: spec.holderIdentity ?? '',
    leaseDurationSeconds: spec.leaseDurationSeconds ?? 0,
    leaseTransitions: spec.leaseTransitions ?? 0,
  };
  const acquireTime = toMillis(spec.acquireTime);
  const renewTime = toMillis(spec.renewTime);
  if (acquireTime !== undefined) record.acquireTime = acquireTime;
  if (renewTime !== undefined) record.renewTime = renewTime;
  return { record, resourceVersion: lease.metadata?.resourceVersion ?? '' };
}
