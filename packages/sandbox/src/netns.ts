import { join } from 'node:path';
import type { SandboxLayout } from './layout.js';
import { run, runOk } from './proc.js';
import { removeRecordedCgroups } from './runtime/cgroups.js';
import { REAL_NODE_BRIDGE_MAC, REAL_NODE_GATEWAY, REAL_NODE_RANGE, realNodeBridge, removeRealNodeNamespaces } from './real-node.js';
import { cidrsExcept, NETNS_DIR, NFT, podCidr, POD_GATEWAY, removePodNetworks } from './runtime/pod-network.js';

/**
 * Creates the sandbox's network namespace: loopback up, all of 10.0.0.0/8 except the pod CIDR
 * routed to the namespace's loopback (cluster addresses are local there), the pod CIDR
 * unreachable until a pod's /32 route through its veth exists, the pods' gateway address local,
 * forwarding on (pod to pod) but never from a pod towards the host, and a veth pair so the host
 * can reach the apiserver at layout.apiHost. Idempotent: an existing namespace is replaced.
 */
export async function createNetns(layout: SandboxLayout): Promise<void> {
  await deleteNetns(layout);
  const ns = layout.netns;
  try {
    await runOk('ip', ['netns', 'add', ns]);
  } catch (err) {
    throw new Error(
      `cannot create network namespace ${ns}: the sandbox needs root (CAP_NET_ADMIN, CAP_SYS_ADMIN) and iproute2. ${(err as Error).message}`,
      { cause: err },
    );
  }
  await runOk('ip', ['link', 'add', layout.hostVeth, 'type', 'veth', 'peer', 'name', layout.nsVeth]);
  await runOk('ip', ['link', 'set', layout.nsVeth, 'netns', ns]);
  await runOk('ip', ['addr', 'add', `${layout.hostVethIp}/30`, 'dev', layout.hostVeth]);
  await runOk('ip', ['link', 'set', layout.hostVeth, 'up']);
  const hostLink = `${layout.hostVethIp.replace(/\.\d+$/, '.0')}/30`;
  const lines = [
    'link set lo up',
    ...localCidrs(layout).map((cidr) => `route add local ${cidr} dev lo`),
    `route add unreachable ${podCidr(layout)}`,
    // The real nodes' range: their bridge, and a route per node to its pod CIDR (real-node.ts).
    `route add unreachable ${REAL_NODE_RANGE}`,
    `link add ${realNodeBridge(layout.slot)} type bridge`,
    `link set ${realNodeBridge(layout.slot)} address ${REAL_NODE_BRIDGE_MAC}`,
    `addr add ${REAL_NODE_GATEWAY}/24 dev ${realNodeBridge(layout.slot)}`,
    `link set ${realNodeBridge(layout.slot)} up`,
    `route add local ${POD_GATEWAY}/32 dev lo`,
    `addr add ${layout.apiHost}/30 dev ${layout.nsVeth}`,
    `link set ${layout.nsVeth} up`,
    // Only the namespace's own traffic goes to the host ("iif lo" = locally generated); a pod's is refused.
    `rule add to ${hostLink} iif lo lookup main pref 90`,
    `rule add to ${hostLink} prohibit pref 91`,
  ];
  await runOk('ip', ['-n', ns, '-b', '-'], { input: lines.join('\n') + '\n' });
  // Service addresses from the real nodes' bridge are dropped before the sandbox's own translation:
  // a real node's kube-proxy translates them on the node, and without it they lead nowhere.
  await runOk('nsenter', [`--net=${join(NETNS_DIR, ns)}`, '--', NFT, '-f', '-'], {
    input: `table ip knr-real-nodes {\n  chain prerouting {\n    type filter hook prerouting priority -150; policy accept;\n    iifname "${realNodeBridge(layout.slot)}" ip daddr ${layout.serviceCidr} drop\n  }\n}\n`,
  });
  // Per-namespace sysctls: written from inside the namespace.
  await runOk('nsenter', [`--net=${join(NETNS_DIR, ns)}`, '--', 'sh', '-c', 'echo 1 > /proc/sys/net/ipv4/ip_forward && echo 1 > /proc/sys/net/ipv4/conf/all/rp_filter']);
}

/** 10.0.0.0/8 less the pod CIDR and the real nodes' range: the addresses local to the namespace. */
function localCidrs(layout: SandboxLayout): string[] {
  return cidrsExcept('10.0.0.0/8', podCidr(layout)).flatMap((cidr) => (cidrContains(cidr, REAL_NODE_RANGE) ? cidrsExcept(cidr, REAL_NODE_RANGE) : [cidr]));
}

function cidrContains(outer: string, inner: string): boolean {
  try {
    cidrsExcept(outer, inner);
    return true;
  } catch {
    return false;
  }
}

/**
 * Removes the namespace (and with it the veth pair), the slot's pod namespaces and the sandbox's
 * cgroups, killing processes still in them. No error when they do not exist.
 */
export async function deleteNetns(layout: SandboxLayout): Promise<void> {
  await removePodNetworks(layout.slot);
  await removeRealNodeNamespaces(layout.slot);
  await removeRecordedCgroups(layout.dir);
  await run('ip', ['netns', 'del', layout.netns]);
  await run('ip', ['link', 'del', layout.hostVeth]);
}

/**
 * argv prefix that runs a command inside the namespace. nsenter switches the network namespace
 * only: unlike `ip netns exec` it keeps the host's mount namespace, so the process sees
 * /sys/fs/cgroup and the pod namespaces it creates under /run/netns are visible to everyone.
 */
export function inNetns(layout: SandboxLayout, argv: string[]): string[] {
  return ['nsenter', `--net=${join(NETNS_DIR, layout.netns)}`, '--', ...argv];
}
