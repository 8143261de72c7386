import { readFileSync } from 'node:fs';
import { isIP } from 'node:net';
import { errorMessage } from '@kube-node-ready/core';
import { DEFAULTS, type HostPort } from './config.js';
import type { Nameservers } from './checks/types.js';

/** The `nameserver` lines of a resolv.conf (port 53; an IPv6 zone suffix is kept). */
export function parseResolvConf(content: string): HostPort[] {
  const servers: HostPort[] = [];
  for (const line of content.split('\n')) {
    const [keyword, address] = line.replace(/[#;].*$/, '').trim().split(/\s+/);
    if (keyword !== 'nameserver' || !address) continue;
    if (isIP(address.split('%')[0] ?? '')) servers.push({ host: address, port: DEFAULTS.dnsPort });
  }
  return servers;
}

/** Configured servers win; otherwise the pod's resolv.conf (the cluster DNS the kubelet wrote). */
export function resolveNameservers(configured: HostPort[], resolvConfPath: string): Nameservers {
  if (configured.length > 0) return { servers: configured, source: 'configuration' };
  let content: string;
  try {
    content = readFileSync(resolvConfPath, 'utf8');
  } catch (err) {
    return { error: `cannot read ${resolvConfPath}: ${errorMessage(err)} (set --dns-server to test a nameserver explicitly)` };
  }
  const servers = parseResolvConf(content);
  if (servers.length === 0) return { error: `no nameserver line in ${resolvConfPath} (set --dns-server to test a nameserver explicitly)` };
  return { servers, source: resolvConfPath };
}
