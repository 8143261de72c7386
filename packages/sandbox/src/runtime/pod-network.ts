import { existsSync, mkdirSync, readdirSync, readlinkSync, rmSync, statSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import type { SandboxLayout } from '../layout.js';
import { run } from '../proc.js';
import { IpBatcher } from './ip.js';

/** Node annotation: the MTU of the pod network interfaces of pods started on the node (e.g. "1400"). */
export const POD_MTU_ANNOTATION = 'sandbox.kube-node-ready.io/pod-mtu';

/** Where `ip netns` keeps named network namespaces. */
export const NETNS_DIR = '/run/netns';

/**
 * Every pod's default gateway: a local address of the sandbox namespace (as Calico's 169.254.1.1),
 * so a pod resolves one neighbour and the sandbox namespace routes everything it sends: an
 * unallocated pod IP gets "no route to host" at once instead of an ARP timeout.
 */
export const POD_GATEWAY = '169.254.1.1';

/** The nft binary (Debian's nftables puts it in /usr/sbin, which a non-login PATH may lack). */
export const NFT = existsSync('/usr/sbin/nft') ? '/usr/sbin/nft' : 'nft';

/**
 * A node's broken path to the cluster DNS address, as on a node whose kube-proxy rules for it are
 * missing or wrong: its pods' DNS traffic to `clusterDnsIp` (UDP and TCP port 53) is sent to `to`
 * instead (a fault server that refuses, never answers, or lies). A DNAT in the pod's own namespace,
 * so only that pod sees it and it goes with the pod; the pod still talks to the cluster DNS
 * address, and its failure names that address, as on a real cluster.
 */
export interface DnsPathFault {
  clusterDnsIp: string;
  to: string;
}

/** The pod namespace's nftables document for `fault`. */
export function dnsFaultRules(fault: DnsPathFault): string {
  const rule = `ip daddr ${fault.clusterDnsIp} meta l4proto { tcp, udp } th dport 53 dnat to ${fault.to}`;
  return `table ip knr-node-fault {\n  chain dns { type nat hook output priority -100; policy accept; ${rule}; }\n}\n`;
}

/**
 * Batches of pod set-ups run at once, and their size in lines (4-5 a pod): two batches of about a
 * dozen pods each keep both cores busy in a burst, and a pod waits for a dozen `netns exec`
 * children at most, not for the whole burst's.
 */
const POD_BATCHES = 2;
const POD_BATCH_LINES = 60;

/** A pod's network: its namespace and the veth pair into the sandbox namespace. */
export interface PodNetns {
  /** Namespace name under /run/netns: `knr<slot>-p<n>`. */
  name: string;
  path: string;
  /** The veth end in the sandbox namespace (`knr<slot>p<n>`, at most 15 characters); the pod's end is `eth0`. */
  hostVeth: string;
  ip: string;
  mtu?: number;
}

/** The pod CIDR (`10.244.0.0/14`) the kubelet hands pod IPs out of. */
export function podCidr(layout: SandboxLayout): string {
  const [a, b] = layout.podIpBase;
  return `${a}.${b}.0.0/14`;
}

/** Prefix of the names of the slot's pod namespaces (unique per sandbox slot). */
export function podNetnsPrefix(slot: number): string {
  return `knr${slot}-p`;
}

/**
 * The sandbox namespace's pod network: one network namespace per pod, joined to the sandbox
 * namespace by a veth pair. In the pod: `lo` up, the pod IP as a /32 on `eth0`, default route via
 * POD_GATEWAY. In the sandbox namespace: a /32 route to the pod IP through the veth, with the
 * node's address as source, so the service proxy, probes and the kubelet reach the pod from a
 * node address. Runs in the sandbox daemon, which lives in the sandbox namespace.
 *
 * Both halves of every pod starting at once go in one `ip -batch` process: the pod's half as a
 * `netns exec <pod netns> ip -batch <file>` line, which `ip` runs in a child of its own (a small
 * process, cheap to fork). Each process the daemon spawns itself blocks its event loop while it
 * forks (the longer, the more memory the daemon maps), so one spawn for a burst instead of one
 * per pod is what lets a burst start fast.
 */
export class PodNetwork {
  private readonly setUps = new IpBatcher([], POD_BATCH_LINES, POD_BATCHES);
  /** Removals wait for nobody: one batch at a time, so a burst's removals share a few processes. */
  private readonly removals = new IpBatcher();
  /** Where the pod-side batch files (and nft rules) wait for their `ip -batch` run. */
  private readonly scratch: string;

  constructor(
    private readonly layout: SandboxLayout,
    /** The nsenter binary (resolved once: a container's PATH may not have it). */
    private readonly nsenter = 'nsenter',
  ) {
    this.scratch = join(layout.dir, 'pod-network');
    mkdirSync(this.scratch, { recursive: true });
  }

  /**
   * Creates the pod's namespace and veth pair for a pod IP from the pod CIDR. `nodeIP` (a local
   * address of the sandbox namespace, default the advertise address) is the source of traffic
   * from the sandbox namespace to the pod, as a node's own address is on a real node. `dnsFault`
   * breaks the pod's path to the cluster DNS address (a node fault).
   */
  async create(ip: string, opts: { mtu?: number; nodeIP?: string; dnsFault?: DnsPathFault } = {}): Promise<PodNetns> {
    const mtu = opts.mtu;
    const n = podIndex(this.layout, ip);
    const slot = this.layout.slot;
    const ns: PodNetns = { name: `${podNetnsPrefix(slot)}${n}`, path: '', hostVeth: `knr${slot}p${n}`, ip, mtu };
    ns.path = join(NETNS_DIR, ns.name);
    const mtuArg = mtu ? ` mtu ${mtu}` : '';
    const podSide = join(this.scratch, `${ns.name}.ip`);
    const rules = join(this.scratch, `${ns.name}.nft`);
    writeFileSync(podSide, ['link set lo up', `addr add ${ip}/32 dev eth0`, 'link set eth0 up', `route add default via ${POD_GATEWAY} dev eth0 onlink`].join('\n') + '\n');
    if (opts.dnsFault) writeFileSync(rules, dnsFaultRules(opts.dnsFault));
    try {
      await this.setUps.run([
        `netns add ${ns.name}`,
        `link add ${ns.hostVeth} up${mtuArg} type veth peer name eth0 netns ${ns.name}${mtuArg}`,
        `route add ${ip}/32 dev ${ns.hostVeth} src ${opts.nodeIP ?? this.layout.advertiseAddress}`,
        `netns exec ${ns.name} ip -force -batch ${podSide}`,
        ...(opts.dnsFault ? [`netns exec ${ns.name} ${NFT} -f ${rules}`] : []),
      ]);
    } catch (err) {
      await this.remove(ns).catch(() => undefined);
      throw new Error(`pod network ${ns.name} (${ip}): ${(err as Error).message}`, { cause: err });
    } finally {
      rmSync(podSide, { force: true });
      rmSync(rules, { force: true });
    }
    return ns;
  }

  /**
   * Removes the pod's namespace. Its veth pair goes with it (the kernel deletes both ends when the
   * namespace is gone), and with the veth the route to the pod IP, which then fails fast again.
   */
  remove(ns: PodNetns): Promise<void> {
    return this.removals.run([`netns del ${ns.name}`]);
  }

  /** argv that runs a command in the pod's network namespace. */
  execArgv(ns: PodNetns, argv: string[]): string[] {
    return [this.nsenter, `--net=${ns.path}`, '--', ...argv];
  }
}

/** The pod's number within the pod CIDR (0 .. 2^18-1): names its namespace and veth. */
export function podIndex(layout: SandboxLayout, ip: string): number {
  const [a, b] = layout.podIpBase;
  const o = ip.split('.').map(Number);
  if (o.length !== 4 || o[0] !== a || o[1]! < b || o[1]! > b + 3) throw new Error(`${ip} is not in the pod CIDR ${podCidr(layout)}`);
  return ((o[1]! - b) << 16) | (o[2]! << 8) | o[3]!;
}

/**
 * Removes every pod namespace of the slot, after killing the processes still in them (a crashed
 * daemon's pods). Used when the sandbox stops and before it starts.
 */
export async function removePodNetworks(slot: number): Promise<void> {
  await removeNamespaces(podNetnsPrefix(slot));
}

/** Removes every network namespace named `prefix` and a number, after killing the processes still in them. */
export async function removeNamespaces(prefix: string): Promise<void> {
  let names: string[];
  try {
    names = readdirSync(NETNS_DIR).filter((n) => n.startsWith(prefix) && /^\d+$/.test(n.slice(prefix.length)));
  } catch {
    return;
  }
  if (!names.length) return;
  killProcessesInNamespaces(names.map((n) => join(NETNS_DIR, n)));
  await run('ip', ['-force', '-b', '-'], { input: names.map((n) => `netns del ${n}`).join('\n') + '\n' });
}

/** SIGKILLs every process whose network namespace is one of `paths` (what `ip netns pids` does, in one pass). */
function killProcessesInNamespaces(paths: string[]): void {
  const inodes = new Set<string>();
  for (const p of paths) {
    try {
      inodes.add(`net:[${statSync(p).ino}]`);
    } catch {
      /* not a mounted namespace (left over from a crash): nothing runs in it */
    }
  }
  if (!inodes.size) return;
  for (const pid of readdirSync('/proc')) {
    if (!/^\d+$/.test(pid)) continue;
    try {
      if (inodes.has(readlinkSync(`/proc/${pid}/ns/net`))) process.kill(Number(pid), 'SIGKILL');
    } catch {
      /* gone, or not ours to see */
    }
  }
}

/**
 * `outer` without `inner` as a list of CIDRs (inner must lie inside outer): the sandbox namespace
 * keeps all of 10.0.0.0/8 local except the pod CIDR, which is routed.
 */
export function cidrsExcept(outer: string, inner: string): string[] {
  const [oAddr, oLen] = parseCidr(outer);
  const [iAddr, iLen] = parseCidr(inner);
  if (iLen < oLen || (iAddr & prefixMask(oLen)) >>> 0 !== oAddr) throw new Error(`${inner} is not inside ${outer}`);
  const out: string[] = [];
  for (let len = oLen + 1; len <= iLen; len++) {
    // The sibling of inner's ancestor at this length: same prefix, last bit flipped.
    const ancestor = (iAddr & prefixMask(len)) >>> 0;
    const sibling = (ancestor ^ (1 << (32 - len))) >>> 0;
    out.push(`${formatIp(sibling)}/${len}`);
  }
  return out;
}

function parseCidr(cidr: string): [number, number] {
  const [ip, len] = cidr.split('/');
  const n = ip!.split('.').reduce((acc, o) => (acc << 8) + Number(o), 0) >>> 0;
  const l = Number(len);
  return [(n & prefixMask(l)) >>> 0, l];
}

function prefixMask(len: number): number {
  return len === 0 ? 0 : (0xffffffff << (32 - len)) >>> 0;
}

function formatIp(n: number): string {
  return [n >>> 24, (n >>> 16) & 255, (n >>> 8) & 255, n & 255].join('.');
}
