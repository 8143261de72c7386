import { errorMessage } from '@kube-node-ready/core';
import { formatHostPort, formatServiceRef } from '../config.js';
import { readyEndpoints, slicePort } from '../kube/objects.js';
import { queryDns } from '../net/dns-client.js';
import { Slowness, verdict, type Check } from './types.js';

/**
 * podnet: a DNS query straight to each ready cluster-DNS pod IP from the DNS Service's
 * EndpointSlices, not through the Service: it proves pod-to-pod routing from this node to the
 * nodes those pods run on. Any answer (even NXDOMAIN) proves the path. Mode `any` passes when one
 * pod answers, `all` when every one does.
 */
export const podnetCheck: Check = async ({ cluster, config, signal }) => {
  const ref = config.dnsService;
  const id = `Service ${formatServiceRef(ref)}`;
  if (!cluster) return verdict(['the API is not in use']);
  let slices;
  try {
    ({ body: slices } = await cluster.endpointSlices(ref, signal));
  } catch (err) {
    return verdict([`cannot read the EndpointSlices of ${id}: ${errorMessage(err)}`]);
  }
  const pods = slices.flatMap((slice) => {
    const port = slicePort(slice, 'dns', 'UDP') ?? 53;
    return readyEndpoints(slice).map((e) => ({ ...e, server: { host: e.address, port } }));
  });
  if (pods.length === 0) return { ...verdict([`no ready endpoints in the EndpointSlices of ${id}: no DNS pod to reach`]), noReadyEndpoints: [formatServiceRef(ref)] };

  const question = config.dns.names[0] ?? `kubernetes.default.svc.${config.clusterDomain}`;
  const results = await Promise.all(
    pods.map(async (pod) => {
      const base = {
        address: formatHostPort(pod.server),
        ...(pod.pod ? { pod: pod.pod } : {}),
        ...(pod.nodeName ? { nodeName: pod.nodeName, sameNode: pod.nodeName === config.pod.nodeName } : {}),
      };
      try {
        const answer = await queryDns(pod.server, question, 'A', signal);
        return { ...base, ok: true as const, rcode: answer.rcode, latencyMs: answer.latencyMs };
      } catch (err) {
        return { ...base, ok: false as const, error: errorMessage(err) };
      }
    }),
  );
  const failures = results.filter((r) => !r.ok);
  const ok = config.podnet.mode === 'any' ? failures.length < results.length : failures.length === 0;
  const details = { mode: config.podnet.mode, question, pods: results };
  const slow = new Slowness(config, 'podnet');
  const problems: string[] = [];
  for (const r of results) if (r.ok) slow.judge(`DNS pod ${r.address}${r.nodeName ? ` on ${r.nodeName}` : ''}`, r.latencyMs, problems);
  if (ok) return verdict(problems, details, slow.warnings);
  const list = failures.map((f) => `${f.address}${f.nodeName ? ` on ${f.nodeName}` : ''}: ${f.error}`).join('; ');
  const head = config.podnet.mode === 'any' ? `no DNS pod of ${id} answered` : `${failures.length} of ${results.length} DNS pods of ${id} did not answer`;
  return verdict([`${head}: ${list}`], details);
};
