// The image users run, as users run it: `make image`'s OCI layout pushed to a real registry on
// loopback (CNCF Distribution) and pulled back by digest; a real container runtime (containerd and
// runc) pulls the amd64 image by digest and runs it as its own user (65532, from the image config) on
// a read-only root, with the paths a kubelet gives a container (the service-account token, ca.crt and
// namespace, /etc/resolv.conf, /dev/termination-log) mounted where the product reads them by
// default, and no KNR_* variable set. The worker checks the sandbox's network from the sandbox's
// network namespace (where a hostNetwork pod runs); the controller verifies and opens a node; the
// DaemonSet mode's agent opens its own node. The arm64 image's Node.js runs under qemu.
import { execFile, execFileSync } from 'node:child_process';
import { existsSync, mkdirSync, mkdtempSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { promisify } from 'node:util';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import YAML from 'yaml';
import { parseSummary } from '@kube-node-ready/core';
import { Containerd, certPaths, k8s, repoRoot, startRegistry, writePodFiles, type Mount, type PodFiles, type Registry } from '@kube-node-ready/sandbox';
import { harness, readNode, type Harness } from '../../packages/controller/test/harness.js';
import { addNode, core, deleteNode, sandbox, uniqueName, waitFor } from '../sandbox.js';
import { WORKER_SA, workerNamespace, type WorkerNamespace } from '../../packages/worker/src/testing/sandbox-worker.js';

const exec = promisify(execFile);
const root = repoRoot();
const OCI_TAR = join(root, 'dist', 'kube-node-ready-oci.tar');

interface BuiltImage {
  index: string;
  version: string;
  revision: string;
  node: string;
  platforms: Array<{ platform: string; digest: string; entrypoint: string[]; user: string }>;
}

let built: BuiltImage;
let tools = '';
let work = '';
let registry: Registry;
let containerd: Containerd;
/** The amd64 image as containerd knows it: REGISTRY/kube-node-ready@<index digest>. */
let ref = '';
let entrypoint: string[] = [];
let ns: WorkerNamespace;

const crane = (args: string[]) => exec(join(tools, 'crane'), args, { maxBuffer: 64 << 20 }).then((r) => r.stdout.trim());

beforeAll(async () => {
  // `make test` builds the image first; a lone run builds it here.
  if (!existsSync(OCI_TAR)) execFileSync('make', ['--no-print-directory', 'image'], { cwd: root, stdio: 'inherit' });
  built = JSON.parse(readFileSync(OCI_TAR.replace(/\.tar$/, '.json'), 'utf8')) as BuiltImage;
  tools = execFileSync('bash', [join(root, 'packages/sandbox/go/build.sh'), 'crane', 'registry'], { encoding: 'utf8' }).trim().split('\n').pop()!;
  work = mkdtempSync(join(tmpdir(), 'knr-image-'));
  registry = await startRegistry(join(tools, 'registry'), join(work, 'registry'));
  containerd = await Containerd.start(join(work, 'containerd'));
  ns = await workerNamespace('image');
}, 300_000);

afterAll(async () => {
  await ns?.cleanup();
  await containerd?.stop();
  await registry?.stop();
  if (work) rmSync(work, { recursive: true, force: true });
});

describe('the image in a registry', () => {
  it('pushes to a loopback registry with the digest make image printed, and pulls back by that digest, every blob intact', async () => {
    const layout = join(work, 'layout');
    mkdirSync(layout);
    execFileSync('tar', ['-xf', OCI_TAR, '-C', layout]);
    const pushed = await crane(['push', layout, `${registry.address}/kube-node-ready:${built.version}`]);
    expect(pushed.split('\n').pop()).toBe(`${registry.address}/kube-node-ready@${built.index}`);
    ref = `${registry.address}/kube-node-ready@${built.index}`;

    // Pulled back by digest: the same index, both platforms, each manifest and blob validated against its digest.
    const index = JSON.parse(await crane(['manifest', ref])) as { manifests: Array<{ digest: string; platform: { os: string; architecture: string } }> };
    expect(index.manifests.map((m) => `${m.platform.os}/${m.platform.architecture}`)).toEqual(['linux/amd64', 'linux/arm64']);
    expect(index.manifests.map((m) => m.digest)).toEqual(built.platforms.map((p) => p.digest));
    const back = join(work, 'pulled');
    await crane(['pull', '--format', 'oci', ref, back]);
    const backIndex = JSON.parse(readFileSync(join(back, 'index.json'), 'utf8')) as { manifests: Array<{ digest: string }> };
    expect(backIndex.manifests.map((m) => m.digest)).toEqual([built.index]);
    for (const p of built.platforms) await crane(['validate', '--remote', `${registry.address}/kube-node-ready@${p.digest}`]);

    // The config says who runs it and how, as image/image.yaml does.
    const def = YAML.parse(readFileSync(join(root, 'image', 'image.yaml'), 'utf8')) as { user: string; entrypoint: string[]; workdir: string };
    for (const platform of ['linux/amd64', 'linux/arm64']) {
      const config = JSON.parse(await crane(['config', '--platform', platform, ref])) as { architecture: string; config: { User: string; Entrypoint: string[]; WorkingDir: string; Labels: Record<string, string> } };
      expect(config.architecture).toBe(platform.split('/')[1]);
      expect(config.config).toMatchObject({ User: def.user, Entrypoint: def.entrypoint, WorkingDir: def.workdir });
      expect(config.config.Labels).toMatchObject({ 'org.opencontainers.image.version': built.version, 'org.opencontainers.image.revision': built.revision, 'org.opencontainers.image.licenses': 'Apache-2.0' });
    }
    entrypoint = def.entrypoint;

    // containerd pulls the amd64 image by the index digest, as a kubelet would.
    await containerd.pull(ref, 'linux/amd64');
    const { stdout } = await containerd.ctr(['image', 'ls', '-q']);
    expect(stdout.split('\n')).toContain(ref);
  });
});

describe('the amd64 image run by containerd and runc, read-only root, its own user', () => {
  const needsImage = () => {
    if (!ref) throw new Error('the image was not pulled: see the first test');
  };

  it('runs its entrypoint: no arguments prints the usage (exit 2); --version names the version, commit and Node.js', async () => {
    needsImage();
    const bare = await containerd.run({ image: ref, id: uniqueName('knr-bare'), args: entrypoint, readOnlyRoot: true });
    expect(bare.exitCode, bare.stderr).toBe(2);
    expect(bare.stdout).toContain('usage: kube-node-ready <command>');
    const v = await containerd.run({ image: ref, id: uniqueName('knr-version'), args: [...entrypoint, '--version'], readOnlyRoot: true });
    expect(v.exitCode, v.stderr).toBe(0);
    expect(v.stdout.trim()).toBe(`kube-node-ready ${built.version} (commit ${built.revision.slice(0, 12)}, node v${built.node})`);
  });

  it('imports from the OCI layout tarball itself, no registry: ctr image import names the index and runs it', async () => {
    needsImage();
    const name = 'docker.io/library/kube-node-ready:imported';
    await containerd.ctr(['image', 'import', '--index-name', name, '--platform', 'linux/amd64', OCI_TAR], 300_000);
    // --index-name names the layout's own index.json, whose one entry is the image index make image built.
    const { stdout } = await containerd.ctr(['image', 'ls']);
    const top = /sha256:[0-9a-f]{64}/.exec(stdout.split('\n').find((l) => l.startsWith(`${name} `)) ?? '')?.[0];
    expect(top, stdout).toBeDefined();
    const layoutIndex = JSON.parse((await containerd.ctr(['content', 'get', top!])).stdout) as { manifests: Array<{ digest: string }> };
    expect(layoutIndex.manifests.map((m) => m.digest)).toEqual([built.index]);
    const v = await containerd.run({ image: name, id: uniqueName('knr-imported'), args: [...entrypoint, '--version'], readOnlyRoot: true });
    expect(v.exitCode, v.stderr).toBe(0);
    expect(v.stdout).toContain(`kube-node-ready ${built.version}`);
  });

  it('checks a controller configuration without a cluster: --check-config exits 0 for a good file, 2 naming the field for a bad one', async () => {
    needsImage();
    const dir = join(work, 'check-config');
    mkdirSync(dir, { recursive: true });
    writeFileSync(join(dir, 'good.yaml'), YAML.stringify({ worker: { namespace: 'kube-node-ready-worker' }, reconciliation: { maxRetries: 3 } }));
    writeFileSync(join(dir, 'bad.yaml'), YAML.stringify({ reconciliation: { maxRetries: -1 } }));
    const mounts: Mount[] = [{ source: dir, destination: '/etc/kube-node-ready', readOnly: true }];
    const good = await containerd.run({ image: ref, id: uniqueName('knr-cfg'), args: [...entrypoint, 'controller', '--check-config', '--config', '/etc/kube-node-ready/good.yaml'], mounts, readOnlyRoot: true });
    expect(good.exitCode, `${good.stdout}\n${good.stderr}`).toBe(0);
    expect(good.stdout).toContain('configuration OK: /etc/kube-node-ready/good.yaml');
    const bad = await containerd.run({ image: ref, id: uniqueName('knr-cfg'), args: [...entrypoint, 'controller', '--check-config', '--config', '/etc/kube-node-ready/bad.yaml'], mounts, readOnlyRoot: true });
    expect(bad.exitCode, `${bad.stdout}\n${bad.stderr}`).toBe(2);
    expect(bad.stderr).toContain('reconciliation.maxRetries');
  });

  it('runs the worker against the sandbox from the real paths: token, ca.crt and namespace, resolv.conf, termination log', async () => {
    needsImage();
    const L = sandbox().layout;
    const node = await addNode({ prefix: 'img-worker' });
    const pod = uniqueName('worker-image');
    const files = await podFiles(ns.namespace, WORKER_SA, pod);
    const run = await containerd.run({
      image: ref,
      id: pod,
      args: [...entrypoint, 'worker', '--checks', 'dns,api,tcp,service,podnet', '--timeout', '30s', '--check-timeout', '10s'],
      env: podEnv(node, pod, ns.namespace),
      mounts: files.mounts,
      netns: `/run/netns/${L.netns}`,
      readOnlyRoot: true,
      timeoutMs: 90_000,
    });
    const what = `exit ${run.exitCode}\nstdout:\n${run.stdout}\nstderr:\n${run.stderr}\ntermination log: ${readFileSync(files.terminationLog, 'utf8')}`;
    expect(run.exitCode, what).toBe(0);
    // The summary went to /dev/termination-log, the file a kubelet reads.
    const parsed = parseSummary(readFileSync(files.terminationLog, 'utf8'));
    expect(parsed.ok, what).toBe(true);
    if (!parsed.ok) return;
    expect(parsed.summary.node).toBe(node);
    expect(parsed.summary.checks.map((c) => [c.name, c.ok])).toEqual(['dns', 'api', 'tcp', 'service', 'podnet'].map((c) => [c, true]));
    // What it read from those paths: the nameserver of our resolv.conf, the API through the
    // kubernetes Service with the mounted token (an authenticated read) and CA.
    const lines = run.stdout.split('\n').filter((l) => l.startsWith('{')).map((l) => JSON.parse(l) as Record<string, unknown>);
    const details = (check: string) => lines.find((l) => l.check === check && l.details !== undefined)?.details as Record<string, unknown> | undefined;
    expect(details('dns')?.nameservers, what).toEqual([`${L.clusterDnsIp}:53`]);
    expect(details('api'), what).toMatchObject({ server: `${L.kubernetesServiceIp}:443`, version: sandbox().state.kubernetesVersion });
    expect(details('api')?.authenticatedMs, what).toEqual(expect.any(Number));
    await deleteNode(node);
  });

  describe('the controller and the agent, against the sandbox', () => {
    let h: Harness;
    const started: Array<{ stop(): Promise<void> }> = [];

    beforeAll(async () => {
      h = await harness('image');
    }, 120_000);
    afterAll(async () => {
      for (const s of started) await s.stop();
      await h?.cleanup();
    });

    it('the controller (in-cluster config from the mounted token) launches a worker for a tainted node and opens it; its process is 65532 with no KNR_* variable', async () => {
      needsImage();
      const sa = await adminServiceAccount(h.namespace, 'knr-image-controller');
      const files = await podFiles(h.namespace, sa, 'controller', { config: YAML.stringify(controllerConfig(h)) });
      const id = uniqueName('knr-controller');
      const ctl = await containerd.start({
        image: ref,
        id,
        args: [...entrypoint, 'controller', '--config', '/etc/kube-node-ready/config.yaml'],
        env: { KUBERNETES_SERVICE_HOST: sandbox().layout.kubernetesServiceIp, KUBERNETES_SERVICE_PORT: '443' },
        mounts: files.mounts,
        netns: `/run/netns/${sandbox().layout.netns}`,
        readOnlyRoot: true,
      });
      started.push(ctl);
      try {
        await controllerOpens(ctl);
      } finally {
        await ctl.stop();
      }
    });

    async function controllerOpens(ctl: { pid: number; logs(): string }): Promise<void> {
      const status = readFileSync(`/proc/${ctl.pid}/status`, 'utf8');
      expect(/^Uid:\s+(\d+)/m.exec(status)?.[1]).toBe('65532');
      expect(/^Gid:\s+(\d+)/m.exec(status)?.[1]).toBe('65532');
      const environ = readFileSync(`/proc/${ctl.pid}/environ`, 'utf8').split('\0');
      expect(environ.filter((e) => e.startsWith('KNR_'))).toEqual([]);

      const node = await h.addNode({ prefix: 'img-ctl' });
      await withLog(h.waitForOpen([node], `the controller run from the image to open ${node}`, 120_000), 'controller', ctl.logs);
      const opened = await readNode(node);
      expect((opened?.spec?.taints ?? []).map((t) => t.key)).not.toContain(h.taint.key);
      // The controller in the container did it: its log names the node it opened (the line may reach the log file just after the write).
      const opener = new RegExp(`"node":"${node}".*"msg":"node passed and was opened"`);
      await waitFor(async () => opener.test(ctl.logs()), `the controller's log to say it opened ${node}`, 10_000).catch((err: Error) => {
        throw new Error(`${err.message}\ncontroller log (last 20 lines):\n${ctl.logs().split('\n').slice(-20).join('\n')}`, { cause: err });
      });
    }

    it('the agent (DaemonSet mode) runs the checks in its own process and opens the node it runs on', async () => {
      needsImage();
      const sa = await adminServiceAccount(h.namespace, 'knr-image-agent');
      const cfg = controllerConfig(h);
      const files = await podFiles(h.namespace, sa, 'agent', { config: YAML.stringify(cfg) });
      const node = await h.addNode({ prefix: 'img-agent' });
      const id = uniqueName('knr-agent');
      const agent = await containerd.start({
        image: ref,
        id,
        args: [...entrypoint, 'agent', '--config', '/etc/kube-node-ready/config.yaml'],
        env: podEnv(node, id, h.namespace),
        mounts: files.mounts,
        netns: `/run/netns/${sandbox().layout.netns}`,
        readOnlyRoot: true,
      });
      started.push(agent);
      await withLog(h.waitForOpen([node], `the agent run from the image to open ${node}`, 120_000), 'agent', agent.logs);
      // The agent in the container did it, after its own checks passed.
      expect(agent.logs()).toMatch(new RegExp(`"node":"${node}".*"check":"dns","ok":true`));
      await waitFor(async () => /"msg":"node passed and was opened"/.test(agent.logs()), 'the agent to log that it opened the node', 10_000);
    });
  });
});

describe('the arm64 image', () => {
  it("runs its Node.js and the product under qemu-aarch64, with the image's root as its library root", async () => {
    if (!ref) throw new Error('the image was not pushed: see the first test');
    const rootfs = join(work, 'arm64-root');
    mkdirSync(rootfs);
    // The arm64 image's file system, as crane flattens its layers.
    await exec('bash', ['-c', `"$1" export --platform linux/arm64 "$2" - | tar -x -C "$3"`, '-', join(tools, 'crane'), ref, rootfs], { maxBuffer: 1 << 20 });
    const file = await exec('file', ['-b', join(rootfs, 'nodejs/bin/node')]).then((r) => r.stdout, () => '');
    if (file) expect(file).toContain('aarch64');
    const node = await exec('qemu-aarch64-static', ['-L', rootfs, join(rootfs, 'nodejs/bin/node'), '--version']);
    expect(node.stdout.trim()).toBe(`v${built.node}`);
    expect(built.node.split('.')[0]).toBe('24');
    const product = await exec('qemu-aarch64-static', ['-L', rootfs, join(rootfs, 'nodejs/bin/node'), join(rootfs, 'app/kube-node-ready.mjs'), '--version']);
    expect(product.stdout.trim()).toBe(`kube-node-ready ${built.version} (commit ${built.revision.slice(0, 12)}, node v${built.node})`);
  });
});

// ---------------------------------------------------------------------------------------------

/** On failure, the error with the last lines the container logged. */
async function withLog(p: Promise<void>, what: string, logs: () => string): Promise<void> {
  try {
    await p;
  } catch (err) {
    throw new Error(`${err instanceof Error ? err.message : String(err)}\n${what} log (last 40 lines):\n${logs().split('\n').slice(-40).join('\n')}`, { cause: err });
  }
}

/** What a kubelet puts in a pod's environment from the downward API. */
function podEnv(node: string, pod: string, namespace: string): Record<string, string> {
  return { NODE_NAME: node, POD_NAME: pod, POD_NAMESPACE: namespace, KUBERNETES_SERVICE_HOST: sandbox().layout.kubernetesServiceIp, KUBERNETES_SERVICE_PORT: '443' };
}

/** A TokenRequest token of `serviceAccount` and the other files a kubelet gives the pod's container, with their mounts. */
async function podFiles(namespace: string, serviceAccount: string, pod: string, opts: { config?: string } = {}): Promise<PodFiles> {
  const L = sandbox().layout;
  const token = await core().createNamespacedServiceAccountToken({ name: serviceAccount, namespace, body: { spec: { audiences: [], expirationSeconds: 3600 } } });
  return writePodFiles(join(work, 'pods', pod), {
    token: token.status?.token ?? '',
    caCert: readFileSync(certPaths(L.paths.certs).caCert, 'utf8'),
    namespace,
    clusterDomain: L.clusterDomain,
    nameserver: L.clusterDnsIp,
    ...(opts.config !== undefined ? { config: { 'config.yaml': opts.config } } : {}),
  });
}

/** A ServiceAccount bound to cluster-admin: the image is under test here, not the chart's RBAC (test/chart covers that). */
async function adminServiceAccount(namespace: string, name: string): Promise<string> {
  await core().createNamespacedServiceAccount({ namespace, body: { metadata: { name } } });
  await sandbox()
    .kc.makeApiClient(k8s.RbacAuthorizationV1Api)
    .createClusterRoleBinding({
      body: {
        metadata: { name: `${name}-${namespace}` },
        roleRef: { apiGroup: 'rbac.authorization.k8s.io', kind: 'ClusterRole', name: 'cluster-admin' },
        subjects: [{ kind: 'ServiceAccount', name, namespace }],
      },
    });
  await waitFor(async () => (await core().readNamespacedServiceAccount({ namespace, name }), true), `ServiceAccount ${namespace}/${name}`);
  return name;
}

/** The harness's isolated configuration (its taint, label, condition, namespace, Lease), as a file. */
function controllerConfig(h: Harness): Record<string, unknown> {
  return {
    worker: { image: { repository: 'kube-node-ready', tag: 'dev' }, namespace: h.namespace, priorityClassName: '', timeout: '30s', checks: { checkTimeout: '10s' } },
    reconciliation: { initialBackoff: '1s', maxBackoff: '2s', maxRetries: 1 },
    nodeManagement: { taints: [h.taint], verifiedLabel: h.verifiedLabel, condition: { type: h.conditionType }, nodeSelector: `${h.selector.key}=${h.selector.value}` },
    leaderElection: { leaseName: `knr-image-${h.id}`, namespace: h.namespace },
    metrics: { bindAddress: '127.0.0.1:0' },
  };
}
