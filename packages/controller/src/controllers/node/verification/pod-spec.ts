import type { V1Container, V1EnvVar, V1Node, V1Pod, V1SecurityContext, V1Toleration } from '@kubernetes/client-node';
import { formatDuration } from '@kube-node-ready/core';
import { stringify as toYaml } from 'yaml';
import {
  NODE_NOT_READY_TAINT,
  NODE_UNREACHABLE_TAINT,
  PodAnnotation,
  PodLabel,
  PodLabelValue,
  WorkerContainer,
} from '../../../api/well-known.js';
import type { ControllerConfig, WorkerConfig } from '../../../config/schema.js';
import { nodeName, nodeUid } from '../../../kube/objects.js';
import { checkTimeoutsAnnotation, type ContainerCheck } from './container-checks.js';
import { nodeLabelValue, shortHash } from './naming.js';
import { RUN_GRACE_MS } from './pod-result.js';

/**
 * The worker Pod for one attempt on one node. Pinned through the scheduler with a required
 * nodeAffinity on the node's metadata.name (not spec.nodeName, which bypasses the scheduler and
 * so every other taint and admission check: ADR 0001).
 */
export interface WorkerPodInput {
  node: V1Node;
  attempt: number;
  podName: string;
  config: ControllerConfig;
  /** Fully resolved image reference (workerImage()). */
  image: string;
  /** The worker ConfigMap key the pod reads: its node's profile's (worker-config.ts); `worker.yaml` when not given. */
  configKey?: string;
  /** configHash() of that key's content. */
  configHash: string;
  /** API server `IP:PORT`s for `--api-endpoints` (api-endpoints.ts); none: the flag is left out. */
  apiEndpoints?: readonly string[];
  /** The node's profile's worker.containerChecks: a container each, after the worker's. */
  containerChecks?: readonly ContainerCheck[];
}

const CONFIG_VOLUME = 'config';
const TMP_VOLUME = 'tmp';
/** The container checks' /tmp: an emptyDir on the node's disk, shared by them. */
const CHECK_TMP_VOLUME = 'check-tmp';

export function buildWorkerPod(input: WorkerPodInput): V1Pod {
  const { node, attempt, podName, config, image, configKey = WorkerContainer.ConfigFile, configHash, apiEndpoints = [], containerChecks = [] } = input;
  const worker = config.worker;
  const name = nodeName(node);

  return {
    apiVersion: 'v1',
    kind: 'Pod',
    metadata: {
      name: podName,
      namespace: worker.namespace,
      labels: workerPodLabels(name, attempt),
      annotations: {
        [PodAnnotation.NodeName]: name,
        [PodAnnotation.NodeUid]: nodeUid(node),
        [PodAnnotation.Attempt]: String(attempt),
        [PodAnnotation.ConfigHash]: configHash,
        ...(containerChecks.length > 0 ? { [PodAnnotation.CheckTimeouts]: checkTimeoutsAnnotation(containerChecks) } : {}),
      },
      // Garbage-collected with its Node; never blocks the Node's deletion.
      ownerReferences: [{ apiVersion: 'v1', kind: 'Node', name, uid: nodeUid(node), blockOwnerDeletion: false, controller: false }],
    },
    spec: {
      affinity: {
        nodeAffinity: {
          requiredDuringSchedulingIgnoredDuringExecution: {
            nodeSelectorTerms: [{ matchFields: [{ key: 'metadata.name', operator: 'In', values: [name] }] }],
          },
        },
      },
      tolerations: workerTolerations(config),
      restartPolicy: 'Never',
      activeDeadlineSeconds: activeDeadlineSeconds(worker, containerChecks),
      terminationGracePeriodSeconds: 10,
      // The worker never evicts workloads: its PriorityClass (the chart's) says preemptionPolicy
      // Never. The pod cannot say it itself: the Priority admission plugin copies the policy from
      // the class (PreemptLowerPriority without one) and refuses a pod that names another.
      ...(worker.priorityClassName ? { priorityClassName: worker.priorityClassName } : {}),
      serviceAccountName: worker.serviceAccountName,
      automountServiceAccountToken: true, // the api check authenticates with it
      enableServiceLinks: false,
      dnsPolicy: 'ClusterFirst', // the dns check must see the node's view of cluster DNS
      hostNetwork: false, // the pod network is what we verify
      ...(worker.imagePullSecrets.length > 0 ? { imagePullSecrets: worker.imagePullSecrets.map((s) => ({ name: s })) } : {}),
      securityContext: {
        runAsNonRoot: true,
        runAsUser: WorkerContainer.RunAsUser,
        runAsGroup: WorkerContainer.RunAsUser,
        seccompProfile: { type: 'RuntimeDefault' },
      },
      containers: [
        {
          name: WorkerContainer.Name,
          image,
          imagePullPolicy: worker.imagePullPolicy,
          args: workerArgs(worker, apiEndpoints),
          env: downwardEnv(),
          resources: { requests: { ...worker.resources.requests }, limits: { ...worker.resources.limits } },
          securityContext: restrictedContainer(),
          terminationMessagePath: WorkerContainer.TerminationMessagePath,
          terminationMessagePolicy: 'File',
          volumeMounts: [
            { name: CONFIG_VOLUME, mountPath: WorkerContainer.ConfigDir, readOnly: true },
            { name: TMP_VOLUME, mountPath: '/tmp' },
          ],
        },
        ...containerChecks.map(checkContainer),
      ],
      volumes: [
        { name: CONFIG_VOLUME, configMap: { name: worker.configMapName, items: [{ key: configKey, path: WorkerContainer.ConfigFile }] } },
        { name: TMP_VOLUME, emptyDir: { medium: 'Memory', sizeLimit: '16Mi' } },
        ...(containerChecks.length > 0 ? [{ name: CHECK_TMP_VOLUME, emptyDir: { sizeLimit: '64Mi' } }] : []),
      ],
    },
  };
}

/** What every container of the pod runs with: restricted Pod Security, as the pod-level context's user. */
function restrictedContainer(): V1SecurityContext {
  return {
    runAsNonRoot: true,
    runAsUser: WorkerContainer.RunAsUser,
    readOnlyRootFilesystem: true,
    allowPrivilegeEscalation: false,
    privileged: false,
    capabilities: { drop: ['ALL'] },
    seccompProfile: { type: 'RuntimeDefault' },
  };
}

function downwardEnv(): V1EnvVar[] {
  return [
    { name: 'NODE_NAME', valueFrom: { fieldRef: { fieldPath: 'spec.nodeName' } } },
    { name: 'POD_NAME', valueFrom: { fieldRef: { fieldPath: 'metadata.name' } } },
    { name: 'POD_NAMESPACE', valueFrom: { fieldRef: { fieldPath: 'metadata.namespace' } } },
    { name: 'POD_IP', valueFrom: { fieldRef: { fieldPath: 'status.podIP' } } },
    { name: 'HOST_IP', valueFrom: { fieldRef: { fieldPath: 'status.hostIP' } } },
  ];
}

/**
 * A container check's container: the worker's security context, whatever the image would run as.
 * FallbackToLogsOnError: a check that prints its finding and exits non-zero reports it without
 * writing a termination-message file.
 */
function checkContainer(check: ContainerCheck): V1Container {
  const own = new Set(check.env.map((e) => e.name));
  return {
    name: check.name,
    image: check.image,
    ...(check.command.length > 0 ? { command: [...check.command] } : {}),
    ...(check.args.length > 0 ? { args: [...check.args] } : {}),
    env: [...downwardEnv().filter((e) => !own.has(e.name)), ...check.env.map((e) => ({ name: e.name, value: e.value }))],
    resources: { requests: { ...check.resources.requests }, limits: { ...check.resources.limits } },
    securityContext: restrictedContainer(),
    terminationMessagePath: WorkerContainer.TerminationMessagePath,
    terminationMessagePolicy: 'FallbackToLogsOnError',
    volumeMounts: [{ name: CHECK_TMP_VOLUME, mountPath: '/tmp' }],
  };
}

/** Labels that find the workers of a node: `kubectl get pods -l kube-node-ready.io/node=NODE`. */
export function workerPodLabels(node: string, attempt: number): Record<string, string> {
  return {
    [PodLabel.Name]: PodLabelValue.Name,
    [PodLabel.Component]: PodLabelValue.Component,
    [PodLabel.ManagedBy]: PodLabelValue.ManagedBy,
    [PodLabel.Node]: nodeLabelValue(node),
    [PodLabel.Attempt]: String(attempt),
  };
}

/** The name of the node a worker pod verifies (its annotation; label values may be shortened). */
export function workerNodeName(pod: V1Pod): string | undefined {
  return pod.metadata?.annotations?.[PodAnnotation.NodeName];
}

/** Selector of every worker pod this controller creates (for its pod informer). */
export const WORKER_POD_SELECTOR = `${PodLabel.Component}=${PodLabelValue.Component},${PodLabel.ManagedBy}=${PodLabelValue.ManagedBy}`;

/**
 * The verification taints (any value), the node lifecycle taints a fresh node carries while its
 * kubelet or CNI comes up, then the user's extra tolerations.
 */
export function workerTolerations(config: ControllerConfig): V1Toleration[] {
  const tolerations: V1Toleration[] = config.nodeManagement.taints.map((t) => ({ key: t.key, operator: 'Exists', effect: t.effect }));
  // A failed node verified again (kube-node-ready verify) still has our failed taint until the
  // attempt's write removes it.
  if (config.nodeManagement.failedTaint.enabled) tolerations.push({ key: config.nodeManagement.failedTaint.key, operator: 'Exists', effect: 'NoSchedule' });
  tolerations.push(
    { key: NODE_NOT_READY_TAINT, operator: 'Exists', effect: 'NoSchedule' },
    { key: NODE_UNREACHABLE_TAINT, operator: 'Exists', effect: 'NoSchedule' },
  );
  for (const t of config.worker.tolerations) tolerations.push({ ...t });
  return tolerations;
}

/**
 * The kubelet's backstop deadline, counted from the pod's start (before the image pull):
 * start time + the longest run time (the worker's, or a container check's) + grace. The
 * controller applies tighter deadlines itself (pod-result.ts).
 */
export function activeDeadlineSeconds(worker: WorkerConfig, containerChecks: readonly ContainerCheck[] = []): number {
  const run = Math.max(worker.timeout, ...containerChecks.map((c) => c.timeout));
  return Math.ceil((worker.startTimeout + run + RUN_GRACE_MS) / 1000);
}

/**
 * `kube-node-ready worker ...` (the image's entrypoint is the kube-node-ready binary), with
 * `--api-endpoints` when there are endpoints, unless `worker.checks` sets `api.endpoints` itself
 * (the flag would override it; an explicit empty list there turns the fallback off).
 */
export function workerArgs(worker: WorkerConfig, apiEndpoints: readonly string[] = []): string[] {
  const api = worker.checks['api'];
  const configured = typeof api === 'object' && api !== null && 'endpoints' in api;
  return [
    'worker',
    '--config',
    `${WorkerContainer.ConfigDir}/${WorkerContainer.ConfigFile}`,
    '--timeout',
    formatDuration(worker.timeout),
    '--termination-log',
    WorkerContainer.TerminationMessagePath,
    '--log-format',
    'json',
    ...(apiEndpoints.length > 0 && !configured ? ['--api-endpoints', apiEndpoints.join(',')] : []),
  ];
}

/** `repository@digest`, else `repository:tag`, the tag defaulting to the controller's version. */
export function workerImage(image: WorkerConfig['image'], controllerVersion: string): string {
  if (image.digest) return `${image.repository}@${image.digest}`;
  return `${image.repository}:${image.tag || controllerVersion}`;
}

/** A worker ConfigMap document (worker-config.ts): worker.checks, verbatim. */
export function workerConfigDocument(worker: WorkerConfig): string {
  return toYaml(worker.checks);
}

export function configHash(document: string): string {
  return shortHash(document, 16);
}
