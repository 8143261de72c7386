// Hand-made NodeClaims for the Remediator's scenario tests, which need states real Karpenter cannot
// be driven into and held in: a claim matched only by ownerReference because its status is not filled
// in yet, claims with do-not-disrupt annotations next to exact node states, dozens of failed nodes at
// once for the breaker and the hourly budget. The sandbox runs real Karpenter (kwok provider), which
// manages only claims of its own node class (KWOKNodeClass): these claims name an EC2NodeClass, so it
// leaves them alone, as it would a claim of another Karpenter installation. They are created without
// finalizers, so deleting one completes at once and leaves its Node behind (a test plays Karpenter's
// part by deleting the Node when it wants to). The whole path with real Karpenter (launch, failure,
// NodeClaim deletion, drain, replacement) is wired.sandbox.test.ts.
import { k8s, statusCode } from '@kube-node-ready/sandbox';
import { sandbox, waitFor } from '../../../../test/sandbox.js';

export const NODECLAIM_CRD = 'nodeclaims.karpenter.sh';
const GROUP = 'karpenter.sh';
const VERSION = 'v1';
const PLURAL = 'nodeclaims';


/** Waits until karpenter.sh/v1 NodeClaims are served (the sandbox installs Karpenter's CRDs at start-up). */
export async function installNodeClaimCrd(): Promise<{ ok: true }> {
  await waitFor(async () => (await listNodeClaims('')).length >= 0, 'karpenter.sh/v1 nodeclaims to be served');
  return { ok: true };
}

function custom(): k8s.CustomObjectsApi {
  return sandbox().kc.makeApiClient(k8s.CustomObjectsApi);
}

export interface TestNodeClaim {
  metadata: { name: string; uid: string; labels?: Record<string, string>; annotations?: Record<string, string>; deletionTimestamp?: string };
  status?: { providerID?: string; nodeName?: string };
}

/**
 * A NodeClaim as Karpenter creates it (spec valid against the real schema and its CEL rules), with
 * the status Karpenter fills in once the instance registered (`status`: providerID and nodeName).
 */
export async function createNodeClaim(opts: {
  name: string;
  pool: string;
  labels?: Record<string, string>;
  annotations?: Record<string, string>;
  status?: { providerID?: string; nodeName?: string };
}): Promise<TestNodeClaim> {
  const body = {
    apiVersion: `${GROUP}/${VERSION}`,
    kind: 'NodeClaim',
    metadata: { name: opts.name, labels: { 'karpenter.sh/nodepool': opts.pool, ...opts.labels }, annotations: opts.annotations ?? {} },
    spec: {
      nodeClassRef: { group: 'karpenter.k8s.aws', kind: 'EC2NodeClass', name: 'default' },
      requirements: [{ key: 'karpenter.sh/nodepool', operator: 'In', values: [opts.pool] }],
    },
  };
  const created = (await custom().createClusterCustomObject({ group: GROUP, version: VERSION, plural: PLURAL, body })) as TestNodeClaim;
  if (!opts.status) return created;
  return (await custom().patchClusterCustomObjectStatus({
    group: GROUP,
    version: VERSION,
    plural: PLURAL,
    name: opts.name,
    body: [{ op: 'add', path: '/status', value: opts.status }],
  })) as TestNodeClaim;
}

export async function getNodeClaim(name: string): Promise<TestNodeClaim | undefined> {
  try {
    return (await custom().getClusterCustomObject({ group: GROUP, version: VERSION, plural: PLURAL, name })) as TestNodeClaim;
  } catch (err) {
    if (statusCode(err) === 404) return undefined;
    throw err;
  }
}

/** NodeClaims carrying the label selector (all with ""). */
export async function listNodeClaims(labelSelector: string): Promise<TestNodeClaim[]> {
  const list = (await custom().listClusterCustomObject({ group: GROUP, version: VERSION, plural: PLURAL, ...(labelSelector ? { labelSelector } : {}) })) as { items: TestNodeClaim[] };
  return list.items;
}

export async function deleteNodeClaims(labelSelector: string): Promise<void> {
  for (const claim of await listNodeClaims(labelSelector)) {
    await custom()
      .deleteClusterCustomObject({ group: GROUP, version: VERSION, plural: PLURAL, name: claim.metadata.name })
      .catch(() => undefined);
  }
}

/** Events about one object (namespace default, where Node and NodeClaim Events live), oldest first. */
/**
 * Events kube-node-ready wrote about the object, oldest first; with `instance`, only those of that
 * controller instance (source.host): other installations in the shared sandbox write their own.
 */
export async function eventsAbout(kind: 'Node' | 'NodeClaim', name: string, instance?: string): Promise<Array<{ reason: string; type: string; message: string; count: number }>> {
  const core = sandbox().kc.makeApiClient(k8s.CoreV1Api);
  const list = await core.listNamespacedEvent({ namespace: 'default', fieldSelector: `involvedObject.kind=${kind},involvedObject.name=${name}` });
  return list.items
    .filter((e) => (e.reportingComponent ?? e.source?.component ?? '').startsWith('kube-node-ready')) // not kube-controller-manager's
    .filter((e) => instance === undefined || e.source?.host === instance)
    .sort((a, b) => String(a.metadata?.creationTimestamp ?? '').localeCompare(String(b.metadata?.creationTimestamp ?? '')))
    .map((e) => ({ reason: e.reason ?? '', type: e.type ?? '', message: e.message ?? '', count: e.count ?? 1 }));
}
