// podnet against the sandbox's cluster DNS pods. Making one DNS pod unreachable is a cluster-wide
// switch (ConfigMap kube-system/sandbox-dns, data.deadPods) that every test file shares: the tests
// here run one at a time, keep the fault for as short as they can (one worker run of 1 s) and
// restore the previous value in `finally`. Only one of the two DNS pods is ever made unreachable,
// so a `podnet` run of mode `any` elsewhere still passes meanwhile.
import { DNS_CONFIGMAP } from '@kube-node-ready/sandbox';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { addNode, core, deleteNode, sandbox, waitFor } from '../../../test/sandbox.js';
import { resolveInSandbox, runWorkerPod, workerNamespace, type WorkerNamespace, type WorkerRun } from './testing/sandbox-worker.js';

const NAME = 'kubernetes.default.svc.cluster.local';
let ns: WorkerNamespace;
let node: string;

beforeAll(async () => {
  ns = await workerNamespace('podnet');
  node = await addNode({ prefix: 'worker-podnet' });
});

afterAll(async () => {
  await ns?.cleanup();
  if (node) await deleteNode(node);
});

async function deadPods(): Promise<string> {
  const cm = await core().readNamespacedConfigMap({ name: DNS_CONFIGMAP, namespace: 'kube-system' });
  return cm.data?.deadPods ?? '';
}

async function setDeadPods(value: string): Promise<void> {
  await core().patchNamespacedConfigMap({ name: DNS_CONFIGMAP, namespace: 'kube-system', body: [{ op: 'add', path: '/data/deadPods', value }] });
}

const answers = async (ip: string) => Array.isArray(await resolveInSandbox(NAME, ip, 300));

describe.sequential('podnet: DNS queries straight to the cluster DNS pod IPs', () => {
  it('with one DNS pod unreachable, mode any passes and mode all fails naming that pod', async () => {
    const L = sandbox().layout;
    const [alive, dead] = L.dnsPodIps as [string, string];
    const args = ['--checks', 'podnet', '--check-timeout', '3s', '--timeout', '10s'];
    const previous = await deadPods();
    let any: WorkerRun;
    let all: WorkerRun;
    await setDeadPods(dead);
    try {
      await waitFor(async () => !(await answers(dead)), `DNS pod ${dead} to stop answering`, 10_000);
      [any, all] = await Promise.all([
        runWorkerPod({ namespace: ns.namespace, node, args }),
        runWorkerPod({ namespace: ns.namespace, node, args: [...args, '--podnet-mode', 'all'] }),
      ]);
    } finally {
      await setDeadPods(previous);
    }
    await waitFor(() => answers(dead), `DNS pod ${dead} to answer again`, 10_000);
    // The ClusterIP kept answering all along: podnet must not go through it.
    expect(await resolveInSandbox(NAME, L.clusterDnsIp, 3_000)).toEqual([L.kubernetesServiceIp]);

    const deadError = `timeout: no answer over udp within 3s (podnet check timeout)`;
    expect(any.exitCode, any.describe()).toBe(0);
    expect(any.check('podnet')).toMatchObject({ ok: true });
    const pods = any.details('podnet').pods as Array<Record<string, unknown>>;
    expect(pods.map((p) => [p.address, p.ok, p.error])).toEqual([
      [`${alive}:53`, true, undefined],
      [`${dead}:53`, false, deadError],
    ]);
    expect(any.details('podnet').mode).toBe('any');

    expect(all.exitCode, all.describe()).toBe(1);
    expect(all.summary.ok).toBe(false);
    expect(all.check('podnet').error).toBe(`1 of 2 DNS pods of Service kube-system/kube-dns did not answer: ${dead}:53: ${deadError}`);
  });

  it('with every DNS pod answering, mode all passes', async () => {
    for (const ip of sandbox().layout.dnsPodIps) await waitFor(() => answers(ip), `DNS pod ${ip} to answer`, 10_000);
    const run = await runWorkerPod({ namespace: ns.namespace, node, args: ['--checks', 'podnet', '--podnet-mode', 'all', '--check-timeout', '3s'] });
    expect(run.exitCode, run.describe()).toBe(0);
    const pods = run.details('podnet').pods as Array<Record<string, unknown>>;
    expect(pods.map((p) => [p.address, p.ok])).toEqual(sandbox().layout.dnsPodIps.map((ip) => [`${ip}:53`, true]));
  });
});
