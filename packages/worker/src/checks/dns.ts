import { errorMessage } from '@kube-node-ready/core';
import { formatHostPort, formatServiceRef, type HostPort, type ServiceRef } from '../config.js';
import { clusterIPs } from '../kube/objects.js';
import { lookupAddresses, type DnsAnswer } from '../net/dns-client.js';
import { failedAgainst, Slowness, verdict, type Check, type CheckContext } from './types.js';

/**
 * dns: every configured name against every nameserver, one by one (a resolver library would stop
 * at the first server that answers and hide a broken one). Names of the form
 * <service>.<namespace>.svc.<clusterDomain> must resolve to that Service's ClusterIP when the API
 * is in use.
 */
export const dnsCheck: Check = async (ctx) => {
  const { nameservers, config, signal } = ctx;
  if ('error' in nameservers) return verdict([nameservers.error]);
  const names = [...config.dns.names.map((name) => ({ name, internal: true })), ...config.dns.externalNames.map((name) => ({ name, internal: false }))];
  if (names.length === 0) return verdict(['no name to resolve: dns.names and dns.externalNames are both empty']);
  const expectations = new Map(names.map(({ name, internal }) => [name, internal ? expectedAddresses(ctx, name) : Promise.resolve(undefined)]));

  const lookups = await Promise.all(
    nameservers.servers.flatMap((server) => names.map(({ name }) => lookupAndCompare(server, name, expectations.get(name) as Promise<Expectation>, signal))),
  );
  const slow = new Slowness(config, 'dns');
  const problems = statedOnce(lookups);
  for (const l of lookups) {
    const { latencyMs, sends } = l.report as { latencyMs?: number; sends?: number };
    if (latencyMs !== undefined) slow.judge(`${l.name} @${l.server}`, latencyMs, problems, sends !== undefined && sends > 1 ? `, the UDP query was sent ${sends} times` : '');
  }
  const result = verdict(
    problems,
    { nameservers: nameservers.servers.map(formatHostPort), nameserversFrom: nameservers.source, lookups: lookups.map((l) => l.report) },
    slow.warnings,
  );
  return failedAgainst(result, lookups.filter((l) => l.problem).map((l) => l.server));
};

/**
 * One problem per nameserver and error: a server that does not answer is one finding, however many
 * names were asked ("a, b @10.96.0.10:53: timeout ..."), so the cause is not repeated out of the message.
 */
function statedOnce(lookups: Lookup[]): string[] {
  const groups = new Map<string, { server: string; problem: string; names: string[] }>();
  for (const l of lookups) {
    if (!l.problem) continue;
    const key = `${l.server}\n${l.problem}`;
    const group = groups.get(key) ?? { server: l.server, problem: l.problem, names: [] };
    group.names.push(l.name);
    groups.set(key, group);
  }
  return [...groups.values()].map((g) => `${g.names.join(', ')} @${g.server}: ${g.problem}`);
}

/** What the API says a name must resolve to; undefined when there is nothing to compare. */
export type Expectation = { service: string; addresses: string[] } | { service: string; notCompared: string } | undefined;

interface Lookup {
  server: string;
  name: string;
  /** What is wrong, without the name and server. */
  problem?: string;
  report: Record<string, unknown>;
}

async function lookupAndCompare(server: HostPort, name: string, expectation: Promise<Expectation>, signal: AbortSignal): Promise<Lookup> {
  const at = formatHostPort(server);
  let answer: DnsAnswer;
  try {
    answer = await lookupAddresses(server, name, signal);
  } catch (err) {
    const error = errorMessage(err);
    return { server: at, name, problem: error, report: { server: at, name, error } };
  }
  const report: Record<string, unknown> = {
    server: formatHostPort(server),
    name,
    rcode: answer.rcode,
    type: answer.type,
    answers: answer.addresses,
    transport: answer.transport,
    latencyMs: answer.latencyMs,
    ...(answer.sends > 1 ? { sends: answer.sends } : {}),
  };
  const problem = answerProblem(answer) ?? compare(answer.addresses, await expectation, report);
  if (problem) report.error = problem;
  return { server: at, name, ...(problem ? { problem } : {}), report };
}

/** Why an answer is not a usable address answer, as a user reads it; undefined when it is. */
export function answerProblem(answer: DnsAnswer): string | undefined {
  switch (answer.rcode) {
    case 'NOERROR':
      return answer.addresses.length > 0 ? undefined : 'no A or AAAA record (NOERROR with an empty answer)';
    case 'NXDOMAIN':
      return 'NXDOMAIN: the name does not exist';
    case 'SERVFAIL':
      return 'SERVFAIL: the server failed to resolve the name';
    case 'REFUSED':
      return 'REFUSED: the server refused the query';
    default:
      return `${answer.rcode}: the server did not answer the query`;
  }
}

/** Records the comparison in `report`; returns the problem when the answer disagrees with the API. */
function compare(addresses: string[], expectation: Expectation, report: Record<string, unknown>): string | undefined {
  if (!expectation) return undefined;
  if ('notCompared' in expectation) {
    report.notCompared = expectation.notCompared;
    return undefined;
  }
  report.expected = expectation.addresses;
  return disagreement(addresses, expectation);
}

/** Every answered address must be one the API lists (dual-stack: an A answer holds the IPv4 one). */
export function disagreement(addresses: string[], expected: { service: string; addresses: string[] }): string | undefined {
  if (addresses.length > 0 && addresses.every((a) => expected.addresses.includes(a))) return undefined;
  return `answered ${addresses.join(', ') || 'nothing'} but ${expected.service} has ${expected.addresses.length === 1 ? 'address' : 'addresses'} ${expected.addresses.join(', ') || '(none)'}`;
}

/** `kubernetes.default.svc.cluster.local` -> default/kubernetes. */
export function serviceOfName(name: string, clusterDomain: string): ServiceRef | undefined {
  const suffix = `.svc.${clusterDomain}`;
  if (!name.endsWith(suffix)) return undefined;
  const parts = name.slice(0, -suffix.length).split('.');
  if (parts.length !== 2) return undefined;
  const [service, namespace] = parts as [string, string];
  return { namespace, name: service };
}

/** Never rejects: an API problem means "not compared" here (the api check reports it). */
async function expectedAddresses(ctx: CheckContext, name: string): Promise<Expectation> {
  const ref = serviceOfName(name, ctx.config.clusterDomain);
  if (!ref || !ctx.cluster) return undefined;
  const service = `Service ${formatServiceRef(ref)}`;
  try {
    const { body } = await ctx.cluster.service(ref, ctx.signal);
    const ips = clusterIPs(body);
    if (ips.length === 0) return { service, notCompared: `${service} is headless or ExternalName: no ClusterIP to compare` };
    return { service, addresses: ips };
  } catch (err) {
    return { service, notCompared: `${service} could not be read: ${errorMessage(err)}` };
  }
}
