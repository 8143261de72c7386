import type { k8s } from './kube.js';

/** Label that marks a Node as played by the sandbox's simulated kubelet. */
export const SIMULATED_LABEL = 'sandbox.kube-node-ready.io/simulated';
/**
 * Per-node fault knobs, read by the simulated kubelet from the Node's annotations (they can be
 * changed at any time; new pods see the new value):
 *   never-start: "true"   pods bound to the node never start (stay Pending / ContainerCreating)
 *   start-delay: "5s"     containers start after this delay
 *   dns: ok | dead | blackhole | lying | <IPv4>   the nameserver in the pods' resolv.conf
 *   not-ready: "true"     the kubelet reports Ready=False (CNI not initialised)
 */
export const FAULT = {
  neverStart: 'sandbox.kube-node-ready.io/never-start',
  startDelay: 'sandbox.kube-node-ready.io/start-delay',
  dns: 'sandbox.kube-node-ready.io/dns',
  notReady: 'sandbox.kube-node-ready.io/not-ready',
  terminationMessage: 'sandbox.kube-node-ready.io/termination-message',
} as const;

export interface NodeSpecOptions {
  name: string;
  labels?: Record<string, string>;
  annotations?: Record<string, string>;
  taints?: k8s.V1Taint[];
  providerID?: string;
  cpu?: string;
  memory?: string;
  pods?: string;
  faults?: { neverStart?: boolean; startDelay?: string; dns?: string; notReady?: boolean; terminationMessage?: string };
}

/** The Node object a kubelet registers (with its status), for the simulated kubelet to play. */
export function simulatedNode(o: NodeSpecOptions): k8s.V1Node {
  const annotations: Record<string, string> = { ...(o.annotations ?? {}) };
  if (o.faults?.neverStart) annotations[FAULT.neverStart] = 'true';
  if (o.faults?.startDelay) annotations[FAULT.startDelay] = o.faults.startDelay;
  if (o.faults?.dns) annotations[FAULT.dns] = o.faults.dns;
  if (o.faults?.notReady) annotations[FAULT.notReady] = 'true';
  if (o.faults?.terminationMessage) annotations[FAULT.terminationMessage] = o.faults.terminationMessage;
  const now = new Date();
  const capacity = { cpu: o.cpu ?? '8', memory: o.memory ?? '32Gi', pods: o.pods ?? '110', 'ephemeral-storage': '100Gi' };
  return {
    apiVersion: 'v1',
    kind: 'Node',
    metadata: {
      name: o.name,
      labels: {
        'kubernetes.io/hostname': o.name.slice(0, 63).replace(/[^a-zA-Z0-9]+$/, ''),
        'kubernetes.io/os': 'linux',
        'kubernetes.io/arch': 'amd64',
        [SIMULATED_LABEL]: 'true',
        ...(o.labels ?? {}),
      },
      annotations,
    },
    spec: { taints: o.taints ?? [], providerID: o.providerID ?? `sandbox:///${o.name}` },
    status: {
      capacity,
      allocatable: capacity,
      conditions: [
        o.faults?.notReady
          ? { type: 'Ready', status: 'False', reason: 'KubeletNotReady', message: 'container runtime network not ready: NetworkReady=false reason:NetworkPluginNotReady message:Network plugin returns error: cni plugin not initialized', lastHeartbeatTime: now, lastTransitionTime: now }
          : { type: 'Ready', status: 'True', reason: 'KubeletReady', message: 'kubelet is posting ready status', lastHeartbeatTime: now, lastTransitionTime: now },
      ],
      addresses: [{ type: 'Hostname', address: o.name }],
      nodeInfo: {
        architecture: 'amd64',
        bootID: '',
        containerRuntimeVersion: 'sandbox://0.1.0',
        kernelVersion: '',
        kubeProxyVersion: '',
        kubeletVersion: 'v1.36.3-sandbox',
        machineID: '',
        operatingSystem: 'linux',
        osImage: 'kube-node-ready sandbox',
        systemUUID: '',
      },
    },
  };
}
