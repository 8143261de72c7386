import { join, resolve } from 'node:path';

/**
 * Where a sandbox lives and which addresses it uses. Everything runs inside a network
 * namespace the sandbox creates (`knr-sandbox-<slot>`): there all of 10.0.0.0/8 but the pod
 * CIDR is routed to the namespace's own loopback, so the apiserver, Service ClusterIPs, node and
 * DNS servers have ordinary cluster addresses (the apiserver rejects loopback addresses in
 * EndpointSlices) while no packet ever leaves the namespace; pod IPs live in per-pod namespaces
 * behind veth pairs (runtime/pod-network.ts). The host reaches the apiserver only through a veth
 * pair whose far end (169.254.<100+slot>.2) lives in that namespace.
 */
export interface SandboxLayout {
  slot: number;
  dir: string;
  netns: string;
  hostVeth: string;
  nsVeth: string;
  hostVethIp: string;
  /** The apiserver's address as seen from the host (and from inside the namespace). */
  apiHost: string;
  apiPort: number;
  /** The address the apiserver advertises (kubernetes EndpointSlice); local inside the namespace. */
  advertiseAddress: string;
  serviceCidr: string;
  kubernetesServiceIp: string;
  clusterDnsIp: string;
  /** DNS "pods" behind the kube-dns Service (EndpointSlice addresses). */
  dnsPodIps: string[];
  /** Fault DNS servers a node can be pointed at. */
  deadDnsIp: string;
  blackholeDnsIp: string;
  lyingDnsIp: string;
  /** The address a lying DNS server answers with. */
  lyingAnswer: string;
  /** Pod IPs are handed out from here (a /14 inside the namespace). */
  podIpBase: [number, number];
  clusterDomain: string;
  etcdClientPort: number;
  etcdPeerPort: number;
  schedulerPort: number;
  controllerManagerPort: number;
  karpenterMetricsPort: number;
  karpenterHealthPort: number;
  paths: {
    kubeconfig: string;
    state: string;
    certs: string;
    logs: string;
    pods: string;
    etcdData: string;
    pidFile: string;
  };
}

export function sandboxLayout(dir: string, slot = 0): SandboxLayout {
  if (!Number.isInteger(slot) || slot < 0 || slot > 99) throw new Error(`sandbox slot must be 0..99, got ${slot}`);
  const abs = resolve(dir);
  return {
    slot,
    dir: abs,
    netns: `knr-sandbox-${slot}`,
    hostVeth: `knr${slot}h`,
    nsVeth: `knr${slot}n`,
    hostVethIp: `169.254.${100 + slot}.1`,
    apiHost: `169.254.${100 + slot}.2`,
    apiPort: 6443,
    advertiseAddress: '10.0.0.1',
    serviceCidr: '10.96.0.0/16',
    kubernetesServiceIp: '10.96.0.1',
    clusterDnsIp: '10.96.0.10',
    dnsPodIps: ['10.53.1.1', '10.53.1.2'],
    deadDnsIp: '10.53.0.1',
    blackholeDnsIp: '10.53.0.2',
    lyingDnsIp: '10.53.0.3',
    lyingAnswer: '10.66.66.66',
    podIpBase: [10, 244],
    clusterDomain: 'cluster.local',
    etcdClientPort: 2379,
    etcdPeerPort: 2380,
    schedulerPort: 10259,
    controllerManagerPort: 10257,
    // Karpenter's defaults (8080/8081, all interfaces) are ports workloads use.
    karpenterMetricsPort: 18080,
    karpenterHealthPort: 18081,
    paths: {
      kubeconfig: join(abs, 'kubeconfig'),
      state: join(abs, 'state.json'),
      certs: join(abs, 'certs'),
      logs: join(abs, 'logs'),
      pods: join(abs, 'pods'),
      etcdData: join(abs, 'etcd'),
      pidFile: join(abs, 'daemon.pid'),
    },
  };
}

/** Written by the daemon once everything is ready; read by tests and the CLI. */
export interface SandboxState {
  ready: boolean;
  pid: number;
  slot: number;
  dir: string;
  netns: string;
  kubeconfig: string;
  apiServer: string;
  kubernetesVersion: string;
  startedAt: string;
  binDir: string;
}
