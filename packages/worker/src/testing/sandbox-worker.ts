// Runs `kube-node-ready worker` as a pod in the sandbox (the bundle dist/kube-node-ready.mjs, started by
// the simulated kubelet on a simulated node, with a real projected service-account token, the node's
// resolv.conf and the cluster network) and reads back what the controller would: exit code and the
// termination message. The pod's JSON log lines come along for the details and for failure messages.
import { readFileSync } from 'node:fs';
import { join } from 'node:path';
import { parseSummary, type CheckSummary, type WorkerSummary } from '@kube-node-ready/core';
import { execInSandbox, k8s, statusCode } from '@kube-node-ready/sandbox';
import { core, createNamespace, readPod, sandbox, uniqueName, waitFor } from '../../../../test/sandbox.js';

/** The reads docs/worker.md lists under RBAC, and nothing more: the test proves they are enough. */
export const WORKER_CLUSTER_ROLE = 'knr-test-worker-sandbox';
export const WORKER_SA = 'knr-worker';
/** A ServiceAccount with no RBAC at all (authenticated, so /version still works). */
export const NO_RBAC_SA = 'knr-worker-no-rbac';

export interface WorkerNamespace {
  namespace: string;
  /** Deletes the ClusterRoleBinding (namespaces never finish terminating in the sandbox; they are left). */
  cleanup(): Promise<void>;
}

/** A namespace with the worker ServiceAccount bound to the documented RBAC, and one without RBAC. */
export async function workerNamespace(prefix = 'worker'): Promise<WorkerNamespace> {
  const namespace = await createNamespace(prefix);
  const rbac = sandbox().kc.makeApiClient(k8s.RbacAuthorizationV1Api);
  for (const name of [WORKER_SA, NO_RBAC_SA]) await core().createNamespacedServiceAccount({ namespace, body: { metadata: { name } } });
  await rbac
    .createClusterRole({
      body: {
        metadata: { name: WORKER_CLUSTER_ROLE },
        rules: [
          { apiGroups: [''], resources: ['services'], verbs: ['get'] },
          { apiGroups: ['discovery.k8s.io'], resources: ['endpointslices'], verbs: ['list'] },
        ],
      },
    })
    .catch((err: unknown) => {
      if (statusCode(err) !== 409) throw err; // shared by every test file
    });
  const binding = `${WORKER_CLUSTER_ROLE}-${namespace}`;
  await rbac.createClusterRoleBinding({
    body: {
      metadata: { name: binding },
      roleRef: { apiGroup: 'rbac.authorization.k8s.io', kind: 'ClusterRole', name: WORKER_CLUSTER_ROLE },
      subjects: [{ kind: 'ServiceAccount', name: WORKER_SA, namespace }],
    },
  });
  return {
    namespace,
    cleanup: async () => {
      await rbac.deleteClusterRoleBinding({ name: binding }).catch(() => undefined);
    },
  };
}

export interface WorkerPodOptions {
  namespace: string;
  node: string;
  /** The container's args after `worker`. */
  args: string[];
  serviceAccountName?: string;
  activeDeadlineSeconds?: number;
  /** How long to wait for the pod to finish (default: the deadline plus 20 s). */
  waitMs?: number;
}

export interface WorkerRun {
  pod: k8s.V1Pod;
  exitCode: number;
  /** The raw termination message. */
  message: string;
  summary: WorkerSummary;
  /** The worker's JSON log lines (stdout/stderr of the container). */
  logs: Array<Record<string, unknown>>;
  /** Non-JSON output lines (configuration errors go to stderr as text). */
  text: string[];
  /** The summary entry of `name`; throws when the summary has none. */
  check(name: string): CheckSummary;
  /** The `details` of the log line of check `name`. */
  details(name: string): Record<string, unknown>;
  /** Everything, for assertion messages. */
  describe(): string;
}

/** Starts a worker pod pinned to `node` and waits until it has finished. */
export async function runWorkerPod(opts: WorkerPodOptions): Promise<WorkerRun> {
  const name = uniqueName('worker');
  const deadline = opts.activeDeadlineSeconds ?? 60;
  await core().createNamespacedPod({
    namespace: opts.namespace,
    body: {
      metadata: { name, labels: { 'app.kubernetes.io/name': 'kube-node-ready-worker-test' } },
      spec: {
        nodeName: opts.node,
        restartPolicy: 'Never',
        serviceAccountName: opts.serviceAccountName ?? WORKER_SA,
        activeDeadlineSeconds: deadline,
        dnsPolicy: 'ClusterFirst',
        containers: [
          {
            name: 'worker',
            image: 'kube-node-ready:dev',
            args: ['worker', ...opts.args],
            env: [
              { name: 'NODE_NAME', valueFrom: { fieldRef: { fieldPath: 'spec.nodeName' } } },
              { name: 'POD_NAME', valueFrom: { fieldRef: { fieldPath: 'metadata.name' } } },
              { name: 'POD_NAMESPACE', valueFrom: { fieldRef: { fieldPath: 'metadata.namespace' } } },
            ],
            terminationMessagePath: '/dev/termination-log',
            terminationMessagePolicy: 'File',
          },
        ],
      },
    },
  });
  const pod = await waitFor(
    async () => {
      const p = await readPod(opts.namespace, name);
      return p?.status?.phase === 'Succeeded' || p?.status?.phase === 'Failed' ? p : undefined;
    },
    `worker pod ${opts.namespace}/${name} on ${opts.node} to finish`,
    opts.waitMs ?? (deadline + 20) * 1000,
  );
  const terminated = pod.status?.containerStatuses?.[0]?.state?.terminated;
  if (!terminated) throw new Error(`pod ${name} finished (${pod.status?.phase}, ${pod.status?.reason ?? ''}) without a terminated container`);
  const lines = readPodLog(pod, 'worker');
  const logs: Array<Record<string, unknown>> = [];
  const text: string[] = [];
  for (const line of lines) {
    try {
      logs.push(JSON.parse(line) as Record<string, unknown>);
    } catch {
      text.push(line);
    }
  }
  const message = terminated.message ?? '';
  const describe = () =>
    `pod ${opts.namespace}/${name} args ${JSON.stringify(opts.args)}: exit ${terminated.exitCode}, reason ${terminated.reason}\n` +
    `termination message: ${message}\nlog:\n${lines.join('\n')}`;
  const parsed = parseSummary(message);
  if (!parsed.ok) throw new Error(`unusable termination message (${parsed.reason})\n${describe()}`);
  const { summary } = parsed;
  return {
    pod,
    exitCode: terminated.exitCode,
    message,
    summary,
    logs,
    text,
    check: (check) => {
      const entry = summary.checks.find((c) => c.name === check);
      if (!entry) throw new Error(`no check ${check} in the summary\n${describe()}`);
      return entry;
    },
    details: (check) => {
      const line = logs.find((l) => l.check === check && typeof l.ok === 'boolean' && l.details !== undefined);
      if (!line) throw new Error(`no log line with details for check ${check}\n${describe()}`);
      return line.details as Record<string, unknown>;
    },
    describe,
  };
}

function readPodLog(pod: k8s.V1Pod, container: string): string[] {
  try {
    const file = join(sandbox().layout.paths.pods, pod.metadata!.uid!, `${container}.log`);
    return readFileSync(file, 'utf8').split('\n').filter((l) => l.trim() !== '');
  } catch {
    return [];
  }
}

/**
 * One DNS question from inside the sandbox network to `server`: the addresses answered, or the
 * resolver's error code (ETIMEOUT, ECONNREFUSED, ENOTFOUND...).
 */
export async function resolveInSandbox(name: string, server: string, timeoutMs = 500): Promise<string[] | string> {
  const script = `const { Resolver } = require('node:dns').promises; const r = new Resolver({ timeout: ${timeoutMs}, tries: 1 }); r.setServers([${JSON.stringify(server)}]);
    r.resolve4(${JSON.stringify(name)}).then((a) => console.log(JSON.stringify(a)), (e) => console.log(JSON.stringify(e.code)));`;
  const out = await execInSandbox(sandbox().layout, [process.execPath, '-e', script]);
  return JSON.parse(out.stdout.trim() || 'null') as string[] | string;
}

/**
 * Whether a TCP connection to host:port completes within `timeoutMs`, tried from inside the sandbox
 * network: 'connected', 'refused', or 'timeout'.
 */
export async function connectInSandbox(host: string, port: number, timeoutMs = 500): Promise<string> {
  const script = `const s = require('node:net').connect({ host: ${JSON.stringify(host)}, port: ${port} });
    const done = (r) => { console.log(r); s.destroy(); process.exit(0); };
    setTimeout(() => done('timeout'), ${timeoutMs});
    s.on('connect', () => done('connected'));
    s.on('error', (e) => done(e.code === 'ECONNREFUSED' ? 'refused' : e.code));`;
  const out = await execInSandbox(sandbox().layout, [process.execPath, '-e', script]);
  return out.stdout.trim();
}

/**
 * A pod whose pod IP accepts no connection: a listener with backlog 1 that never accepts (its event
 * loop is blocked) and whose accept queue a second process fills. The kernel then drops further
 * SYNs, so a connection attempt times out the way it does against a blackholed address, without a
 * packet filter (the sandbox has neither iptables nor nft) and without leaving the namespace.
 */
export async function startBlackholePod(namespace: string, node: string, port = 7000): Promise<{ host: string; port: number; name: string }> {
  const name = uniqueName('blackhole');
  const listener = `const server = require('node:net').createServer();
    server.listen({ host: process.env.MY_IP, port: ${port}, backlog: 1 }, () => {
      process.stdout.write('listening\\n', () => Atomics.wait(new Int32Array(new SharedArrayBuffer(4)), 0, 0));
    });`;
  const filler = `const net = require('node:net');
    const { spawn } = require('node:child_process');
    const child = spawn(process.execPath, ['-e', ${JSON.stringify(listener)}], { stdio: ['ignore', 'pipe', 'inherit'] });
    const sockets = [];
    child.stdout.once('data', async () => {
      for (let i = 0; i < 16; i++) {
        const s = net.connect({ host: process.env.MY_IP, port: ${port} });
        s.on('error', () => {});
        sockets.push(s);
        const ok = await new Promise((r) => { const t = setTimeout(() => r(false), 300); s.once('connect', () => { clearTimeout(t); r(true); }); });
        if (!ok) { console.log('armed after ' + i + ' connections'); break; }
      }
      setInterval(() => {}, 60000);
    });`;
  await core().createNamespacedPod({
    namespace,
    body: {
      metadata: { name },
      spec: {
        nodeName: node,
        restartPolicy: 'Never',
        activeDeadlineSeconds: 300,
        containers: [
          { name: 'main', image: 'sandbox-node', args: ['-e', filler], env: [{ name: 'MY_IP', valueFrom: { fieldRef: { fieldPath: 'status.podIP' } } }] },
        ],
      },
    },
  });
  const pod = await waitFor(async () => {
    const p = await readPod(namespace, name);
    return p?.status?.phase === 'Running' && p.status.podIP ? p : undefined;
  }, `blackhole pod ${name} to run`);
  const host = pod.status!.podIP!;
  // Armed when the listener answers no more: a connection attempt neither completes nor is refused.
  await waitFor(async () => (await connectInSandbox(host, port, 500)) === 'timeout', `${host}:${port} to stop completing connections`, 20_000, 200);
  return { host, port, name };
}
