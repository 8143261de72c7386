import { execFile } from 'node:child_process';
import { readFileSync } from 'node:fs';
import { join } from 'node:path';
import { tmpdir } from 'node:os';
import { promisify } from 'node:util';
import { parse as parseYaml } from 'yaml';
import { createIgnoreExists, k8s, statusCode } from './kube.js';
import { sleep } from './proc.js';

const run = promisify(execFile);
/** The real karpenter.sh/v1 NodeClaim CRD, from the Karpenter Go module (fetched through the Go module proxy). */
export const KARPENTER_MODULE = { module: 'sigs.k8s.io/karpenter', version: 'v1.8.2', file: 'pkg/apis/crds/karpenter.sh_nodeclaims.yaml' };

/** Installs the NodeClaim CRD and waits until karpenter.sh/v1 nodeclaims are served. */
export async function installNodeClaimCrd(kc: k8s.KubeConfig): Promise<void> {
  const { module, version, file } = KARPENTER_MODULE;
  const { stdout } = await run('go', ['mod', 'download', '-json', `${module}@${version}`], { cwd: tmpdir(), env: { ...process.env, GOFLAGS: '-mod=mod' }, maxBuffer: 16 << 20 });
  const info = JSON.parse(stdout) as { Dir?: string; Error?: string };
  if (!info.Dir) throw new Error(`go mod download ${module}@${version}: ${info.Error ?? 'no directory'}`);
  const crd = parseYaml(readFileSync(join(info.Dir, file), 'utf8')) as k8s.V1CustomResourceDefinition;
  const api = kc.makeApiClient(k8s.ApiextensionsV1Api);
  await createIgnoreExists(() => api.createCustomResourceDefinition({ body: crd }));
  const custom = kc.makeApiClient(k8s.CustomObjectsApi);
  for (let i = 0; i < 150; i++) {
    try {
      await custom.listClusterCustomObject({ group: 'karpenter.sh', version: 'v1', plural: 'nodeclaims' });
      return;
    } catch (err) {
      // 404 until the group is discovered; 429 "storage is (re)initializing" right after creation.
      if (statusCode(err) !== 404 && statusCode(err) !== 429) throw err;
    }
    await sleep(200);
  }
  throw new Error('karpenter.sh/v1 nodeclaims were not served within 30s of creating the CRD');
}

/** A NodeClaim as Karpenter leaves it once its node registered (no finalizer: nothing here would remove it). */
export async function createNodeClaim(kc: k8s.KubeConfig, o: { name: string; nodePool: string; nodeName: string; providerID: string }): Promise<void> {
  const custom = kc.makeApiClient(k8s.CustomObjectsApi);
  const ref = { group: 'karpenter.sh', version: 'v1', plural: 'nodeclaims' };
  await custom.createClusterCustomObject({
    ...ref,
    body: {
      apiVersion: 'karpenter.sh/v1',
      kind: 'NodeClaim',
      metadata: { name: o.name, labels: { 'karpenter.sh/nodepool': o.nodePool } },
      spec: {
        nodeClassRef: { group: 'karpenter.k8s.aws', kind: 'EC2NodeClass', name: 'default' },
        requirements: [{ key: 'karpenter.sh/nodepool', operator: 'In', values: [o.nodePool] }],
      },
    },
  });
  await custom.patchClusterCustomObjectStatus({ ...ref, name: o.name, body: [{ op: 'add', path: '/status', value: { providerID: o.providerID, nodeName: o.nodeName } }] });
}

/** Names of the NodeClaims that exist now. */
export async function nodeClaimNames(kc: k8s.KubeConfig): Promise<Set<string>> {
  const list = (await kc.makeApiClient(k8s.CustomObjectsApi).listClusterCustomObject({ group: 'karpenter.sh', version: 'v1', plural: 'nodeclaims' })) as { items: Array<{ metadata: { name: string } }> };
  return new Set(list.items.map((i) => i.metadata.name));
}
