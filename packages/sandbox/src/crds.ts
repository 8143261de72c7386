import { readFileSync } from 'node:fs';
import { join } from 'node:path';
import { parse as parseYaml } from 'yaml';
import { k8s, statusCode } from './kube.js';
import { sleep } from './proc.js';
import { repoRoot } from './sandbox.js';

/** The chart's CRDs, the source of truth the chart installs (Helm's crds/ directory). */
export const OWN_CRD_FILES = ['nodeverifications.kube-node-ready.io.yaml'] as const;

/** The field manager of the sandbox's writes to its CRDs. */
const FIELD_MANAGER = 'kube-node-ready-sandbox';

/** The directory of the chart's CRDs in this checkout. */
export function ownCrdDir(): string {
  return join(repoRoot(), 'deploy', 'helm', 'kube-node-ready', 'crds');
}

/** A CRD of the chart, parsed from its file. */
export function readOwnCrd(file: (typeof OWN_CRD_FILES)[number], dir = ownCrdDir()): k8s.V1CustomResourceDefinition {
  return parseYaml(readFileSync(join(dir, file), 'utf8')) as k8s.V1CustomResourceDefinition;
}

/**
 * Installs the product's own CRDs (NodeVerification) from the chart's crds/ directory, so every
 * sandbox serves them as a cluster with the chart installed does, and waits until each is served.
 * Applied server-side: created when absent, brought up to date when the file changed (a developer's
 * long-lived sandbox picks up an edited schema at its next start), untouched otherwise.
 */
export async function installOwnCrds(kc: k8s.KubeConfig, dir = ownCrdDir()): Promise<void> {
  const api = kc.makeApiClient(k8s.ApiextensionsV1Api);
  const custom = kc.makeApiClient(k8s.CustomObjectsApi);
  for (const file of OWN_CRD_FILES) {
    const crd = readOwnCrd(file, dir);
    const name = crd.metadata?.name ?? file;
    await api.patchCustomResourceDefinition({ name, body: crd, fieldManager: FIELD_MANAGER, force: true }, k8s.setHeaderOptions('Content-Type', k8s.PatchStrategy.ServerSideApply));
    const version = crd.spec.versions.find((v) => v.storage)?.name ?? crd.spec.versions[0]?.name ?? '';
    const ref = { group: crd.spec.group, version, plural: crd.spec.names.plural };
    for (let i = 0; ; i++) {
      try {
        await custom.listClusterCustomObject({ ...ref, limit: 1 });
        break;
      } catch (err) {
        // 404 until the group is discovered; 429 "storage is (re)initializing" right after creation.
        if ((statusCode(err) !== 404 && statusCode(err) !== 429) || i >= 300) throw new Error(`${name} not served 60s after applying its CRD: ${String(err)}`, { cause: err });
      }
      await sleep(200);
    }
  }
}
