// node-readiness-controller (sigs.k8s.io/node-readiness-controller) in the sandbox, installed as its
// Helm chart would install it: its CRD, ServiceAccount, leader-election Role, ClusterRole and a
// Deployment whose pod the simulated kubelet runs (image `node-readiness-controller`, the binary
// go/build.sh builds from the project's source archive), with leader election on.
import { existsSync, readFileSync } from 'node:fs';
import { join } from 'node:path';
import { parseAllDocuments, stringify } from 'yaml';
import { CNI_HEALTH_PORT } from './kubelet/cni-health.js';
import { k8s, statusCode } from './kube.js';
import { simulatedNode } from './node-registry.js';
import { run } from './proc.js';
import type { SandboxConnection } from './sandbox.js';

export const NODE_READINESS_CONTROLLER_VERSION = 'v0.5.0';
/** The controller's leader-election Lease (LeaderElectionID in its cmd/main.go). */
export const NODE_READINESS_LEASE = 'ba65f13e.readiness.node.x-k8s.io';
export const NODE_READINESS_RULES = { group: 'readiness.node.x-k8s.io', version: 'v1alpha1', plural: 'nodereadinessrules' } as const;

export interface NodeReadinessInstallOptions {
  /** Namespace of the release (created when missing). */
  namespace: string;
  /** Helm release name (default: node-readiness-controller). */
  release?: string;
  /** Chart values on top of the chart's defaults (Helm --set-json, one per key). */
  values?: Record<string, unknown>;
  /** How long to wait for the pod to be Ready and hold the Lease (default 120 s). */
  timeoutMs?: number;
}

export interface NodeReadinessController {
  namespace: string;
  release: string;
  /** The node the controller's pod runs on (a simulated node of its own, untainted). */
  node: string;
  /** The controller's pod. */
  pod(): Promise<k8s.V1Pod | undefined>;
  /** Removes the release's objects and its node (the CRD stays: other rules may use it). */
  uninstall(): Promise<void>;
}

/** The component directory go/build.sh keeps: manager and reporter (the binaries), crds/, chart/, examples/cni-readiness/. */
export function nodeReadinessDir(binDir: string): string {
  const dir = join(binDir, 'node-readiness-controller');
  if (!existsSync(join(dir, 'manager')) || !existsSync(join(dir, 'reporter')) || !existsSync(join(dir, 'chart', 'Chart.yaml'))) {
    throw new Error(
      `node-readiness-controller is not built in ${binDir}: run \`bash packages/sandbox/go/build.sh node-readiness-controller\` ` +
        '(it needs shared/third_party/node-readiness-controller-v0.5.0.tar.gz beside the clone), then restart the sandbox',
    );
  }
  return dir;
}

/**
 * The controller's chart rendered by helm template (CRDs included) for a release, with the image
 * the sandbox's image table knows. The chart's container command (/manager) is the image's
 * entrypoint: it is dropped so the simulated kubelet runs the entrypoint its image table maps the
 * image to.
 */
export async function renderNodeReadinessChart(binDir: string, namespace: string, release: string, values: Record<string, unknown> = {}): Promise<k8s.KubernetesObject[]> {
  const dir = nodeReadinessDir(binDir);
  const all: Record<string, unknown> = {
    image: { repository: 'node-readiness-controller', tag: NODE_READINESS_CONTROLLER_VERSION, pullPolicy: 'IfNotPresent' },
    ...values,
  };
  const helmArgs = ['template', release, join(dir, 'chart'), '--namespace', namespace, '--include-crds'];
  for (const [k, v] of Object.entries(all)) helmArgs.push('--set-json', `${k}=${JSON.stringify(v)}`);
  const rendered = await run(join(binDir, 'helm'), helmArgs);
  if (rendered.code !== 0) throw new Error(`helm template of node-readiness-controller's chart failed: ${rendered.stderr}`);
  const docs = parseAllDocuments(rendered.stdout)
    .map((d) => d.toJS() as k8s.KubernetesObject | null)
    .filter((o): o is k8s.KubernetesObject => o !== null && typeof o === 'object' && 'kind' in o);
  for (const o of docs) {
    if (o.kind !== 'Deployment') continue;
    for (const c of (o as k8s.V1Deployment).spec?.template.spec?.containers ?? []) {
      if (c.command?.length === 1 && c.command[0] === '/manager') delete c.command;
    }
  }
  return docs;
}

/** Applies objects server-side (field manager helm) and waits for CRDs among them to be Established. */
export async function applyObjects(conn: Pick<SandboxConnection, 'state'>, objects: k8s.KubernetesObject[]): Promise<void> {
  const kubectl = (args: string[], input?: string) => run(join(conn.state.binDir, 'kubectl'), ['--kubeconfig', conn.state.kubeconfig, ...args], input === undefined ? {} : { input });
  const applied = await kubectl(['apply', '--server-side', '--force-conflicts', '--field-manager=helm', '-f', '-'], objects.map((o) => stringify(o)).join('---\n'));
  if (applied.code !== 0) throw new Error(`applying node-readiness-controller's chart failed: ${applied.stderr}`);
  for (const crd of objects.filter((o) => o.kind === 'CustomResourceDefinition')) {
    await kubectl(['wait', '--for=condition=Established', '--timeout=60s', `crd/${crd.metadata?.name}`]);
  }
}

/**
 * Installs the controller from its own chart (rendered, applied server-side) in `namespace`; its
 * pod runs on a simulated node of its own, selected by the chart's nodeSelector. Resolves once the
 * pod is Ready and holds the leader-election Lease; on timeout the error says what it saw and
 * carries the pod's last log lines.
 */
export async function installNodeReadinessController(conn: SandboxConnection, opts: NodeReadinessInstallOptions): Promise<NodeReadinessController> {
  const { namespace } = opts;
  const release = opts.release ?? 'node-readiness-controller';
  const binDir = conn.state.binDir;
  const core = conn.kc.makeApiClient(k8s.CoreV1Api);
  await core.createNamespace({ body: { metadata: { name: namespace } } }).catch((err: unknown) => {
    if (statusCode(err) !== 409) throw err;
  });
  const placement = { 'node-readiness-controller.sandbox/placement': `${namespace}.${release}`.slice(0, 63) };
  const node = `nrc-${namespace}`.slice(0, 63);
  await core.createNode({ body: simulatedNode({ name: node, labels: placement, taints: [] }) }).catch((err: unknown) => {
    if (statusCode(err) !== 409) throw err;
  });

  // The lease namespace is the release's, as the chart's default says; named explicitly because the
  // controller would otherwise read it from the service-account mount a sandbox process cannot see.
  const docs = await renderNodeReadinessChart(binDir, namespace, release, { nodeSelector: placement, leaderElection: { enabled: true, namespace }, ...opts.values });
  const kubectl = (args: string[], input?: string) => run(join(binDir, 'kubectl'), ['--kubeconfig', conn.state.kubeconfig, ...args], input === undefined ? {} : { input });
  await applyObjects(conn, docs);

  const selector = Object.entries(
    (docs.find((o) => o.kind === 'Deployment') as k8s.V1Deployment | undefined)?.spec?.selector.matchLabels ?? {},
  )
    .map(([k, v]) => `${k}=${v}`)
    .join(',');
  const pod = async () => (await core.listNamespacedPod({ namespace, labelSelector: selector })).items.find((p) => !p.metadata?.deletionTimestamp);
  const coordination = conn.kc.makeApiClient(k8s.CoordinationV1Api);
  const deadline = Date.now() + (opts.timeoutMs ?? 120_000);
  let seen: string;
  for (;;) {
    const p = await pod().catch(() => undefined);
    const ready = p?.status?.conditions?.some((c) => c.type === 'Ready' && c.status === 'True');
    const lease = await coordination.readNamespacedLease({ namespace, name: NODE_READINESS_LEASE }).catch(() => undefined);
    if (ready && lease?.spec?.holderIdentity) break;
    seen = p
      ? `pod ${p.metadata?.name} on ${p.spec?.nodeName ?? '(unscheduled)'}: phase ${p.status?.phase}, ready ${String(ready)}, ` +
        `containers ${JSON.stringify(p.status?.containerStatuses?.map((c) => ({ state: c.state, restarts: c.restartCount })) ?? [])}; lease holder ${lease?.spec?.holderIdentity ?? '(none)'}`
      : 'no pod yet';
    if (Date.now() > deadline) {
      const logs = p ? await kubectl(['logs', '-n', namespace, p.metadata?.name ?? '', '--tail=30']) : undefined;
      throw new Error(`node-readiness-controller did not become Ready and leader in ${namespace}: ${seen}${logs ? `\nlogs:\n${logs.stdout}${logs.stderr}` : ''}`);
    }
    await new Promise((r) => setTimeout(r, 500));
  }

  return {
    namespace,
    release,
    node,
    pod,
    async uninstall() {
      const objects = docs.filter((o) => o.kind !== 'CustomResourceDefinition');
      await kubectl(['delete', '--ignore-not-found', '--wait=false', '-f', '-'], objects.map((o) => stringify(o)).join('---\n'));
      await core.deleteNode({ name: node }).catch(() => undefined);
    },
  };
}

export interface CniReporterOptions {
  /** Namespace of the reporter's ServiceAccount and DaemonSet (created when missing: the example's is kube-system). */
  namespace: string;
  /** Suffix of the cluster-wide names (ClusterRole, ClusterRoleBinding), so installs do not collide. */
  name: string;
  /** Where the DaemonSet runs (the example runs on every node). */
  nodeSelector?: Record<string, string>;
  /** The example's CHECK_INTERVAL (5s) unless given. */
  checkInterval?: string;
}

/** The cni-readiness example's condition type (its DaemonSet's CONDITION_TYPE). */
export const CNI_REPORTER_CONDITION = 'projectcalico.org/CalicoReady';

/**
 * node-readiness-controller's own reporter as its cni-readiness example installs it
 * (examples/cni-readiness/cni-reporter-ds.yaml and its RBAC, kept by go/build.sh), changed only
 * where the sandbox needs it: the namespace and cluster-wide names, a node selector, the image
 * the sandbox's image table knows (`node-readiness-reporter`, built from the same archive), and
 * CHECK_ENDPOINT: Calico's `http://localhost:9099/readiness` becomes the node's own CNI health
 * endpoint at `$(HOST_IP):9099` (every simulated node's host network is the sandbox namespace, so
 * localhost would be one endpoint for all of them). Its hostNetwork, tolerations, CHECK_INTERVAL and
 * resources stay the example's.
 */
export function renderCniReporter(binDir: string, opts: CniReporterOptions): k8s.KubernetesObject[] {
  const dir = join(nodeReadinessDir(binDir), 'examples', 'cni-readiness');
  const read = (file: string) =>
    parseAllDocuments(readFileSync(join(dir, file), 'utf8'))
      .map((d) => d.toJS() as k8s.KubernetesObject | null)
      .filter((o): o is k8s.KubernetesObject => o !== null);
  const objects = [...read('cni-reporter-ds.yaml'), ...read('calico-rbac-node-status-patch-role.yaml')];
  const role = objects.find((o) => o.kind === 'ClusterRole')!;
  role.metadata!.name = `${role.metadata!.name}-${opts.name}`;
  for (const o of objects) {
    if (o.kind === 'ServiceAccount' || o.kind === 'DaemonSet') o.metadata!.namespace = opts.namespace;
    if (o.kind === 'ClusterRoleBinding') {
      const b = o as k8s.V1ClusterRoleBinding;
      b.metadata!.name = `${b.metadata!.name}-${opts.name}`;
      b.roleRef.name = role.metadata!.name!;
      for (const s of b.subjects ?? []) s.namespace = opts.namespace;
    }
    if (o.kind === 'DaemonSet') {
      const pod = (o as k8s.V1DaemonSet).spec!.template.spec!;
      if (opts.nodeSelector) pod.nodeSelector = { ...pod.nodeSelector, ...opts.nodeSelector };
      for (const c of pod.containers) {
        c.image = `node-readiness-reporter:${NODE_READINESS_CONTROLLER_VERSION}`;
        const env = (c.env ?? []).map((e) => (e.name === 'CHECK_ENDPOINT' ? { name: e.name, value: `http://$(HOST_IP):${CNI_HEALTH_PORT}/readiness` } : e));
        const interval = env.find((e) => e.name === 'CHECK_INTERVAL');
        if (interval && opts.checkInterval) interval.value = opts.checkInterval;
        c.env = [{ name: 'HOST_IP', valueFrom: { fieldRef: { fieldPath: 'status.hostIP' } } }, ...env];
      }
    }
  }
  return objects;
}
