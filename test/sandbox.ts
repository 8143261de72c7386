// Helpers for tests that run against the shared sandbox (vitest project "sandbox").
import { randomBytes } from 'node:crypto';
import { inject } from 'vitest';
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

/** A fresh namespace with its default ServiceAccount (no controller-manager creates it). */
export async function createNamespace(prefix = 'test'): Promise<string> {
  const name = uniqueName(prefix);
  await core().createNamespace({ body: { metadata: { name } } });
  await core().createNamespacedServiceAccount({ namespace: name, body: { metadata: { name: 'default' } } });
  return name;
}

/** Registers a simulated node (as its kubelet would) and returns its name. */
export async function addNode(opts: Partial<NodeSpecOptions> & { prefix?: string } = {}): Promise<string> {
  const name = opts.name ?? uniqueName(opts.prefix ?? 'node');
  await core().createNode({ body: simulatedNode({ ...opts, name }) });
  return name;
}

export async function deleteNode(name: string): Promise<void> {
  await core()
    .deleteNode({ name })
    .catch((err) => {
      if (statusCode(err) !== 404) throw err;
    });
}

/** Polls until fn returns a value other than undefined/false, or fails with the last value seen. */
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
  throw new Error(`timed out after ${timeoutMs}ms waiting for ${what}; last: ${last instanceof Error ? last.message : JSON.stringify(last)}`);
}

export async function readPod(namespace: string, name: string): Promise<k8s.V1Pod | undefined> {
  try {
    return await core().readNamespacedPod({ name, namespace });
  } catch (err) {
    if (statusCode(err) === 404) return undefined;
    throw err;
  }
}

/** A kubeconfig that authenticates as a ServiceAccount (a token of an hour). */
export async function serviceAccountKubeConfig(namespace: string, name: string): Promise<k8s.KubeConfig> {
  const token = await core().createNamespacedServiceAccountToken({ name, namespace, body: { spec: { audiences: [], expirationSeconds: 3600 } } });
  const cluster = sandbox().kc.getCurrentCluster();
  if (!cluster) throw new Error('the sandbox kubeconfig has no cluster');
  const kc = new k8s.KubeConfig();
  kc.loadFromOptions({
    clusters: [{ name: 'sandbox', server: cluster.server, ...(cluster.caData ? { caData: cluster.caData } : {}), ...(cluster.caFile ? { caFile: cluster.caFile } : {}), skipTLSVerify: false }],
    users: [{ name, token: token.status?.token ?? '' }],
    contexts: [{ name: 'sa', cluster: 'sandbox', user: name }],
    currentContext: 'sa',
  });
  return kc;
}
