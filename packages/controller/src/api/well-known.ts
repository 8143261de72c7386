/**
 * Names this controller reads and writes on Kubernetes objects. One prefix for everything we own
 * (the NodeVerification resource, worker-pod labels, the default condition type), so `kubectl get node -o yaml`
 * shows at a glance what is ours. The verification taint and verified label default to the
 * reference `node-ready/*` names and are configurable (nodeManagement.*).
 */
export const GROUP = 'kube-node-ready.io';

/** Labels and annotations on worker pods. */
export const PodLabel = {
  Name: 'app.kubernetes.io/name',
  Component: 'app.kubernetes.io/component',
  ManagedBy: 'app.kubernetes.io/managed-by',
  /** The node name, or `<prefix>-<hash>` when the name is not a valid label value. */
  Node: `${GROUP}/node`,
  /** The attempt number, as a label so `kubectl get pods -L` shows it. */
  Attempt: `${GROUP}/attempt`,
} as const;

export const PodLabelValue = {
  Name: 'kube-node-ready',
  Component: 'worker',
  ManagedBy: 'kube-node-ready-controller',
} as const;

export const PodAnnotation = {
  /** Full node name (labels are limited to 63 characters). */
  NodeName: `${GROUP}/node-name`,
  NodeUid: `${GROUP}/node-uid`,
  Attempt: `${GROUP}/attempt`,
  /** sha256 prefix of the worker configuration the pod was started with. */
  ConfigHash: `${GROUP}/config-hash`,
  /** The timeout of each container check in the pod, `{"gpu":"30s"}` (container-checks.ts): its deadlines come from the pod. */
  CheckTimeouts: `${GROUP}/check-timeouts`,
} as const;

/**
 * The Node annotations the controller reads: remediation's two opt-outs. The node cache keeps only
 * these (controllers/node/verification/slim-node.ts), so an annotation read anywhere else must be added here.
 */
export const NodeAnnotation = {
  /** `kube-node-ready.io/remediation: disabled`: never delete the node (remediation/names.ts). */
  RemediationOptOut: `${GROUP}/remediation`,
  /** Karpenter's own opt-out from disruption. */
  KarpenterDoNotDisrupt: 'karpenter.sh/do-not-disrupt',
} as const;

/** Labels other systems set that change what we do. */
export const Karpenter = {
  NodePoolLabel: 'karpenter.sh/nodepool',
  RegisteredLabel: 'karpenter.sh/registered',
} as const;

/** Taints the worker pod tolerates in addition to the configured verification taints. */
export const NODE_NOT_READY_TAINT = 'node.kubernetes.io/not-ready';
export const NODE_UNREACHABLE_TAINT = 'node.kubernetes.io/unreachable';

/** Worker container contract (docs/worker.md). */
export const WorkerContainer = {
  Name: 'worker',
  ConfigDir: '/etc/kube-node-ready',
  ConfigFile: 'worker.yaml',
  TerminationMessagePath: '/dev/termination-log',
  RunAsUser: 65532,
} as const;

/** Field manager name on every write, so `kubectl get --show-managed-fields` names us. */
export const FIELD_MANAGER = 'kube-node-ready-controller';
