// A real node under the worker: a real kubelet (v1.36.3, built with the sandbox's other Kubernetes
// binaries), Debian's containerd and runc, the CNI bridge plugin with host-local IPAM, in a network
// namespace of its own; the worker pod runs from the image `make image` built, pulled by the
// kubelet through containerd from the registry in the sandbox's namespace. The controller runs in
// this process (test harness) with its worker image pointed at that registry by digest.
import { execFile } from 'node:child_process';
import { existsSync, readdirSync, readFileSync, statSync } from 'node:fs';
import { join } from 'node:path';
import { promisify } from 'node:util';
import { describe, expect, it } from 'vitest';
import { repoRoot, sandboxControl } from '@kube-node-ready/sandbox';
import { readNode } from '../../packages/controller/test/harness.js';
import { CLUSTER_DNS } from '../../packages/sandbox/src/coredns.js';
import { INOTIFY_INSTANCES, REAL_NODE_BRIDGE_MAC, realNodeBridge, realNodeProductImage } from '../../packages/sandbox/src/real-node.js';
import { processesAndMountsUnder } from '../leftovers.js';
import { core, deleteNode, readVerification, sandbox, uniqueName, verificationInPhase, waitFor } from '../sandbox.js';
import { realNodeSuite } from './real-nodes.js';

const exec = promisify(execFile);
// One controller per test: each test starts its own.
const suite = realNodeSuite('real');
const { startController, addRealNode, removeRealNode, made } = suite;

/** What a real node leaves on the machine: processes, mounts, cgroups and files naming it. */
function leftovers(name: string, dir: string): string[] {
  const left = processesAndMountsUnder(dir);
  const cgroups = readdirSync('/sys/fs/cgroup').map((hier) => join('/sys/fs/cgroup', hier, `knr${sandbox().layout.slot}-${name}`));
  for (const c of cgroups) if (existsSync(c)) left.push(`cgroup ${c}`);
  if (existsSync(dir)) left.push(`directory ${dir}`);
  return left;
}

/** The node's NodeVerification once its first attempt has a result. */
async function firstAttempt(name: string) {
  return waitFor(
    async () => {
      const v = await readVerification(name);
      return v?.status?.lastAttempt?.reason ? v : undefined;
    },
    `the first attempt on real node ${name} to finish`,
    240_000,
  );
}

describe('a real node', () => {
  it('registers with its startup taint, runs the worker from the image and is opened at attempt 1; removed, it leaves nothing behind', async () => {
    const image = await startController();
    const name = await addRealNode('real');

    // The kubelet registered the node itself, with the taint, containerd as its runtime and its version.
    const node = await waitFor(async () => (await readNode(name)) ?? undefined, `real node ${name} to register`, 120_000);
    expect(node.status?.nodeInfo?.containerRuntimeVersion).toMatch(/^containerd:\/\//);
    expect(node.status?.nodeInfo?.kubeletVersion).toBe(sandbox().state.kubernetesVersion);

    await suite.h.waitForOpen([name], `real node ${name} to be verified and opened`, 240_000);
    const nv = await verificationInPhase(name, 'Passed');
    expect(nv.status?.attempt).toBe(1);
    const opened = await readNode(name);
    expect((opened?.spec?.taints ?? []).map((t) => t.key)).not.toContain(suite.h.taint.key);

    // The worker ran on the real node from the registry's image: its kubelet reported pulling and
    // starting it (Events of the worker pod, from that node).
    const events = await waitFor(
      async () => {
        const list = await core().listNamespacedEvent({ namespace: suite.h.namespace, fieldSelector: 'involvedObject.kind=Pod' });
        const fromNode = list.items.filter((e) => e.source?.host === name || e.reportingInstance === name);
        return fromNode.some((e) => e.reason === 'Started') ? fromNode : undefined;
      },
      `the kubelet of ${name} to report the worker pod's container started`,
      30_000,
    );
    const pulled = events.find((e) => e.reason === 'Pulled' || e.reason === 'Pulling');
    expect(pulled?.message, JSON.stringify(events.map((e) => `${e.reason}: ${e.message}`))).toContain(`${image.repository}@${image.digest}`);

    const { dir, netns } = made.get(name)!;
    expect(existsSync(dir)).toBe(true);
    // The device plugin socket its kubelet's start removes and listens on is the node's, not the
    // machine's /var/lib/kubelet/device-plugins that every kubelet would share (KUBELET_MACHINE_PATHS).
    const pid = (await exec('pgrep', ['-f', `kubelet --config ${dir}/kubelet.yaml`])).stdout.trim().split('\n')[0]!;
    const seen = statSync(`/proc/${pid}/root/var/lib/kubelet/device-plugins/kubelet.sock`);
    const own = statSync(join(dir, 'device-plugins', 'kubelet.sock'));
    expect([seen.dev, seen.ino], `kubelet ${pid} of ${name}: its device plugin socket is not the node's`).toEqual([own.dev, own.ino]);
    // The machine has inotify instances for more kubelets than its default 128 (raiseInotifyInstances).
    expect(Number(readFileSync('/proc/sys/fs/inotify/max_user_instances', 'utf8'))).toBeGreaterThanOrEqual(INOTIFY_INSTANCES);
    expect(existsSync(join('/run/netns', netns))).toBe(true);
    await removeRealNode(name);
    expect(leftovers(name, dir)).toEqual([]);
    // Its namespace is gone (other tests' real nodes may be running beside it).
    expect(existsSync(join('/run/netns', netns))).toBe(false);
    // The nodes' bridge keeps the address it was given as its ports go: without one it would take
    // its lowest port's, and the other nodes' ARP entries for their gateway would name a port gone.
    const { netns: sandboxNs, slot } = sandbox().layout;
    expect((await exec('ip', ['-n', sandboxNs, 'link', 'show', realNodeBridge(slot)])).stdout).toContain(`link/ether ${REAL_NODE_BRIDGE_MAC} `);
    await deleteNode(name);
  });

  it('registering while its CNI configuration is missing, it is NotReady (cni plugin not initialized) and uses no attempt until the configuration appears; then it opens at attempt 1', async () => {
    await startController();
    const name = await addRealNode('real-nocni', ['cni-config-missing']);

    // containerd reports the network not ready and the kubelet says why, as on a node whose CNI agent has not written its configuration.
    const ready = await waitFor(
      async () => {
        const c = (await readNode(name))?.status?.conditions?.find((x) => x.type === 'Ready');
        return c?.status === 'False' && /cni plugin not initialized/.test(c.message ?? '') ? c : undefined;
      },
      `real node ${name} to report NotReady for its missing CNI configuration`,
      120_000,
    );
    expect(ready.message).toMatch(/NetworkPluginNotReady|network plugin/i);
    // The controller, leading and reacting within a second to a launchable node, waits: in 15 s
    // no attempt is recorded and no worker pod is made for the node (one would stay Pending there).
    await new Promise((r) => setTimeout(r, 15_000));
    expect((await readVerification(name))?.status?.attempt ?? 0).toBe(0);
    const pods = await core().listNamespacedPod({ namespace: suite.h.namespace, fieldSelector: `spec.nodeName=${name}` });
    expect(pods.items.map((p) => p.metadata?.name)).toEqual([]);

    // The CNI agent writes its configuration: the node goes Ready, is verified and opened at attempt 1.
    await sandboxControl(sandbox().state.dir, 'POST', `/real-node-fault/${name}?fault=cni-config-missing&on=false`);
    await suite.h.waitForOpen([name], `real node ${name} to open once its CNI configuration is in place`, 240_000);
    const nv = await verificationInPhase(name, 'Passed');
    expect(nv.status?.attempt, JSON.stringify(nv.status)).toBe(1);
  }, 420_000);

  it('runs container checks beside the worker on a real node: pulled by containerd, as non-root on a read-only root filesystem with a writable /tmp; one that exits 1 fails the attempt with what it printed', async () => {
    const image = realNodeProductImage(repoRoot());
    const node = ['/nodejs/bin/node', '-e'];
    // Each check says what is wrong on stdout (FallbackToLogsOnError) and exits 1, else exits 0.
    const scratch = [
      "const fs = require('fs');",
      "fs.writeFileSync('/tmp/probe', process.env.NODE_NAME);",
      "if (fs.readFileSync('/tmp/probe', 'utf8') !== process.env.NODE_NAME) { console.log('/tmp lost what was written'); process.exit(1); }",
      "try { fs.writeFileSync('/probe', 'x'); console.log('the root filesystem is writable'); process.exit(1); } catch (err) { if (err.code !== 'EROFS') { console.log('writing / failed with ' + err.code + ', not EROFS'); process.exit(1); } }",
      "if (process.getuid() === 0) { console.log('runs as root'); process.exit(1); }",
    ].join(' ');
    await startController({
      containerChecks: [
        { name: 'scratch', image: `${image.repository}@${image.digest}`, command: [...node, scratch] },
        { name: 'disk', image: `${image.repository}@${image.digest}`, command: [...node, "console.log('disk /data is read-only'); process.exit(1)"] },
      ],
    });
    const name = await addRealNode('real-cc');
    const last = (await firstAttempt(name)).status?.lastAttempt;
    expect(last?.reason, JSON.stringify(last)).toBe('ChecksFailed');
    expect(last?.message, JSON.stringify(last)).toContain('disk /data is read-only');
    // Every check ran to its end: the other container check and the worker's own passed.
    const checks = Object.fromEntries((last?.checks ?? []).map((c) => [c.name, c.ok]));
    expect(checks, JSON.stringify(last)).toMatchObject({ scratch: true, disk: false, dns: true, api: true, tcp: true, service: true, podnet: true });
    expect((await readNode(name))?.spec?.taints?.map((t) => t.key)).toContain(suite.h.taint.key);
  }, 420_000);

  it('a container check whose image does not exist fails the attempt at once with the pull error', async () => {
    const image = realNodeProductImage(repoRoot());
    // An image the registry does not have: containerd's pull fails, and so does the check, at once
    // (a check apart from the one above: an attempt ends at a check that cannot start, pod-result.ts,
    // which may be before the other checks finished).
    await startController({ containerChecks: [{ name: 'missing', image: `${image.repository.replace(/\/[^/]+$/, '/does-not-exist')}:v1` }] });
    const name = await addRealNode('real-pull');
    const { status } = await firstAttempt(name);
    const last = status?.lastAttempt;
    expect(last?.reason, JSON.stringify(last)).toBe('ChecksFailed');
    // At once, not when worker.startTimeout (120 s here) runs out.
    expect(last?.message, JSON.stringify(last)).toMatch(/missing: .*(ErrImagePull|ImagePullBackOff)/);
    expect(Date.parse(last?.finishedAt ?? '') - Date.parse(status?.firstLaunchAt ?? ''), JSON.stringify(status)).toBeLessThan(120_000);
    // The kubelet starts the containers in order, so the pull error comes after the worker started,
    // before or after it finished: finished, its checks passed; else the attempt says it ended without them.
    const own = Object.fromEntries((last?.checks ?? []).filter((c) => c.name !== 'missing').map((c) => [c.name, c.ok]));
    if (last?.message?.endsWith("(before the worker's checks finished)")) expect(own, JSON.stringify(last)).toEqual({});
    else expect(own, JSON.stringify(last)).toMatchObject({ dns: true, api: true, tcp: true, service: true, podnet: true });
    expect((await readNode(name))?.spec?.taints?.map((t) => t.key)).toContain(suite.h.taint.key);
  }, 420_000);

  it('kubectl logs and kubectl exec reach a pod on a real node through its kubelet', async () => {
    const image = realNodeProductImage(repoRoot());
    const name = await addRealNode('real-exec');
    await waitFor(async () => (await readNode(name))?.status?.conditions?.some((c) => c.type === 'Ready' && c.status === 'True'), `real node ${name} to be Ready`, 120_000);
    const pod = uniqueName('exec');
    await core().createNamespacedPod({
      namespace: suite.h.namespace,
      body: {
        metadata: { name: pod },
        spec: {
          nodeName: name,
          restartPolicy: 'Never',
          tolerations: [{ operator: 'Exists' }],
          containers: [{ name: 'main', image: `${image.repository}@${image.digest}`, command: ['/nodejs/bin/node', '-e', "console.log('hello from the image'); setTimeout(() => {}, 300000)"] }],
        },
      },
    });
    await waitFor(async () => (await core().readNamespacedPod({ namespace: suite.h.namespace, name: pod })).status?.phase === 'Running', `pod ${pod} to run on ${name}`, 120_000);
    const kubectl = (args: string[]) => exec(join(sandbox().state.binDir, 'kubectl'), ['--kubeconfig', sandbox().state.kubeconfig, '-n', suite.h.namespace, ...args], { timeout: 60_000 }).then((r) => r.stdout);
    expect(await waitFor(async () => ((await kubectl(['logs', pod])).includes('hello from the image') ? true : undefined), `kubectl logs ${pod}`, 30_000)).toBe(true);
    // The image's user, through exec.
    expect((await kubectl(['exec', pod, '--', '/nodejs/bin/node', '-e', 'console.log(process.getuid())'])).trim()).toBe('65532');
    await core().deleteNamespacedPod({ namespace: suite.h.namespace, name: pod, gracePeriodSeconds: 0 });
  }, 300_000);

  it('a node whose kube-proxy is stopped fails the checks that need Service routing, with a message naming kube-proxy, while a healthy node beside it opens', async () => {
    await startController();
    const [broken, healthy] = [await addRealNode('real-noproxy', ['kube-proxy-stopped']), await addRealNode('real-proxy')];

    await suite.h.waitForOpen([healthy], `the healthy real node ${healthy} to open`, 240_000);
    const failed = await verificationInPhase(broken, 'Failed', 240_000);
    const last = failed.status?.lastAttempt;
    expect(last?.reason, JSON.stringify(failed.status)).toBe('ChecksFailed');
    expect(last?.message).toMatch(/kube-proxy \(Service routing\) on this node/);
    // The API server answers directly from that node's pods: it is the Service path that is broken.
    expect(last?.message).toMatch(/the API server answers directly/);
    expect((await readNode(broken))?.spec?.taints?.map((t) => t.key)).toContain(suite.h.taint.key);
  }, 420_000);

  it('a node that drops its pods\' DNS traffic fails dns, naming the cluster DNS address it asked, and no check that needs no DNS', async () => {
    // A worker.timeout above the default 30 s: the test is about the checks' findings, and a worker
    // whose DNS queries are all dropped must report them before its deadline on a loaded machine.
    await startController({ timeout: '60s' });
    const broken = await addRealNode('real-nodns', ['dns-blocked']);
    const failed = await verificationInPhase(broken, 'Failed', 240_000);
    const checks = new Map((failed.status?.lastAttempt?.checks ?? []).map((c) => [c.name, c]));
    expect(checks.get('dns')?.ok, JSON.stringify(failed.status)).toBe(false);
    expect(checks.get('dns')?.error).toContain(`@${CLUSTER_DNS.ip}:53`);
    // The API through its Service and TCP need no DNS: they pass.
    expect(checks.get('api')?.ok).toBe(true);
    expect(checks.get('tcp')?.ok).toBe(true);
  }, 420_000);
});
