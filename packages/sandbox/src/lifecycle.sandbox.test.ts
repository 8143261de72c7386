import { execFile } from 'node:child_process';
import { existsSync, mkdtempSync, readdirSync, readFileSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { promisify } from 'node:util';
import { afterAll, describe, expect, it } from 'vitest';
import { k8s, loadKubeConfig } from './kube.js';
import { run } from './proc.js';
import { simulatedNode } from './node-registry.js';
import { startSandbox, stopSandbox } from './sandbox.js';
import { sandboxControl } from './control.js';

const exec = promisify(execFile);
// A second sandbox beside the shared one: what `make sandbox-up NODES=3` and `make sandbox-down` do.
const slot = (Number(process.env.KNR_TEST_SLOT ?? '1') + 50) % 100;
const dir = mkdtempSync(join(tmpdir(), 'knr-lifecycle-'));
afterAll(async () => {
  await stopSandbox(dir, slot, () => {});
  rmSync(dir, { recursive: true, force: true });
});

describe('sandbox lifecycle', () => {
  it('up with 3 nodes is visible to the built kubectl; faults can be injected; down leaves no process and no namespace behind', async () => {
    const state = await startSandbox({ dir, slot, nodes: 3, progress: () => {} });
    const kubectl = join(state.binDir, 'kubectl');
    const nodes = await exec(kubectl, ['--kubeconfig', state.kubeconfig, 'get', 'nodes', '-o', 'name']);
    expect(nodes.stdout.trim().split('\n').sort()).toEqual(['node/sandbox-node-1', 'node/sandbox-node-2', 'node/sandbox-node-3']);
    const version = await exec(kubectl, ['--kubeconfig', state.kubeconfig, 'version', '-o', 'json']);
    const v = JSON.parse(version.stdout) as { clientVersion: { gitVersion: string }; serverVersion: { gitVersion: string } };
    expect(v.serverVersion.gitVersion).toBe(state.kubernetesVersion);
    expect(v.clientVersion.gitVersion).toBe(state.kubernetesVersion);
    expect(state.kubernetesVersion).toMatch(/^v1\.(3[6-9]|[4-9]\d)\.\d+$/);

    // A running pod process must not outlive the sandbox.
    const kc = loadKubeConfig(state.kubeconfig);
    const core = kc.makeApiClient(k8s.CoreV1Api);
    await core.createNode({ body: simulatedNode({ name: 'lifecycle-node' }) });
    await core.createNamespacedPod({
      namespace: 'default',
      body: {
        metadata: { name: 'sleeper' },
        // With a memory limit, so a container cgroup exists too.
        spec: { nodeName: 'lifecycle-node', restartPolicy: 'Never', containers: [{ name: 'main', image: 'sandbox-shell', command: ['/bin/sh', '-c', 'exec sleep 303'], resources: { limits: { memory: '64Mi' } } }] },
      },
    });
    let phase: string | undefined;
    for (const deadline = Date.now() + 30_000; Date.now() < deadline; await new Promise((r) => setTimeout(r, 100))) {
      phase = (await core.readNamespacedPod({ name: 'sleeper', namespace: 'default' })).status?.phase;
      if (phase === 'Running') break;
    }
    expect(phase, 'the sleeper pod to run').toBe('Running');
    const pids = await run('ip', ['netns', 'pids', `knr-sandbox-${slot}`]);
    expect(pids.stdout.trim().split(/\s+/).length).toBeGreaterThanOrEqual(4); // daemon, etcd, apiserver, scheduler
    const podNetns = (await run('ip', ['netns', 'list'])).stdout.split('\n').filter((l) => l.startsWith(`knr${slot}-p`));
    expect(podNetns, 'the pod runs in a network namespace of its own').toHaveLength(1);
    const cgroupRoots = (JSON.parse(readFileSync(join(dir, 'cgroups.json'), 'utf8')) as { roots: string[] }).roots;
    expect(cgroupRoots.some((r) => readdirSync(r).some((d) => d.startsWith('pod'))), 'the container runs in a cgroup').toBe(true);

    await faultInjection(dir, core);

    await stopSandbox(dir, slot, () => {});
    const after = await run('ip', ['netns', 'pids', `knr-sandbox-${slot}`]);
    expect(after.code).not.toBe(0); // the namespace is gone
    const list = await run('ip', ['netns', 'list']);
    expect(list.stdout).not.toContain(`knr-sandbox-${slot} `);
    const sleeping = await run('pgrep', ['-f', 'sleep 303']);
    expect(sleeping.stdout.trim()).toBe('');
    const link = await run('ip', ['link', 'show', `knr${slot}h`]);
    expect(link.code).not.toBe(0);
    expect((await run('ip', ['netns', 'list'])).stdout).not.toContain(`knr${slot}-p`);
    for (const root of cgroupRoots) expect(existsSync(root), root).toBe(false);
  });
});

/** The control socket: etcd compaction + apiserver restart give 410 Gone for an old revision; stop/start takes the API down. */
async function faultInjection(sandboxDir: string, core: k8s.CoreV1Api): Promise<void> {
  const before = await core.listNamespace();
  const oldRv = before.metadata!.resourceVersion!;
  await core.createNamespace({ body: { metadata: { generateName: 'compact-' } } });
  const { revision } = (await sandboxControl(sandboxDir, 'POST', '/compact')) as { revision: number };
  expect(revision).toBeGreaterThan(Number(oldRv));
  // The apiserver's watch cache still holds recent history; after a restart it starts from etcd's
  // compacted keyspace, so a client resuming from the old resourceVersion is told 410 Gone.
  await sandboxControl(sandboxDir, 'POST', '/restart/kube-apiserver');
  const gone = await core.listNamespace({ resourceVersion: oldRv, resourceVersionMatch: 'Exact' }).then(
    () => 0,
    (err: { code?: number }) => err.code,
  );
  expect(gone).toBe(410);

  await sandboxControl(sandboxDir, 'POST', '/stop/kube-apiserver');
  const down = await core.listNamespace().then(
    () => 'up',
    () => 'down',
  );
  expect(down).toBe('down');
  await sandboxControl(sandboxDir, 'POST', '/start/kube-apiserver');
  expect((await core.listNamespace()).items.length).toBeGreaterThan(0);
  await expect(sandboxControl(sandboxDir, 'POST', '/restart/nothing')).rejects.toThrow(/unknown control action/);
}
