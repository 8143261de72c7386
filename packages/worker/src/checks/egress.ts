import { errorMessage } from '@kube-node-ready/core';
import { formatHostPort, type HostPort } from '../config.js';
import { lookupAddresses } from '../net/dns-client.js';
import { tcpConnect } from '../net/tcp-connect.js';
import { tlsProbe } from '../net/tls-probe.js';
import { Slowness, verdict, type Check, type CheckContext } from './types.js';

/**
 * egress: for each external name (dns.externalNames), a connection from this pod to every address
 * the name resolves to, on egress.port (default 443), with a TLS handshake naming it (egress.tls).
 * Resolving a name proves nothing about this node's egress: the DNS pods that resolve it run
 * elsewhere. Without external names (the air-gapped default) nothing leaves the cluster and the
 * check passes, saying so in its log line.
 */
export const egressCheck: Check = async (ctx) => {
  const { config, nameservers, signal } = ctx;
  const names = config.dns.externalNames;
  if (names.length === 0) {
    return verdict([], { note: 'no dns.externalNames configured: egress not tested (nothing outside the cluster is contacted)' });
  }
  if ('error' in nameservers) return verdict([`not tested: ${nameservers.error}`]);
  const slow = new Slowness(config, 'egress');
  const problems: string[] = [];
  const unresolved: string[] = [];
  const reports = await Promise.all(
    names.map(async (name) => {
      const resolved = await resolve(ctx, name);
      if ('error' in resolved) {
        unresolved.push(name);
        return { name, error: resolved.error };
      }
      const connections = await Promise.all(
        resolved.addresses.map(async (host) => {
          const target: HostPort = { host, port: config.egress.port };
          const address = formatHostPort(target);
          try {
            if (config.egress.tls) {
              const probe = await tlsProbe(target, name, signal);
              slow.judge(`${name} ${address}`, probe.connectMs + probe.handshakeMs, problems);
              return { address, ok: true, ...probe };
            }
            const { latencyMs } = await tcpConnect(target, signal);
            slow.judge(`${name} ${address}`, latencyMs, problems);
            return { address, ok: true, connectMs: latencyMs };
          } catch (err) {
            const error = errorMessage(err);
            problems.push(`${name} ${address}: ${error}`);
            return { address, ok: false, error };
          }
        }),
      );
      return { name, server: resolved.server, connections };
    }),
  );
  if (unresolved.length > 0) {
    const why = config.enabled.includes('dns') ? 'the dns check says why' : 'no nameserver gave an address';
    problems.unshift(`not tested for ${unresolved.join(', ')}: the name did not resolve (${why})`);
  }
  return verdict(problems, { port: config.egress.port, tls: config.egress.tls, names: reports }, slow.warnings);
};

/** The addresses of `name` from the first nameserver that gives some. */
async function resolve({ nameservers, signal }: CheckContext, name: string): Promise<{ addresses: string[]; server: string } | { error: string }> {
  if ('error' in nameservers) return { error: nameservers.error };
  const failures: string[] = [];
  for (const server of nameservers.servers) {
    try {
      const answer = await lookupAddresses(server, name, signal);
      if (answer.addresses.length > 0) return { addresses: answer.addresses, server: formatHostPort(server) };
      failures.push(`@${formatHostPort(server)}: ${answer.rcode}`);
    } catch (err) {
      failures.push(`@${formatHostPort(server)}: ${errorMessage(err)}`);
    }
  }
  return { error: failures.join('; ') };
}
