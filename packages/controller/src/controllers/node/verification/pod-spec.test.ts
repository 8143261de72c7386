import type { V1Pod } from '@kubernetes/client-node';
import { describe, expect, it } from 'vitest';
import { parse as parseYaml } from 'yaml';
import { aNode, testConfig } from '../../../testing/builders.js';
import { containerCheckSchema } from './container-checks.js';
import { workerPodName } from './naming.js';
import {
  activeDeadlineSeconds,
  buildWorkerPod,
  configHash,
  workerArgs,
  workerConfigDocument,
  workerImage,
  workerTolerations,
  WORKER_POD_SELECTOR,
} from './pod-spec.js';

const LONG_NODE = `${'segment-'.repeat(31)}abcde`; // 253 characters
const config = testConfig();

function build(nodeName = 'ip-10-0-1-23.ec2.internal', cfg = config): V1Pod {
  const node = aNode(nodeName).uid('5d2c1d8e-1111-2222-3333-444455556666').tainted().build();
  return buildWorkerPod({ node, attempt: 2, podName: workerPodName(nodeName, 'u', 2), config: cfg, image: 'img:1', configHash: 'abc' });
}

const container = (pod: V1Pod) => pod.spec?.containers[0];

describe('buildWorkerPod', () => {
  it('pins the pod through the scheduler with a required nodeAffinity on metadata.name, never nodeName', () => {
    const pod = build();
    expect(pod.spec?.nodeName).toBeUndefined();
    expect(pod.spec?.affinity?.nodeAffinity?.requiredDuringSchedulingIgnoredDuringExecution?.nodeSelectorTerms).toEqual([
      { matchFields: [{ key: 'metadata.name', operator: 'In', values: ['ip-10-0-1-23.ec2.internal'] }] },
    ]);
  });

  it('tolerates exactly our taints (any value), our failed taint, not-ready and unreachable (NoSchedule), then configured ones', () => {
    const cfg = testConfig({
      nodeManagement: { taints: [{ key: 'node-ready/unverified', value: 'true', effect: 'NoSchedule' }, { key: 'x/y', effect: 'NoExecute' }] },
      worker: { tolerations: [{ key: 'dedicated', operator: 'Equal', value: 'gpu', effect: 'NoSchedule' }] },
    });
    expect(workerTolerations(cfg)).toEqual([
      { key: 'node-ready/unverified', operator: 'Exists', effect: 'NoSchedule' },
      { key: 'x/y', operator: 'Exists', effect: 'NoExecute' },
      { key: 'kube-node-ready.io/verification-failed', operator: 'Exists', effect: 'NoSchedule' },
      { key: 'node.kubernetes.io/not-ready', operator: 'Exists', effect: 'NoSchedule' },
      { key: 'node.kubernetes.io/unreachable', operator: 'Exists', effect: 'NoSchedule' },
      { key: 'dedicated', operator: 'Equal', value: 'gpu', effect: 'NoSchedule' },
    ]);
    // No blanket toleration: other startup taints (a CNI agent's) keep the worker off until they go.
    expect(build().spec?.tolerations?.every((t) => t.key)).toBe(true);
  });

  it('runs once, with a deadline, a priority class and the configured identity', () => {
    const pod = build();
    expect(pod.spec).toMatchObject({
      restartPolicy: 'Never',
      activeDeadlineSeconds: 60 + 180 + 15,
      priorityClassName: 'kube-node-ready-worker',
      serviceAccountName: 'kube-node-ready-worker',
      automountServiceAccountToken: true,
      hostNetwork: false,
      dnsPolicy: 'ClusterFirst',
    });
    expect(pod.metadata?.namespace).toBe('kube-system');
    expect(activeDeadlineSeconds(testConfig({ worker: { timeout: '10s', startTimeout: '1m' } }).worker)).toBe(85);
  });

  it('leaves preemptionPolicy to the PriorityClass (admission refuses a pod whose policy differs from its class), and omits an empty class', () => {
    expect(build().spec).not.toHaveProperty('preemptionPolicy');
    const bare = build(undefined, testConfig({ worker: { priorityClassName: '' } })).spec;
    expect(bare).not.toHaveProperty('priorityClassName');
    expect(bare).not.toHaveProperty('preemptionPolicy');
  });

  it('satisfies the restricted Pod Security Standard', () => {
    const pod = build();
    expect(pod.spec?.securityContext).toEqual({
      runAsNonRoot: true,
      runAsUser: 65532,
      runAsGroup: 65532,
      seccompProfile: { type: 'RuntimeDefault' },
    });
    expect(container(pod)?.securityContext).toEqual({
      runAsNonRoot: true,
      runAsUser: 65532,
      readOnlyRootFilesystem: true,
      allowPrivilegeEscalation: false,
      privileged: false,
      capabilities: { drop: ['ALL'] },
      seccompProfile: { type: 'RuntimeDefault' },
    });
    expect(pod.spec?.volumes?.every((v) => v.configMap || v.emptyDir)).toBe(true); // no hostPath
  });

  it('gives the worker its identity through the downward API and a File termination message', () => {
    const c = container(build());
    expect(c?.env).toEqual([
      { name: 'NODE_NAME', valueFrom: { fieldRef: { fieldPath: 'spec.nodeName' } } },
      { name: 'POD_NAME', valueFrom: { fieldRef: { fieldPath: 'metadata.name' } } },
      { name: 'POD_NAMESPACE', valueFrom: { fieldRef: { fieldPath: 'metadata.namespace' } } },
      { name: 'POD_IP', valueFrom: { fieldRef: { fieldPath: 'status.podIP' } } },
      { name: 'HOST_IP', valueFrom: { fieldRef: { fieldPath: 'status.hostIP' } } },
    ]);
    expect(c).toMatchObject({ name: 'worker', image: 'img:1', imagePullPolicy: 'IfNotPresent', terminationMessagePath: '/dev/termination-log', terminationMessagePolicy: 'File' });
    expect(c?.resources).toEqual({ requests: { cpu: '50m', memory: '64Mi' }, limits: { memory: '128Mi' } });
  });

  it('runs `kube-node-ready worker` on the mounted config with the overall timeout', () => {
    expect(workerArgs(config.worker)).toEqual([
      'worker',
      '--config',
      '/etc/kube-node-ready/worker.yaml',
      '--timeout',
      '1m',
      '--termination-log',
      '/dev/termination-log',
      '--log-format',
      'json',
    ]);
    const pod = build();
    expect(container(pod)?.volumeMounts).toContainEqual({ name: 'config', mountPath: '/etc/kube-node-ready', readOnly: true });
    expect(pod.spec?.volumes).toContainEqual({ name: 'config', configMap: { name: 'kube-node-ready-worker', items: [{ key: 'worker.yaml', path: 'worker.yaml' }] } });
  });

  it('passes the API server endpoints as --api-endpoints, unless there are none or worker.checks sets api.endpoints', () => {
    const endpoints = ['10.0.0.1:6443', '[fd00::1]:6443'];
    expect(workerArgs(config.worker, endpoints).slice(-2)).toEqual(['--api-endpoints', '10.0.0.1:6443,[fd00::1]:6443']);
    expect(workerArgs(config.worker, [])).not.toContain('--api-endpoints');
    for (const configured of [['192.0.2.1:443'], []]) {
      const own = testConfig({ worker: { checks: { api: { endpoints: configured } } } });
      expect(workerArgs(own.worker, endpoints)).not.toContain('--api-endpoints');
    }
    expect(workerArgs(testConfig({ worker: { checks: { api: { slowAfter: '1s' } } } }).worker, endpoints)).toContain('--api-endpoints');
    const node = aNode('n1').tainted().build();
    const pod = buildWorkerPod({ node, attempt: 1, podName: workerPodName('n1', 'u', 1), config, image: 'img:1', configHash: 'abc', apiEndpoints: endpoints });
    expect(container(pod)?.args?.slice(-2)).toEqual(['--api-endpoints', '10.0.0.1:6443,[fd00::1]:6443']);
  });

  it('labels the pod so `kubectl get pods -l` finds the workers of a node, and annotates the full identity', () => {
    const pod = build();
    expect(pod.metadata?.labels).toEqual({
      'app.kubernetes.io/name': 'kube-node-ready',
      'app.kubernetes.io/component': 'worker',
      'app.kubernetes.io/managed-by': 'kube-node-ready-controller',
      'kube-node-ready.io/node': 'ip-10-0-1-23.ec2.internal',
      'kube-node-ready.io/attempt': '2',
    });
    expect(pod.metadata?.annotations).toEqual({
      'kube-node-ready.io/node-name': 'ip-10-0-1-23.ec2.internal',
      'kube-node-ready.io/node-uid': '5d2c1d8e-1111-2222-3333-444455556666',
      'kube-node-ready.io/attempt': '2',
      'kube-node-ready.io/config-hash': 'abc',
    });
    expect(WORKER_POD_SELECTOR).toBe('app.kubernetes.io/component=worker,app.kubernetes.io/managed-by=kube-node-ready-controller');
  });

  it('hashes a node label value that would be too long, keeping the full name in an annotation', () => {
    const pod = build(LONG_NODE);
    expect(LONG_NODE).toHaveLength(253);
    expect(pod.metadata?.labels?.['kube-node-ready.io/node']?.length).toBeLessThanOrEqual(63);
    expect(pod.metadata?.annotations?.['kube-node-ready.io/node-name']).toBe(LONG_NODE);
    expect(pod.metadata?.name?.length).toBeLessThanOrEqual(63);
  });

  it('is owned by its Node (garbage-collected with it) without blocking the Node deletion', () => {
    expect(build().metadata?.ownerReferences).toEqual([
      { apiVersion: 'v1', kind: 'Node', name: 'ip-10-0-1-23.ec2.internal', uid: '5d2c1d8e-1111-2222-3333-444455556666', blockOwnerDeletion: false, controller: false },
    ]);
  });
});

describe('buildWorkerPod with container checks', () => {
  const gpu = containerCheckSchema.parse({
    name: 'gpu',
    image: 'nvcr.io/nvidia/cuda:12.4.1-base-ubuntu22.04',
    command: ['nvidia-smi'],
    env: [{ name: 'NODE_NAME', value: 'mine' }, { name: 'LEVEL', value: '2' }],
    resources: { limits: { 'nvidia.com/gpu': '1' } },
    timeout: '5m',
  });
  const disk = containerCheckSchema.parse({ name: 'disk', image: 'busybox:1.36', args: ['sh', '-c', 'echo ok > /tmp/f && cat /tmp/f'] });
  const node = aNode('n1').uid('u1').tainted().build();
  const pod = buildWorkerPod({ node, attempt: 1, podName: workerPodName('n1', 'u1', 1), config, image: 'img:1', configHash: 'abc', containerChecks: [gpu, disk] });
  const [worker, ...checks] = pod.spec!.containers;

  it('adds one container per check after the worker, in the same pod, as configured', () => {
    expect(pod.spec!.containers.map((c) => c.name)).toEqual(['worker', 'gpu', 'disk']);
    expect(worker).toEqual(buildWorkerPod({ node, attempt: 1, podName: workerPodName('n1', 'u1', 1), config, image: 'img:1', configHash: 'abc' }).spec!.containers[0]);
    expect(checks[0]).toMatchObject({ image: 'nvcr.io/nvidia/cuda:12.4.1-base-ubuntu22.04', command: ['nvidia-smi'], resources: { requests: { cpu: '10m', memory: '16Mi' }, limits: { 'nvidia.com/gpu': '1' } } });
    expect(checks[0]).not.toHaveProperty('args');
    expect(checks[1]).toMatchObject({ image: 'busybox:1.36', args: ['sh', '-c', 'echo ok > /tmp/f && cat /tmp/f'] });
    expect(checks[1]).not.toHaveProperty('command');
  });

  it('runs each check with the worker\'s restricted security context, whatever its image says', () => {
    for (const c of checks) expect(c.securityContext).toEqual(worker!.securityContext);
    expect(worker!.securityContext).toMatchObject({ runAsNonRoot: true, readOnlyRootFilesystem: true, allowPrivilegeEscalation: false, privileged: false, capabilities: { drop: ['ALL'] } });
  });

  it('reports a failure printed to stdout (FallbackToLogsOnError), gives the pod identity, the check\'s own variables winning', () => {
    for (const c of checks) expect(c).toMatchObject({ terminationMessagePath: '/dev/termination-log', terminationMessagePolicy: 'FallbackToLogsOnError' });
    expect(checks[0]!.env).toEqual([
      { name: 'POD_NAME', valueFrom: { fieldRef: { fieldPath: 'metadata.name' } } },
      { name: 'POD_NAMESPACE', valueFrom: { fieldRef: { fieldPath: 'metadata.namespace' } } },
      { name: 'POD_IP', valueFrom: { fieldRef: { fieldPath: 'status.podIP' } } },
      { name: 'HOST_IP', valueFrom: { fieldRef: { fieldPath: 'status.hostIP' } } },
      { name: 'NODE_NAME', value: 'mine' },
      { name: 'LEVEL', value: '2' },
    ]);
    expect(checks[1]!.env?.map((e) => e.name)).toEqual(['NODE_NAME', 'POD_NAME', 'POD_NAMESPACE', 'POD_IP', 'HOST_IP']);
  });

  it('gives the checks a writable /tmp on the node\'s disk, and nothing of the worker\'s (its configuration, its in-memory /tmp)', () => {
    for (const c of checks) expect(c.volumeMounts).toEqual([{ name: 'check-tmp', mountPath: '/tmp' }]);
    expect(pod.spec!.volumes).toContainEqual({ name: 'check-tmp', emptyDir: { sizeLimit: '64Mi' } });
    expect(pod.spec!.volumes?.every((v) => v.configMap || v.emptyDir)).toBe(true);
    expect(build().spec!.volumes?.map((v) => v.name)).toEqual(['config', 'tmp']);
  });

  it('records each check\'s timeout on the pod, and lets the kubelet\'s deadline cover the longest run', () => {
    expect(pod.metadata!.annotations!['kube-node-ready.io/check-timeouts']).toBe('{"gpu":"5m","disk":"1m"}');
    expect(build().metadata!.annotations).not.toHaveProperty('kube-node-ready.io/check-timeouts');
    expect(pod.spec!.activeDeadlineSeconds).toBe(180 + 300 + 15);
    expect(activeDeadlineSeconds(config.worker, [disk])).toBe(180 + 60 + 15);
  });
});

describe('worker image and configuration', () => {
  it.each([
    [{ repository: 'r/kube-node-ready', tag: '', digest: '' }, 'r/kube-node-ready:1.2.3'],
    [{ repository: 'r/kube-node-ready', tag: 'v9', digest: '' }, 'r/kube-node-ready:v9'],
    [{ repository: 'r/kube-node-ready', tag: 'v9', digest: `sha256:${'a'.repeat(64)}` }, `r/kube-node-ready@sha256:${'a'.repeat(64)}`],
  ])('%j -> %s', (image, expected) => {
    expect(workerImage(image, '1.2.3')).toBe(expected);
  });

  it('writes worker.checks verbatim and hashes it', () => {
    const checks = { dns: { names: ['kubernetes.default.svc.cluster.local'], timeout: '2s' }, podnet: { enabled: false } };
    const doc = workerConfigDocument(testConfig({ worker: { checks } }).worker);
    expect(parseYaml(doc)).toEqual(checks);
    expect(configHash(doc)).toMatch(/^[0-9a-f]{16}$/);
    expect(configHash(doc)).not.toBe(configHash(workerConfigDocument(config.worker)));
  });
});
