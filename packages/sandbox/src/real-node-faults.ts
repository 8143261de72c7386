// Faults of a real node's own components, each put in place and taken away the way production
// breaks and repairs them: a file removed, a process stopped, a packet filter, a link's MTU.
import { readFileSync, rmSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import type { Logger } from '@kube-node-ready/core';
import { run, runOk, stopProcess } from './proc.js';
import { CNI_CONFIG, type RunningNode } from './real-node.js';
import { NETNS_DIR, NFT } from './runtime/pod-network.js';

/**
 * The faults, with what breaks:
 *   cni-config-missing  the node's CNI configuration directory is empty: containerd reports the
 *                       network not ready ("cni plugin not initialized"), the kubelet NotReady
 *                       (NetworkPluginNotReady), and no pod sandbox can be made.
 *   kube-proxy-stopped  the node's kube-proxy is stopped and its nftables rules are gone: Service
 *                       ClusterIPs do not connect from the node's pods (the sandbox drops them,
 *                       as a network without a route to them would), pod and node addresses do.
 *   kubelet-stopped     the node's kubelet is killed (its pods keep running under containerd): the
 *                       node's Lease is no longer renewed and the node-lifecycle controller marks
 *                       it NotReady (Unknown) after its grace period; nothing new starts there.
 *   dns-blocked         the node drops its pods' DNS traffic (port 53, UDP and TCP) on its way out,
 *                       after kube-proxy's translation: nothing reaches the cluster DNS from them.
 *   dns-large-dropped   the node drops UDP DNS answers to its pods larger than 1200 bytes of IP
 *                       packet; small answers and TCP pass (a path MTU blackhole for large answers).
 *   egress-blocked      the node drops what its pods send outside the sandbox's cluster addresses
 *                       (10.0.0.0/8): pods, Services, nodes and the apiserver still answer.
 *   pod-mtu BYTES       the node's link carries packets of at most BYTES while its pods keep the
 *                       CNI's 1500: larger packets to and from its pods are lost (an overlay whose
 *                       MTU is larger than the path carries).
 */
export const REAL_NODE_FAULTS = ['cni-config-missing', 'kube-proxy-stopped', 'kubelet-stopped', 'dns-blocked', 'dns-large-dropped', 'egress-blocked', 'pod-mtu'] as const;
export type RealNodeFault = (typeof REAL_NODE_FAULTS)[number];

/** Faults that take a value: its name for messages and how to read it. */
const VALUES: Partial<Record<RealNodeFault, { name: string; parse(text: string): string }>> = {
  'pod-mtu': {
    name: 'BYTES',
    parse(text) {
      if (!/^\d+$/.test(text) || Number(text) < 576 || Number(text) > 1500) throw new Error(`pod-mtu ${JSON.stringify(text)}: expected BYTES between 576 and 1500 (the pods keep 1500)`);
      return text;
    },
  },
};

/** The largest UDP DNS answer (bytes of IP packet) that reaches a node with dns-large-dropped. */
export const LARGE_DNS_ANSWER_LIMIT = 1200;

export function parseRealNodeFault(text: string): RealNodeFault {
  if (!(REAL_NODE_FAULTS as readonly string[]).includes(text)) throw new Error(`unknown real-node fault ${JSON.stringify(text)}: known are ${REAL_NODE_FAULTS.join(', ')}`);
  return text as RealNodeFault;
}

/** The fault's value, checked: required for a fault that takes one (pod-mtu), refused otherwise. */
export function parseFaultValue(fault: RealNodeFault, value: string | undefined): string | undefined {
  const spec = VALUES[fault];
  if (!spec) {
    if (value !== undefined && value !== '') throw new Error(`${fault} takes no value (got ${JSON.stringify(value)})`);
    return undefined;
  }
  if (value === undefined || value === '') throw new Error(`${fault} needs a value: ${fault} ${spec.name}`);
  return spec.parse(value);
}

/** `pod-mtu BYTES` for help texts. */
export function faultUsage(fault: RealNodeFault): string {
  const spec = VALUES[fault];
  return spec ? `${fault} ${spec.name}` : fault;
}

/** Breaks (on) or repairs (off) one of the node's components. Idempotent either way. */
export async function setRealNodeFault(
  node: RunningNode,
  fault: RealNodeFault,
  on: boolean,
  rawValue: string | undefined,
  log: Logger,
): Promise<{ node: string; fault: RealNodeFault; on: boolean; value?: string }> {
  const value = on ? parseFaultValue(fault, rawValue) : undefined;
  const inNode = (argv: string[], input?: string) => runOk('nsenter', [`--net=${join(NETNS_DIR, node.netns)}`, '--', ...argv], input === undefined ? {} : { input });
  /** One nftables table of the node's own per fault, removed whole to repair. */
  const filter = async (table: string, rule: string | undefined) => {
    await run('nsenter', [`--net=${join(NETNS_DIR, node.netns)}`, '--', NFT, 'delete', 'table', 'inet', table]);
    if (rule) await inNode([NFT, '-f', '-'], `table inet ${table} {\n  chain forward {\n    type filter hook forward priority 0; policy accept;\n    ${rule}\n  }\n}\n`);
  };
  switch (fault) {
    case 'cni-config-missing': {
      // containerd watches its CNI configuration directory and reloads when a file there is
      // written or removed (a file renamed into it went unnoticed by containerd 1.6), as a CNI
      // agent's writes are seen.
      const live = join(node.dir, 'cni', 'net.d', CNI_CONFIG);
      if (on) rmSync(live, { force: true });
      else writeFileSync(live, readFileSync(join(node.dir, 'cni', 'held', CNI_CONFIG)));
      break;
    }
    case 'kube-proxy-stopped':
      if (on && node.kubeProxy) {
        await stopProcess(node.kubeProxy);
        node.kubeProxy = undefined;
        // Its rules go with it: the node's Service translation is gone, as on a node whose kube-proxy never ran.
        for (const family of ['ip', 'ip6']) await run('nsenter', [`--net=${join(NETNS_DIR, node.netns)}`, '--', NFT, 'delete', 'table', family, 'kube-proxy']);
      }
      if (!on && !node.kubeProxy && node.faults.has(fault)) node.kubeProxy = node.startKubeProxy();
      break;
    case 'kubelet-stopped':
      if (on && node.kubelet) {
        // Killed, as a crashed or OOM-killed kubelet ends: nothing is cleaned up, the pods run on.
        // Taken off the node first, so that its supervisor does not start it again.
        const kubelet = node.kubelet;
        node.kubelet = undefined;
        kubelet.kill('SIGKILL');
        await stopProcess(kubelet, 5_000);
      }
      if (!on && !node.kubelet && node.faults.has(fault)) node.kubelet = node.startKubelet();
      break;
    case 'dns-blocked':
      await filter('knr-fault-dns', on ? 'meta l4proto { tcp, udp } th dport 53 drop' : undefined);
      break;
    case 'dns-large-dropped':
      // Toward the node's pods (out through its CNI bridge): answers from port 53 over UDP.
      await filter('knr-fault-dns-large', on ? `oifname "cni0" udp sport 53 meta length > ${LARGE_DNS_ANSWER_LIMIT} drop` : undefined);
      break;
    case 'egress-blocked':
      await filter('knr-fault-egress', on ? 'iifname "cni0" ip daddr != 10.0.0.0/8 drop' : undefined);
      break;
    case 'pod-mtu':
      // The node's end of its link only: a veth drops a frame larger than the MTU of the end that
      // receives it, so what the sandbox sends it is cut to BYTES too, and the node answers its pods'
      // too-large packets with "fragmentation needed". The sandbox's end stays at 1500: it is a port
      // of the bridge every real node shares, and a bridge takes the smallest MTU of its ports (the
      // fault would shrink every node's path).
      await inNode(['ip', 'link', 'set', 'eth0', 'mtu', value ?? '1500']);
      break;
  }
  if (on) node.faults.set(fault, value);
  else node.faults.delete(fault);
  log.info({ node: node.name, fault, on, ...(value !== undefined ? { value } : {}) }, 'real node fault');
  return { node: node.name, fault, on, ...(value !== undefined ? { value } : {}) };
}

/** `FAULT` or `FAULT=VALUE` (`pod-mtu=1400`), as add-nodes --fault and the control API take it. */
export function parseFaultSpec(text: string): { fault: RealNodeFault; value?: string } {
  const eq = text.indexOf('=');
  const fault = parseRealNodeFault(eq < 0 ? text : text.slice(0, eq));
  const value = parseFaultValue(fault, eq < 0 ? undefined : text.slice(eq + 1));
  return value === undefined ? { fault } : { fault, value };
}
