// The informers' lists, page by page, against the sandbox's API server: every page is read, for the
// typed lists (Nodes) and the custom objects API's raw JSON (NodeVerifications) alike. With the
// chart's page size of 500 a first-page-only list goes unnoticed until a cluster has 501 objects.
import { afterAll, describe, expect, it } from 'vitest';
import { silentLogger } from '@kube-node-ready/core';
import type { NodeVerification } from '../api/nodeverification.js';
import { realClock } from '../clock.js';
import { NodeVerificationStore } from '../controllers/node/verification/store.js';
import { testConfig } from '../testing/builders.js';
import { core, sandbox, uniqueName } from '../../../../test/sandbox.js';
import { KubeClient } from './client.js';

const LABEL = 'kube-node-ready.io/pages-test';
const run = uniqueName('pages');
const log = silentLogger();

afterAll(async () => {
  await core().deleteCollectionNode({ labelSelector: `${LABEL}=${run}` }).catch(() => undefined);
});

describe('KubeClient lists', () => {
  it('reads every page of Nodes and of NodeVerifications', async () => {
    const pages = { nodes: 0, nodeverifications: 0 };
    const kube = new KubeClient(sandbox().kc, {
      qps: 100,
      burst: 100,
      clock: realClock,
      log,
      listPageSize: 2,
      observer: { request: (operation) => void (operation === 'list nodes' ? pages.nodes++ : operation === 'list nodeverifications' ? pages.nodeverifications++ : 0) },
    });
    const store = new NodeVerificationStore({ kube, config: testConfig(), clock: realClock, log, cache: new Map<string, NodeVerification>() });
    const names = Array.from({ length: 5 }, (_, i) => `${run}-${i}`);
    for (const name of names) await store.ensure(await core().createNode({ body: { metadata: { name, labels: { [LABEL]: run } } } }));

    const nodes: string[] = [];
    for await (const page of kube.listNodePages(`${LABEL}=${run}`)) for (const node of page.items) nodes.push(node.metadata?.name ?? '');
    expect(nodes.sort()).toEqual(names);
    expect(pages.nodes).toBe(3);

    // Cluster-wide: other tests' NodeVerifications are listed too.
    const verifications = new Set<string>();
    for await (const page of kube.listNodeVerificationPages()) for (const nv of page.items) verifications.add(nv.metadata?.name ?? '');
    expect(names.filter((n) => !verifications.has(n))).toEqual([]);
    expect(pages.nodeverifications).toBeGreaterThanOrEqual(3);
  });
});
