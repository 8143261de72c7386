// Helpers for tests that run against the shared sandbox (vitest project "sandbox").
import { randomBytes } from 'node:crypto';
import { inject } from 'vitest';
import { NodeVerificationApi, type NodeVerification } from '@kube-node-ready/controller';
import { connectSandbox, k8s, simulatedNode, statusCode, type NodeSpecOptions, type SandboxConnection } from '@kube-node-ready/sandbox';

let conn: SandboxConnection | undefined;

export function sandbox(): SandboxConnection {
  conn ??= connectSandbox(inject('sandboxDir'));
  return conn;
}

export function core(): k8s.CoreV1Api {
  return sandbox().kc.makeApiClient(k8s.CoreV1Api);
}

/** A name unique to this test run: prefix-xxxxxx. */
export function uniqueName(prefix: string): string {
  return `${prefix}-${randomBytes(3).toString('hex')}`;
}

/** A fresh namespace, once kube-controller-manager has given it its `default` ServiceAccount (pods need it). */
export async function createNamespace(prefix = 'test'): Promise<string> {
  const name = uniqueName(prefix);
  await core().createNamespace({ body: { metadata: { name } } });
  await waitFor(async () => (await core().readNamespacedServiceAccount({ namespace: name, name: 'default' }), true), `the default ServiceAccount of ${name}`);
  return name;
}

/** Nodes this test file registered and has not deleted, and label selectors of its nodes: described when a wait times out. */
const testNodes = new Set<string>();
const testSelectors = new Set<string>();

/** Nodes matching this label selector (say, a harness's own label, on nodes Karpenter creates) are described when a wait times out. */
export function describeNodesOnTimeout(labelSelector: string): void {
  testSelectors.add(labelSelector);
}

const CREATED_BY_TEST = 'test.kube-node-ready.io/created-by';

/** Registers a simulated node (as its kubelet would) and returns its name. */
export async function addNode(opts: Partial<NodeSpecOptions> & { prefix?: string } = {}): Promise<string> {
  const name = opts.name ?? uniqueName(opts.prefix ?? 'node');
  const body = simulatedNode({ ...opts, name });
  // Marks this creation: a create that reached the apiserver twice answers 409 AlreadyExists for a
  // node that is ours, recognised by it.
  const nonce = randomBytes(8).toString('hex');
  body.metadata = { ...body.metadata, annotations: { ...body.metadata?.annotations, [CREATED_BY_TEST]: nonce } };
  try {
    await core().createNode({ body });
  } catch (err) {
    const existing = statusCode(err) === 409 ? await core().readNode({ name }).catch(() => undefined) : undefined;
    if (existing?.metadata?.annotations?.[CREATED_BY_TEST] !== nonce) throw err;
  }
  testNodes.add(name);
  return name;
}

export async function deleteNode(name: string): Promise<void> {
  testNodes.delete(name);
  await core()
    .deleteNode({ name })
    .catch((err) => {
      if (statusCode(err) !== 404) throw err;
    });
}

/**
 * Polls until fn returns a value other than undefined/false. On timeout it fails with the last value
 * seen and what the cluster looked like: each node this file registered (Ready, taints, the
 * verification progress, the condition) and its worker pods, so a CI failure can be read from the log.
 */
export async function waitFor<T>(fn: () => Promise<T | undefined | false>, what: string, timeoutMs = 30_000, intervalMs = 100): Promise<T> {
  const deadline = Date.now() + timeoutMs;
  let last: unknown;
  while (Date.now() < deadline) {
    try {
      const v = await fn();
      if (v !== undefined && v !== false) return v;
      last = v;
    } catch (err) {
      last = err;
    }
    await new Promise((r) => setTimeout(r, intervalMs));
  }
  const seen = await describeTestNodes().catch((err: unknown) => `(could not describe the nodes: ${String(err)})`);
  throw new Error(`timed out after ${timeoutMs}ms waiting for ${what}; last: ${last instanceof Error ? last.message : JSON.stringify(last)}${seen ? `\n${seen}` : ''}`);
}

async function describeTestNodes(): Promise<string> {
  const names = new Set(testNodes);
  for (const labelSelector of testSelectors) for (const n of (await core().listNode({ labelSelector })).items) names.add(n.metadata!.name!);
  return describeNodes([...names]);
}

/** The node's NodeVerification, or undefined when it has none (or the cluster has no such resource). */
export async function readVerification(name: string): Promise<NodeVerification | undefined> {
  const { group, version, plural } = NodeVerificationApi;
  try {
    return (await sandbox().kc.makeApiClient(k8s.CustomObjectsApi).getClusterCustomObject({ group, version, plural, name })) as NodeVerification;
  } catch (err) {
    if (statusCode(err) === 404) return undefined;
    throw err;
  }
}

/**
 * Waits until the node's NodeVerification is in `phase` and returns it. The controller writes the
 * Node before the NodeVerification, so a node seen opened can still show the earlier phase.
 */
export async function verificationInPhase(name: string, phase: string, timeoutMs = 30_000): Promise<NodeVerification> {
  return waitFor(async () => {
    const nv = await readVerification(name);
    return nv?.status?.phase === phase ? nv : undefined;
  }, `the NodeVerification of ${name} to be ${phase}`, timeoutMs);
}

/** The progress in a node's NodeVerification, one line: `phase=... attempt=... failures=... last=Outcome: message Verified=status/reason`. */
function progressText(node: k8s.V1Node, nv: NodeVerification | undefined): string {
  if (!nv) return 'none';
  if (nv.spec?.nodeUID !== node.metadata?.uid) return `of another node UID ${nv.spec?.nodeUID ?? '(none)'}`;
  const s = nv.status ?? {};
  const clip = (t: string) => (t.length > 160 ? `${t.slice(0, 160)}...` : t);
  const c = s.conditions?.[0];
  return [
    `phase=${s.phase ?? '-'} attempt=${s.attempt ?? '-'} failures=${s.failures ?? '-'}`,
    ...(s.nextAttemptAt ? [`next=${s.nextAttemptAt}`] : []),
    ...(s.workerPod ? [`pod=${s.workerPod}`] : []),
    ...(s.lastAttempt ? [`last=${s.lastAttempt.reason}: ${clip(s.lastAttempt.message)}`] : []),
    ...(c ? [`${c.type}=${c.status}/${c.reason}`] : []),
  ].join(' ');
}

/**
 * One line per node (at most 40): Ready, taints, verified label, the progress in its
 * NodeVerification, the controller's node condition, and each pod bound to it (phase, container
 * state). Empty for no nodes.
 */
export async function describeNodes(names: string[]): Promise<string> {
  const lines: string[] = [];
  for (const name of names.slice(0, 40)) {
    let node: k8s.V1Node;
    try {
      node = await core().readNode({ name });
    } catch (err) {
      lines.push(`  node ${name}: ${statusCode(err) === 404 ? 'gone' : String(err)}`);
      continue;
    }
    const cond = (type: string) => node.status?.conditions?.find((c) => c.type === type);
    const progress = await readVerification(name).then(
      (nv) => progressText(node, nv),
      (err: unknown) => `(cannot read: ${String(err)})`,
    );
    const verdict = node.status?.conditions?.find((c) => c.type !== 'Ready' && c.type.includes('Network'));
    const pods = await core().listPodForAllNamespaces({ fieldSelector: `spec.nodeName=${name}` });
    const podText = pods.items.map((p) => {
      const c = p.status?.containerStatuses?.[0]?.state;
      const detail = c?.waiting?.reason ?? (c?.terminated ? `exit ${c.terminated.exitCode} ${c.terminated.reason ?? ''}` : c?.running ? 'running' : '');
      return `${p.metadata?.namespace}/${p.metadata?.name} ${p.status?.phase}${detail ? ` (${detail})` : ''}`;
    });
    lines.push(
      `  node ${name}: Ready=${cond('Ready')?.status ?? '-'} taints=[${(node.spec?.taints ?? []).map((t) => `${t.key}:${t.effect}`).join(',')}]` +
        ` labels=[${Object.entries(node.metadata?.labels ?? {}).filter(([k]) => k.includes('verified')).map(([k, v]) => `${k}=${v}`).join(',')}]` +
        ` progress={${progress}}${verdict ? ` ${verdict.type}=${verdict.status}/${verdict.reason ?? ''}` : ''} pods=[${podText.join('; ')}]`,
    );
  }
  if (names.length > 40) lines.push(`  ... and ${names.length - 40} more nodes`);
  return lines.length ? `what the cluster looked like:\n${lines.join('\n')}` : '';
}

export async function readPod(namespace: string, name: string): Promise<k8s.V1Pod | undefined> {
  try {
    return await core().readNamespacedPod({ name, namespace });
  } catch (err) {
    if (statusCode(err) === 404) return undefined;
    throw err;
  }
}

/** A kubeconfig that authenticates as a ServiceAccount (a token of an hour), to the sandbox's apiserver or to `server` (a fault proxy in front of it, serving the sandbox's certificate). */
export async function serviceAccountKubeConfig(namespace: string, name: string, server?: string): Promise<k8s.KubeConfig> {
  const token = await core().createNamespacedServiceAccountToken({ name, namespace, body: { spec: { audiences: [], expirationSeconds: 3600 } } });
  return tokenKubeConfig(token.status?.token ?? '', name, server);
}

/**
 * Two 10-minute tokens of ServiceAccount `namespace/name`: one bound to `pod`, as its kubelet gets
 * it (the API server puts the pod's node in it), and one bound to nothing.
 */
export async function podBoundTokens(namespace: string, name: string, pod: k8s.V1Pod): Promise<{ bound: string; unbound: string }> {
  const bound = await core().createNamespacedServiceAccountToken({
    name,
    namespace,
    body: { spec: { audiences: [], expirationSeconds: 600, boundObjectRef: { apiVersion: 'v1', kind: 'Pod', name: pod.metadata!.name!, uid: pod.metadata!.uid! } } },
  });
  const unbound = await core().createNamespacedServiceAccountToken({ name, namespace, body: { spec: { audiences: [], expirationSeconds: 600 } } });
  return { bound: bound.status?.token ?? '', unbound: unbound.status?.token ?? '' };
}

/** A kubeconfig for the sandbox's API server (or `server`, e.g. a fault proxy) that authenticates with `token` as `user`. */
export function tokenKubeConfig(token: string, user: string, server?: string): k8s.KubeConfig {
  const cluster = sandbox().kc.getCurrentCluster();
  if (!cluster) throw new Error('the sandbox kubeconfig has no cluster');
  const kc = new k8s.KubeConfig();
  kc.loadFromOptions({
    clusters: [{ name: 'sandbox', server: server ?? cluster.server, ...(cluster.caData ? { caData: cluster.caData } : {}), ...(cluster.caFile ? { caFile: cluster.caFile } : {}), skipTLSVerify: false }],
    users: [{ name: user, token }],
    contexts: [{ name: 'sa', cluster: 'sandbox', user }],
    currentContext: 'sa',
  });
  return kc;
}

/**
 * A Deployment `name` of one pod that only a node of Karpenter's NodePool `pool` can take (its
 * nodeSelector, and a toleration of the pool's dedicated taint): pending, it makes Karpenter launch
 * a node. Pod Security "restricted" compliant; `cpu` is its request.
 */
export async function pendingWorkloadFor(pool: string, namespace: string, dedicated: k8s.V1Taint, cpu = '100m', name = 'app'): Promise<void> {
  await sandbox()
    .kc.makeApiClient(k8s.AppsV1Api)
    .createNamespacedDeployment({
      namespace,
      body: {
        metadata: { name },
        spec: {
          replicas: 1,
          selector: { matchLabels: { app: name } },
          template: {
            metadata: { labels: { app: name } },
            spec: {
              nodeSelector: { 'karpenter.sh/nodepool': pool },
              tolerations: [{ key: dedicated.key, operator: 'Equal', value: dedicated.value ?? pool, effect: dedicated.effect }],
              terminationGracePeriodSeconds: 1,
              securityContext: { runAsNonRoot: true, runAsUser: 65532, seccompProfile: { type: 'RuntimeDefault' } },
              containers: [
                {
                  name: 'main',
                  image: 'sandbox-shell',
                  command: ['/bin/sh', '-c', 'exec sleep 3600'],
                  resources: { requests: { cpu } },
                  securityContext: { allowPrivilegeEscalation: false, capabilities: { drop: ['ALL'] } },
                },
              ],
            },
          },
        },
      },
    });
}

/** "allowed", or the API server's message for the refusal. */
export async function outcome(request: Promise<unknown>): Promise<string> {
  try {
    await request;
    return 'allowed';
  } catch (err) {
    const body = (err as { body?: unknown }).body;
    if (typeof body === 'string') {
      try {
        return (JSON.parse(body) as { message?: string }).message ?? body;
      } catch {
        return body;
      }
    }
    return String(err);
  }
}
