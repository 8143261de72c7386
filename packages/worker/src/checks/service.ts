import { errorMessage } from '@kube-node-ready/core';
import { formatHostPort, formatServiceRef, type ServiceRef } from '../config.js';
import { clusterIPs, notReadyCount, readyEndpoints } from '../kube/objects.js';
import { lookupAddresses, type DnsAnswer } from '../net/dns-client.js';
import { answerProblem, disagreement } from './dns.js';
import { answeredWith, verdict, type Check, type CheckContext } from './types.js';

/**
 * service: each configured Service (default default/kubernetes, plus the cluster DNS Service)
 * exists, has ready endpoints in its EndpointSlices, and DNS resolves its name to what the API
 * says (the ClusterIP, or the ready endpoint addresses of a headless Service).
 */
export const serviceCheck: Check = async (ctx) => {
  const reports = await Promise.all(ctx.config.service.services.map((ref) => checkService(ctx, ref)));
  const problems = reports.flatMap((r) => r.problems);
  // No nameserver answering is one finding (the dns check's), not one per Service.
  const unanswered = reports.filter((r) => r.unanswered !== undefined);
  if (unanswered.length > 0) {
    const which = unanswered.map((r) => formatServiceRef(r.ref)).join(', ');
    const why = ctx.config.enabled.includes('dns') ? 'the dns check says why' : (unanswered[0]?.unanswered ?? '');
    problems.push(`DNS not compared for ${unanswered.length === 1 ? 'Service' : 'Services'} ${which}: no nameserver answered (${why})`);
  }
  const refused = reports.find((r) => r.apiError !== undefined);
  const result = answeredWith(verdict(problems, { services: reports.map((r) => r.report) }), refused?.apiError);
  // Every problem is a Service without a ready endpoint: the cluster's state, not this node's.
  const failing = reports.filter((r) => r.problems.length > 0 || r.unanswered !== undefined);
  if (!result.ok && failing.length > 0 && failing.every((r) => r.noReadyEndpoints)) return { ...result, noReadyEndpoints: failing.map((r) => formatServiceRef(r.ref)) };
  return result;
};

interface ServiceReport {
  ref: ServiceRef;
  problems: string[];
  report: Record<string, unknown>;
  /** No nameserver answered the Service's name: the failures. */
  unanswered?: string;
  /** Reading the Service or its EndpointSlices failed with this error. */
  apiError?: unknown;
  /** Its EndpointSlices list no ready endpoint (the only problem reported for it). */
  noReadyEndpoints?: boolean;
}

async function checkService(ctx: CheckContext, ref: ServiceRef): Promise<ServiceReport> {
  const id = `Service ${formatServiceRef(ref)}`;
  const report: Record<string, unknown> = { service: formatServiceRef(ref) };
  const problem = (text: string) => ({ ref, problems: [`${id}: ${text}`], report: { ...report, error: text } });
  const { cluster, signal } = ctx;
  if (!cluster) return problem('the API is not in use');

  let service;
  let slices;
  try {
    [service, slices] = await Promise.all([cluster.service(ref, signal), cluster.endpointSlices(ref, signal)]);
  } catch (err) {
    const text = errorMessage(err);
    return { ...problem(/\b404 Not Found\b/.test(text) ? `not found (${text})` : text), apiError: err };
  }
  const ips = clusterIPs(service.body);
  const ready = slices.body.flatMap(readyEndpoints).map((e) => e.address);
  const notReady = slices.body.reduce((n, s) => n + notReadyCount(s), 0);
  Object.assign(report, { type: service.body.spec.type ?? 'ClusterIP', clusterIPs: ips, readyEndpoints: ready.length, notReadyEndpoints: notReady });
  if (service.body.spec.type === 'ExternalName') return { ref, problems: [], report: { ...report, note: 'ExternalName Service: no endpoints or addresses to check' } };
  if (ready.length === 0) {
    const why = slices.body.length === 0 ? 'no EndpointSlice' : `${notReady} endpoint(s), none ready`;
    return { ...problem(`no ready endpoints (${why})`), noReadyEndpoints: true };
  }

  const expected = { service: id, addresses: ips.length > 0 ? ips : ready };
  const name = `${ref.name}.${ref.namespace}.svc.${ctx.config.clusterDomain}`;
  const dns = await resolveOnce(ctx, name);
  report.dns = dns.report;
  if (dns.unanswered !== undefined) return { ref, problems: [], report: { ...report, error: `DNS ${name}: no nameserver answered (${dns.unanswered})` }, unanswered: dns.unanswered };
  if (dns.problem) return problem(`DNS ${dns.problem}`);
  const mismatch = disagreement(dns.addresses, expected);
  return mismatch ? problem(`DNS and API disagree: ${name} ${mismatch}`) : { ref, problems: [], report };
}

/** The first nameserver that gives an answer (a dead nameserver is the dns check's finding, not ours). */
async function resolveOnce(
  ctx: CheckContext,
  name: string,
): Promise<{ addresses: string[]; problem?: string; unanswered?: string; report: Record<string, unknown> }> {
  const { nameservers, signal } = ctx;
  if ('error' in nameservers) return { addresses: [], problem: `not checked: ${nameservers.error}`, report: {} };
  const failures: string[] = [];
  for (const server of nameservers.servers) {
    let answer: DnsAnswer;
    try {
      answer = await lookupAddresses(server, name, signal);
    } catch (err) {
      failures.push(`@${formatHostPort(server)}: ${errorMessage(err)}`);
      continue;
    }
    const report = { name, server: formatHostPort(server), rcode: answer.rcode, answers: answer.addresses };
    const problem = answerProblem(answer);
    return { addresses: answer.addresses, report, ...(problem ? { problem: `${name} @${formatHostPort(server)}: ${problem}` } : {}) };
  }
  return { addresses: [], unanswered: failures.join('; '), report: { name } };
}
