import { readFileSync } from 'node:fs';
import { join } from 'node:path';
import { errorMessage } from '@kube-node-ready/core';
import { DEFAULTS } from '../config.js';

/** The pod's network interface: the one its default route leaves by, and its MTU. */
export interface PodLink {
  interface: string;
  mtu: number;
}

export interface LinkPaths {
  procNetRoute: string;
  procNetIpv6Route: string;
  sysClassNet: string;
  procNetIgmp: string;
}

/**
 * The interface of the default route (IPv4 from /proc/net/route, else IPv6 from
 * /proc/net/ipv6_route; the lowest metric wins) and its MTU from /sys/class/net/IF/mtu. /proc/net
 * always shows the reading process's network namespace; /sys shows the namespace of whoever
 * mounted it (a container runtime mounts one per pod, `nsenter --net` does not), so the interface
 * index in sysfs is compared with the one /proc/net/igmp gives, and a mismatch is an error.
 */
export function readPodLink(paths: LinkPaths = DEFAULTS): PodLink | { error: string } {
  const name = defaultRouteInterface(paths);
  if ('error' in name) return name;
  const file = join(paths.sysClassNet, name.interface, 'mtu');
  let text: string;
  try {
    text = readFileSync(file, 'utf8').trim();
  } catch (err) {
    return { error: `cannot read the MTU of ${name.interface} at ${file}: ${errorMessage(err)} (set mtu.mtu)` };
  }
  const mtu = Number(text);
  if (!Number.isInteger(mtu) || mtu < 68) return { error: `${file} holds ${JSON.stringify(text)}, not an MTU (set mtu.mtu)` };
  const own = igmpIndex(paths.procNetIgmp, name.interface);
  const seen = readLines(join(paths.sysClassNet, name.interface, 'ifindex'))[0]?.trim();
  if (own !== undefined && seen !== undefined && Number(seen) !== own) {
    return {
      error: `${paths.sysClassNet} shows another network namespace (${name.interface} is interface ${own} here, ${seen} there): cannot read the pod MTU (set mtu.mtu)`,
    };
  }
  return { interface: name.interface, mtu };
}

/** The index of `name` in /proc/net/igmp ("4\teth0      :     1      V3"), if listed. */
function igmpIndex(file: string, name: string): number | undefined {
  for (const line of readLines(file)) {
    const m = /^(\d+)\s+(\S+)\s*:/.exec(line);
    if (m && m[2] === name) return Number(m[1]);
  }
  return undefined;
}

function defaultRouteInterface(paths: LinkPaths): { interface: string } | { error: string } {
  const v4 = readLines(paths.procNetRoute)
    .slice(1)
    .map((line) => line.trim().split(/\s+/))
    // Iface Destination Gateway Flags RefCnt Use Metric Mask ...
    .filter((f) => f[1] === '00000000' && f[7] === '00000000' && f[0])
    .map((f) => ({ name: f[0] as string, metric: Number(f[6]) }));
  const v6 = readLines(paths.procNetIpv6Route)
    .map((line) => line.trim().split(/\s+/))
    // destination, prefix length, source, source prefix length, next hop, metric (hex), refcnt, use, flags, interface
    .filter((f) => f[0] === '0'.repeat(32) && f[1] === '00' && f[9] && f[9] !== 'lo')
    .map((f) => ({ name: f[9] as string, metric: parseInt(f[5] ?? '0', 16) }));
  const best = [...v4.sort(byMetric), ...v6.sort(byMetric)][0];
  if (!best) return { error: `no default route in ${paths.procNetRoute} or ${paths.procNetIpv6Route}: cannot tell the pod's interface (set mtu.mtu)` };
  return { interface: best.name };
}

function byMetric(a: { metric: number }, b: { metric: number }): number {
  return a.metric - b.metric;
}

function readLines(file: string): string[] {
  try {
    return readFileSync(file, 'utf8').split('\n').filter((l) => l.trim() !== '');
  } catch {
    return [];
  }
}

/**
 * net.ipv4.ip_no_pmtu_disc of the pod's namespace. Node.js cannot set IP_MTU_DISCOVER on a UDP
 * socket; with the Linux default (0) a socket uses IP_PMTUDISC_WANT: a datagram that fits the path
 * MTU the kernel knows leaves with don't-fragment set, and an ICMP "fragmentation needed" answer
 * comes back to a connected socket as EMSGSIZE. Undefined when it cannot be read (not Linux).
 */
export function readNoPmtuDisc(file: string = DEFAULTS.noPmtuDisc): number | undefined {
  try {
    const value = Number(readFileSync(file, 'utf8').trim());
    return Number.isInteger(value) ? value : undefined;
  } catch {
    return undefined;
  }
}
