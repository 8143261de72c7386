import { createHash } from 'node:crypto';
import { BRING_UP } from './bring-up.js';
import type { k8s } from './kube.js';

/** Label that marks a Node as played by the sandbox's simulated kubelet. */
export const SIMULATED_LABEL = 'sandbox.kube-node-ready.io/simulated';
/**
 * Per-node fault knobs, read by the simulated kubelet from the Node's annotations (they can be
 * changed at any time; new pods see the new value):
 *   never-start: "true"   pods bound to the node never start (stay Pending / ContainerCreating; the
 *                         sandbox is created, the containers are not: a hanging image pull)
 *   start-delay: "5s"     containers start after this delay
 *   dns: ok | dead | blackhole | lying | <IPv4>   the pods' DNS traffic to the cluster DNS address
 *                         goes to the fault server of that name (their resolv.conf names the
 *                         cluster DNS address, as on every node); <IPv4>: that nameserver instead
 *   not-ready: "true"     the kubelet reports Ready=False (CNI not initialised)
 */
export const FAULT = {
  neverStart: 'sandbox.kube-node-ready.io/never-start',
  startDelay: 'sandbox.kube-node-ready.io/start-delay',
  dns: 'sandbox.kube-node-ready.io/dns',
  notReady: 'sandbox.kube-node-ready.io/not-ready',
  terminationMessage: 'sandbox.kube-node-ready.io/termination-message',
} as const;

export const READY_CONDITION = { type: 'Ready', status: 'True', reason: 'KubeletReady', message: 'kubelet is posting ready status' } as const;
export const NOT_READY_CONDITION = {
  type: 'Ready',
  status: 'False',
  reason: 'KubeletNotReady',
  message: 'container runtime network not ready: NetworkReady=false reason:NetworkPluginNotReady message:Network plugin returns error: cni plugin not initialized',
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
  /** Bring-up as on a real cloud (see BRING_UP in bring-up.ts); none by default. */
  bringUp?: { preset?: 'realistic'; notReadyFor?: string; cniDelay?: string; imagePullDelay?: string; removeTaintsAfter?: string };
}

/** The Node object a kubelet registers (with its status), for the simulated kubelet to play. */
export function simulatedNode(o: NodeSpecOptions): k8s.V1Node {
  const annotations: Record<string, string> = { ...(o.annotations ?? {}) };
  if (o.faults?.neverStart) annotations[FAULT.neverStart] = 'true';
  if (o.faults?.startDelay) annotations[FAULT.startDelay] = o.faults.startDelay;
  if (o.faults?.dns) annotations[FAULT.dns] = o.faults.dns;
  if (o.faults?.notReady) annotations[FAULT.notReady] = 'true';
  if (o.faults?.terminationMessage) annotations[FAULT.terminationMessage] = o.faults.terminationMessage;
  for (const [knob, value] of Object.entries(o.bringUp ?? {})) if (value) annotations[BRING_UP[knob as keyof typeof BRING_UP]] = value;
  const zone = ZONES[hash(o.name) % ZONES.length]!;
  const capacity = { cpu: o.cpu ?? '8', memory: o.memory ?? '32Gi', pods: o.pods ?? '110', 'ephemeral-storage': '100Gi' };
  // As a kubelet registers it: labels, capacity, no conditions yet. The simulated kubelet (NodeAgent)
  // then posts the rest of the status (addresses, conditions, images, the kubelet endpoint).
  return {
    apiVersion: 'v1',
    kind: 'Node',
    metadata: {
      name: o.name,
      labels: {
        'kubernetes.io/hostname': o.name.slice(0, 63).replace(/[^a-zA-Z0-9]+$/, ''),
        'kubernetes.io/os': 'linux',
        'kubernetes.io/arch': 'amd64',
        // What EKS and a cloud provider put on a node, so Node objects have a real one's size.
        'beta.kubernetes.io/arch': 'amd64',
        'beta.kubernetes.io/os': 'linux',
        'beta.kubernetes.io/instance-type': 'm6i.2xlarge',
        'node.kubernetes.io/instance-type': 'm6i.2xlarge',
        'failure-domain.beta.kubernetes.io/region': 'us-west-2',
        'failure-domain.beta.kubernetes.io/zone': zone,
        'topology.kubernetes.io/region': 'us-west-2',
        'topology.kubernetes.io/zone': zone,
        'topology.k8s.aws/zone-id': `usw2-az${ZONES.indexOf(zone) + 1}`,
        'k8s.io/cloud-provider-aws': '4b8a6c1e0f9d2a7c3e5b8d1f0a2c4e6b',
        'eks.amazonaws.com/capacityType': 'ON_DEMAND',
        'eks.amazonaws.com/nodegroup': 'sandbox',
        'eks.amazonaws.com/nodegroup-image': 'ami-0a1b2c3d4e5f67890',
        'eks.amazonaws.com/sourceLaunchTemplateId': 'lt-0123456789abcdef0',
        'eks.amazonaws.com/sourceLaunchTemplateVersion': '1',
        [SIMULATED_LABEL]: 'true',
        ...(o.labels ?? {}),
      },
      annotations: {
        'alpha.kubernetes.io/provided-node-ip': '10.1.0.0',
        'node.alpha.kubernetes.io/ttl': '0',
        'volumes.kubernetes.io/controller-managed-attach-detach': 'true',
        ...annotations,
      },
    },
    spec: { taints: o.taints ?? [], providerID: o.providerID ?? `sandbox:///${o.name}` },
    status: { capacity, allocatable: capacity },
  };
}

const ZONES = ['us-west-2a', 'us-west-2b', 'us-west-2c'];

function hash(s: string): number {
  let h = 2166136261;
  for (let i = 0; i < s.length; i++) h = Math.imul(h ^ s.charCodeAt(i), 16777619) >>> 0;
  return h;
}

/** The images a node of a real EKS cluster has pulled after a while: system agents, sidecars, common workloads. */
const NODE_IMAGES: Array<[string, string, number]> = (() => {
  const ecr = '602401143452.dkr.ecr.us-west-2.amazonaws.com';
  const names = [
    `${ecr}/amazon-k8s-cni:v1.19.2-eksbuild.1`, `${ecr}/amazon-k8s-cni-init:v1.19.2-eksbuild.1`, `${ecr}/amazon/aws-network-policy-agent:v1.1.6-eksbuild.1`,
    `${ecr}/eks/kube-proxy:v1.36.3-minimal-eksbuild.2`, `${ecr}/eks/coredns:v1.12.1-eksbuild.2`, `${ecr}/eks/pause:3.10`,
    `${ecr}/eks/aws-ebs-csi-driver:v1.45.0`, `${ecr}/eks/csi-node-driver-registrar:v2.14.0-eks-1-33-4`, `${ecr}/eks/livenessprobe:v2.16.0-eks-1-33-4`,
    `${ecr}/eks/eks-pod-identity-agent:v0.1.29`, 'public.ecr.aws/karpenter/controller:1.15.0', 'public.ecr.aws/aws-observability/aws-for-fluent-bit:2.34.0',
    'quay.io/cilium/cilium:v1.18.2', 'quay.io/cilium/operator-generic:v1.18.2', 'quay.io/prometheus/node-exporter:v1.9.1',
    'quay.io/prometheus-operator/prometheus-config-reloader:v0.85.0', 'registry.k8s.io/metrics-server/metrics-server:v0.8.0', 'registry.k8s.io/kube-state-metrics/kube-state-metrics:v2.16.0',
    'registry.k8s.io/ingress-nginx/controller:v1.13.1', 'registry.k8s.io/sig-storage/csi-provisioner:v5.3.0', 'registry.k8s.io/sig-storage/csi-attacher:v4.9.0',
    'registry.k8s.io/sig-storage/csi-snapshotter:v8.3.0', 'registry.k8s.io/sig-storage/csi-resizer:v1.14.0', 'registry.k8s.io/node-problem-detector/node-problem-detector:v0.8.21',
    'docker.io/grafana/promtail:3.5.3', 'docker.io/grafana/alloy:v1.10.2', 'docker.io/datadog/agent:7.70.0',
    'docker.io/istio/proxyv2:1.27.1', 'docker.io/istio/pilot:1.27.1', 'docker.io/envoyproxy/envoy:v1.35.2',
    'docker.io/bitnami/redis:8.2.1', 'docker.io/library/nginx:1.29.1', 'docker.io/library/busybox:1.37.0',
    'ghcr.io/fluxcd/source-controller:v1.6.2', 'ghcr.io/fluxcd/kustomize-controller:v1.6.1', 'ghcr.io/external-secrets/external-secrets:v0.19.2',
    'ghcr.io/kyverno/kyverno:v1.15.1', 'ghcr.io/kyverno/background-controller:v1.15.1', 'ghcr.io/aquasecurity/trivy-operator:0.28.0',
    'quay.io/jetstack/cert-manager-controller:v1.18.2', 'quay.io/jetstack/cert-manager-webhook:v1.18.2', 'quay.io/jetstack/cert-manager-cainjector:v1.18.2',
    'quay.io/argoproj/argocd:v3.1.5', 'docker.io/falcosecurity/falco:0.41.3', 'public.ecr.aws/eks-distro/kubernetes-csi/external-snapshotter/csi-snapshotter:v8.3.0-eks-1-33-10',
    'public.ecr.aws/aws-secrets-manager/secrets-store-csi-driver-provider-aws:2.1.0', 'registry.k8s.io/csi-secrets-store/driver:v1.5.3', 'registry.k8s.io/dns/k8s-dns-node-cache:1.26.4',
    'registry.k8s.io/autoscaling/cluster-proportional-autoscaler:v1.9.0', 'registry.example.com/payments/api:2026.11.20-3f9c2ab',
  ];
  return names.map((name, i) => {
    const digest = createHash('sha256').update(name).digest('hex');
    return [name, `${name.replace(/:[^:/]+$/, '')}@sha256:${digest}`, 5_000_000 + ((i * 7_919_213) % 450_000_000)];
  });
})();

/**
 * The status a kubelet posts for its node once it runs: addresses, its API endpoint, node info, the
 * images it holds and its conditions. With the labels above and the managedFields of the managers
 * that write a node (kubelet, kube-controller-manager, Karpenter, kube-node-ready), a Node is
 * 15-25 KB of JSON, as on EKS.
 */
export function kubeletNodeStatus(node: k8s.V1Node, ip: string, kubeletPort: number, ready: boolean, now: Date): k8s.V1NodeStatus {
  const name = node.metadata?.name ?? '';
  const seen = (type: string, status: string, reason: string, message: string) => ({ type, status, reason, message, lastHeartbeatTime: now, lastTransitionTime: now });
  const id = createHash('sha256').update(`${name}/${node.metadata?.uid ?? ''}`).digest('hex');
  return {
    addresses: [
      { type: 'InternalIP', address: ip },
      { type: 'InternalDNS', address: `ip-${ip.replaceAll('.', '-')}.us-west-2.compute.internal` },
      { type: 'Hostname', address: name },
    ],
    daemonEndpoints: { kubeletEndpoint: { Port: kubeletPort } },
    nodeInfo: {
      architecture: 'amd64',
      bootID: `${id.slice(0, 8)}-${id.slice(8, 12)}-${id.slice(12, 16)}-${id.slice(16, 20)}-${id.slice(20, 32)}`,
      containerRuntimeVersion: 'containerd://2.1.4+sandbox',
      kernelVersion: '6.12.46-66.121.amzn2023.x86_64',
      kubeProxyVersion: '',
      kubeletVersion: 'v1.36.3-eks-sandbox',
      machineID: id.slice(32, 64),
      operatingSystem: 'linux',
      osImage: 'Amazon Linux 2023.9.20251110',
      systemUUID: `ec2${id.slice(3, 8)}-${id.slice(8, 12)}-${id.slice(12, 16)}-${id.slice(16, 20)}-${id.slice(20, 32)}`,
    },
    images: NODE_IMAGES.map(([tag, digest, sizeBytes]) => ({ names: [digest, tag], sizeBytes })),
    conditions: [
      seen('MemoryPressure', 'False', 'KubeletHasSufficientMemory', 'kubelet has sufficient memory available'),
      seen('DiskPressure', 'False', 'KubeletHasNoDiskPressure', 'kubelet has no disk pressure'),
      seen('PIDPressure', 'False', 'KubeletHasSufficientPID', 'kubelet has sufficient PID available'),
      { ...(ready ? READY_CONDITION : NOT_READY_CONDITION), lastHeartbeatTime: now, lastTransitionTime: now },
    ],
  };
}
