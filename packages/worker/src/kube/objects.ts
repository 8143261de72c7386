import * as z from 'zod/mini';

/**
 * The few fields of API objects the checks read. Loose: unknown fields are ignored, and a field
 * Kubernetes may send as null (EndpointSlice endpoints and ports) is accepted.
 */

export const versionSchema = z.object({
  gitVersion: z.string(),
  platform: z.optional(z.string()),
});
export type VersionInfo = z.infer<typeof versionSchema>;

const servicePortSchema = z.object({
  name: z.optional(z.string()),
  port: z.int(),
  protocol: z.optional(z.string()),
});

export const serviceSchema = z.object({
  metadata: z.object({ name: z.string(), namespace: z.optional(z.string()) }),
  spec: z.object({
    type: z.optional(z.string()),
    clusterIP: z.optional(z.string()),
    clusterIPs: z.nullish(z.array(z.string())),
    ports: z.nullish(z.array(servicePortSchema)),
  }),
});
export type Service = z.infer<typeof serviceSchema>;

const endpointSchema = z.object({
  addresses: z.array(z.string()),
  conditions: z.nullish(z.object({ ready: z.nullish(z.boolean()) })),
  nodeName: z.nullish(z.string()),
  targetRef: z.nullish(z.object({ kind: z.optional(z.string()), name: z.optional(z.string()) })),
});

export const endpointSliceSchema = z.object({
  metadata: z.object({ name: z.string() }),
  addressType: z.string(),
  endpoints: z.nullish(z.array(endpointSchema)),
  ports: z.nullish(z.array(z.object({ name: z.nullish(z.string()), port: z.nullish(z.int()), protocol: z.nullish(z.string()) }))),
});
export type EndpointSlice = z.infer<typeof endpointSliceSchema>;

export const endpointSliceListSchema = z.object({ items: z.array(endpointSliceSchema) });

/** The `Status` body of an API error; its message is what kubectl prints. */
export const statusSchema = z.object({ kind: z.literal('Status'), message: z.optional(z.string()), reason: z.optional(z.string()) });

/** A Service's cluster IPs (both families on dual-stack); empty for headless and ExternalName Services. */
export function clusterIPs(service: Service): string[] {
  const ips = service.spec.clusterIPs?.length ? service.spec.clusterIPs : service.spec.clusterIP ? [service.spec.clusterIP] : [];
  return ips.filter((ip) => ip !== 'None' && ip !== '');
}

export interface ReadyEndpoint {
  address: string;
  nodeName?: string;
  /** The target pod, when the slice names one. */
  pod?: string;
}

/**
 * Addresses of endpoints that may receive traffic. Per the EndpointSlice API, a missing `ready`
 * condition means "unknown" and consumers should treat it as ready.
 */
export function readyEndpoints(slice: EndpointSlice): ReadyEndpoint[] {
  return (slice.endpoints ?? [])
    .filter((e) => e.conditions?.ready !== false)
    .flatMap((e) =>
      e.addresses.map((address) => ({
        address,
        ...(e.nodeName ? { nodeName: e.nodeName } : {}),
        ...(e.targetRef?.kind === 'Pod' && e.targetRef.name ? { pod: e.targetRef.name } : {}),
      })),
    );
}

export function notReadyCount(slice: EndpointSlice): number {
  return (slice.endpoints ?? []).filter((e) => e.conditions?.ready === false).length;
}

/** The slice's port by name and protocol, else the first port of that protocol (protocol defaults to TCP). */
export function slicePort(slice: EndpointSlice, name: string, protocol: 'TCP' | 'UDP'): number | undefined {
  const ports = (slice.ports ?? []).filter((p) => (p.protocol ?? 'TCP') === protocol && typeof p.port === 'number');
  return (ports.find((p) => p.name === name) ?? ports[0])?.port ?? undefined;
}
