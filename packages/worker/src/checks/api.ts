import { errorMessage } from '@kube-node-ready/core';
import { formatHostPort, type ServiceRef } from '../config.js';
import { answeredWith, failedAgainst, Slowness, verdict, type Check } from './types.js';

export const KUBERNETES_SERVICE: ServiceRef = { namespace: 'default', name: 'kubernetes' };

/**
 * api: the API server named by KUBERNETES_SERVICE_HOST/PORT, step by step so the failing step is
 * the one reported: TLS handshake against the service-account CA, GET /version, then one call the
 * worker's RBAC allows (GET the `kubernetes` Service, which the other checks share).
 */
export const apiCheck: Check = async ({ cluster, signal, config }) => {
  if (!cluster) return verdict(['the API is not in use']);
  const details: Record<string, unknown> = cluster.server ? { server: formatHostPort(cluster.server) } : {};
  const target = cluster.server ? [formatHostPort(cluster.server)] : [];
  const slow = new Slowness(config, 'api');
  const problems: string[] = [];
  const steps: Array<() => Promise<Record<string, unknown>>> = [
    async () => {
      const tls = await cluster.tlsHandshake(signal);
      return { tlsMs: tls.latencyMs, tlsProtocol: tls.protocol };
    },
    async () => {
      const { body, latencyMs } = await cluster.version(signal);
      return { version: body.gitVersion, versionMs: latencyMs };
    },
    async () => {
      const { latencyMs } = await cluster.service(KUBERNETES_SERVICE, signal);
      return { authenticatedMs: latencyMs };
    },
  ];
  for (const step of steps) {
    try {
      Object.assign(details, await step());
    } catch (err) {
      return answeredWith(failedAgainst(verdict([...(await routingProblem()), errorMessage(err)], details, slow.warnings), target), err);
    }
  }
  for (const [key, what] of [['tlsMs', 'TLS handshake'], ['versionMs', 'GET /version'], ['authenticatedMs', 'GET the kubernetes Service']] as const) {
    slow.judge(what, details[key] as number, problems);
  }
  problems.unshift(...(await routingProblem()));
  return failedAgainst(verdict(problems, details, slow.warnings), target);

  /** The Service address did not connect and the checks read the API through an endpoint instead. */
  async function routingProblem(): Promise<string[]> {
    const route = await cluster?.route().catch(() => undefined);
    if (route?.via !== 'endpoint') return [];
    details.route = { via: 'endpoint', endpoint: formatHostPort(route.server), serviceError: route.serviceError };
    return [
      `kube-proxy (Service routing) on this node: the kubernetes Service ${formatHostPort(route.service)} does not connect (${route.serviceError}) but the API server answers directly at ${formatHostPort(route.server)}`,
    ];
  }
};
