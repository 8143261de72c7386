import { errorMessage } from '@kube-node-ready/core';
import { formatHostPort, type HostPort } from '../config.js';
import { clusterIPs, readyEndpoints, slicePort } from '../kube/objects.js';
import { tcpConnect } from '../net/tcp-connect.js';
import { KUBERNETES_SERVICE } from './api.js';
import { failedAgainst, Slowness, verdict, type Check, type CheckContext } from './types.js';

interface Target extends HostPort {
  /** "kubernetes Service" (through kube-proxy), "API endpoint" (direct) or "target" (configured). */
  via: string;
}

/**
 * tcp: connect to the `kubernetes` Service ClusterIP (the kube-proxy path), to every API server
 * endpoint of its EndpointSlices (the direct path), and to each configured target, concurrently.
 */
export const tcpCheck: Check = async (ctx) => {
  const problems: string[] = [];
  const [service, endpoints] = await Promise.all([
    kubernetesServiceTargets(ctx).catch((err: unknown) => {
      problems.push(`cannot read Service default/kubernetes: ${errorMessage(err)}`);
      return [];
    }),
    apiEndpointTargets(ctx).catch((err: unknown) => {
      // The endpoints the worker was given (api.endpoints) are still dialled.
      const configured = ctx.cluster?.configuredEndpoints ?? [];
      if (configured.length === 0) problems.push(`cannot read the EndpointSlices of default/kubernetes: ${errorMessage(err)}`);
      return configured.map((e) => ({ ...e, via: 'API endpoint' }));
    }),
  ]);
  const targets: Target[] = [...service, ...endpoints, ...ctx.config.tcp.targets.map((t) => ({ ...t, via: 'target' }))];
  if (targets.length === 0 && problems.length === 0) problems.push('nothing to connect to: no ClusterIP, no ready API endpoint, no configured target');

  const slow = new Slowness(ctx.config, 'tcp');
  const results = await Promise.all(
    targets.map(async (target) => {
      const address = formatHostPort(target);
      try {
        const { latencyMs } = await tcpConnect(target, ctx.signal);
        slow.judge(`${target.via} ${address}`, latencyMs, problems);
        return { via: target.via, address, ok: true, latencyMs };
      } catch (err) {
        return { via: target.via, address, ok: false, error: errorMessage(err) };
      }
    }),
  );
  // The Service address dead while an API server answers directly: the node's Service routing.
  const endpointAnswers = results.some((r) => r.via === 'API endpoint' && r.ok);
  for (const r of results) {
    if (r.ok) continue;
    const routing = r.via === 'kubernetes Service' && endpointAnswers ? ' (the API endpoints connect: kube-proxy (Service routing) on this node)' : '';
    problems.push(`${r.via} ${r.address}: ${r.error}${routing}`);
  }
  return failedAgainst(
    verdict(problems, { connections: results }, slow.warnings),
    results.filter((r) => !r.ok).map((r) => r.address),
  );
};

async function kubernetesServiceTargets({ cluster, signal }: CheckContext): Promise<Target[]> {
  if (!cluster) return [];
  const { body } = await cluster.service(KUBERNETES_SERVICE, signal);
  const port = (body.spec.ports ?? []).find((p) => p.name === 'https') ?? body.spec.ports?.[0];
  if (!port) throw new Error('the Service has no port');
  return clusterIPs(body).map((host) => ({ host, port: port.port, via: 'kubernetes Service' }));
}

async function apiEndpointTargets({ cluster, signal }: CheckContext): Promise<Target[]> {
  if (!cluster) return [];
  const { body: slices } = await cluster.endpointSlices(KUBERNETES_SERVICE, signal);
  const targets = slices.flatMap((slice) => {
    const port = slicePort(slice, 'https', 'TCP');
    return port === undefined ? [] : readyEndpoints(slice).map((e) => ({ host: e.address, port, via: 'API endpoint' }));
  });
  if (targets.length === 0) throw new Error('no ready endpoint with a TCP port');
  return targets;
}
