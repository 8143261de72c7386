// The simulated kubelet while the API server is away. It stops the API server, so it runs in the
// serial project, on a sandbox of its own.
import { afterAll, describe, expect, it } from 'vitest';
import { addNode, core, createNamespace, deleteNode, readPod, sandbox, waitFor } from '../../../test/sandbox.js';
import { sandboxControl } from './control.js';

const nodes: string[] = [];
afterAll(async () => {
  for (const n of nodes) await deleteNode(n);
});

describe('simulated kubelet and an API server outage', () => {
  it('reports a container that finished while the API server was down once it is back (status updates are retried)', async () => {
    const ns = await createNamespace('outage');
    const node = await addNode({ prefix: 'outage' });
    nodes.push(node);
    await core().createNamespacedPod({
      namespace: ns,
      body: {
        metadata: { name: 'short' },
        spec: { nodeName: node, restartPolicy: 'Never', containers: [{ name: 'main', image: 'sandbox-shell', command: ['/bin/sh', '-c', 'sleep 2; exit 0'] }] },
      },
    });
    await waitFor(async () => (await readPod(ns, 'short'))?.status?.phase === 'Running', 'the pod to run');
    const { layout } = sandbox();
    await sandboxControl(layout.dir, 'POST', '/stop/kube-apiserver');
    try {
      await new Promise((r) => setTimeout(r, 4000)); // the container exits meanwhile; its status update fails
    } finally {
      await sandboxControl(layout.dir, 'POST', '/start/kube-apiserver');
    }
    // Without the retry the pod would stay Running in the API for good.
    const pod = await waitFor(async () => {
      const p = await readPod(ns, 'short');
      return p?.status?.phase === 'Succeeded' ? p : undefined;
    }, 'the finished pod to be reported', 20_000);
    expect(pod.status?.containerStatuses?.[0]?.state?.terminated?.exitCode).toBe(0);
  });
});
