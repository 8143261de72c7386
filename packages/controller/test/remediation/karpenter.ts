// Karpenter in the sandbox, for the remediation tests: the real karpenter.sh/v1 NodeClaim CRD (from
// the sigs.k8s.io/karpenter Go module, fetched through the Go module proxy at test time by
// test/chart/crds.ts, never committed), NodeClaims for simulated nodes, and the Events written about
// Nodes and NodeClaims. No Karpenter controller runs: NodeClaims are created without finalizers, so
// deleting one completes at once and leaves its Node behind (a test plays Karpenter's part by
// deleting the Node when it wants to).
import { k8s, statusCode } from '@kube-node-ready/sandbox';
import { CRD_SOURCES, loadCrd } from '../../../../test/chart/crds.js';
import { sandbox, waitFor } from '../../../../test/sandbox.js';

export const NODECLAIM_CRD = 'nodeclaims.karpenter.sh';
const GROUP = 'karpenter.sh';
const VERSION = 'v1';
const PLURAL = 'nodeclaims';


/**
 * Installs the NodeClaim CRD (once per sandbox; it stays for later files) and waits until it is
 * established. Returns the reason when the Go module proxy cannot provide it.
 */
export async function installNodeClaimCrd(): Promise<{ ok: true } | { skip: string }> {
  const loaded = await loadCrd(CRD_SOURCES.nodeClaim);
  if ('skip' in loaded) return { skip: loaded.skip };
  const api = sandbox().kc.makeApiClient(k8s.ApiextensionsV1Api);
  await api.createCustomResourceDefinition({ body: loaded.crd as unknown as k8s.V1CustomResourceDefinition }).catch((err: unknown) => {
    if (statusCode(err) !== 409) throw err;
  });
  await waitFor(
    async () => {
      const crd = await api.readCustomResourceDefinition({ name: NODECLAIM_CRD });
      return crd.status?.conditions?.some((c) => c.type === 'Established' && c.status === 'True');
    },
    'the NodeClaim CRD to be established',
  );
  // The discovery of a new group can lag its Established condition: wait until a list answers.
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
export async function eventsAbout(kind: 'Node' | 'NodeClaim', name: string): Promise<Array<{ reason: string; type: string; message: string; count: number }>> {
  const core = sandbox().kc.makeApiClient(k8s.CoreV1Api);
  const list = await core.listNamespacedEvent({ namespace: 'default', fieldSelector: `involvedObject.kind=${kind},involvedObject.name=${name}` });
  return list.items
    .sort((a, b) => String(a.metadata?.creationTimestamp ?? '').localeCompare(String(b.metadata?.creationTimestamp ?? '')))
    .map((e) => ({ reason: e.reason ?? '', type: e.type ?? '', message: e.message ?? '', count: e.count ?? 1 }));
}
