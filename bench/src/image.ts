// What a new node pays for the image: the size of each platform image (compressed, as pulled, and
// unpacked), the time containerd takes to pull the amd64 image from a registry on loopback into an
// empty content store and snapshotter (a node's cold cache) and to start it, and the worker's wall
// time and memory when it runs from the image against the bench sandbox (containerd and runc, a
// read-only root, the real paths; as test/image/image.sandbox.test.ts runs it). Uses the image
// `make image` built (dist/kube-node-ready-oci.*); runs on the idle sandbox of the memory scenario.
import { execFile, execFileSync } from 'node:child_process';
import { existsSync, mkdirSync, mkdtempSync, readFileSync, rmSync, statSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { promisify } from 'node:util';
import { Containerd, certPaths, k8s, sandboxLayout, startRegistry, writePodFiles, type SandboxState } from '@kube-node-ready/sandbox';
import type { BenchEnv } from './burst.js';
import { median } from './stats.js';
import { round } from './util.js';

const exec = promisify(execFile);

export interface ImageResult {
  index?: string;
  platforms?: Array<{ platform: string; digest: string; compressedMiB: number; uncompressedMiB: number }>;
  /** dist/kube-node-ready-oci.tar, both platforms. */
  layoutTarMiB?: number;
  /** `ctr image pull` of the amd64 image into an empty containerd (content fetched and unpacked), per run. */
  coldPullMs?: number[];
  /** `ctr run --rm ... --version`: container created, started, exited and removed, per run. */
  startMs?: number[];
  /** The worker (all five checks) run from the image against the sandbox. */
  worker?: { runs: number; wallMsMedian: number; wallMsMax: number; peakRssMiBMax: number; peakChargedMiBMax: number; exitCodes: number[] };
  error?: string;
}

interface Built {
  index: string;
  platforms: Array<{ platform: string; digest: string; compressedBytes: number; uncompressedBytes: number }>;
  entrypoint?: string[];
}

export async function runImageBench(env: BenchEnv, state: SandboxState, kc: k8s.KubeConfig, runs: number): Promise<ImageResult> {
  const tar = join(env.root, 'dist', 'kube-node-ready-oci.tar');
  const meta = tar.replace(/\.tar$/, '.json');
  if (!existsSync(tar) || !existsSync(meta)) return { error: `${tar} is missing: run make image (make bench does)` };
  const built = JSON.parse(readFileSync(meta, 'utf8')) as Built & { platforms: Array<{ entrypoint: string[] }> };
  const mib = (b: number) => round(b / 2 ** 20, 1);
  const result: ImageResult = {
    index: built.index,
    layoutTarMiB: mib(statSync(tar).size),
    platforms: built.platforms.map((p) => ({ platform: p.platform, digest: p.digest, compressedMiB: mib(p.compressedBytes), uncompressedMiB: mib(p.uncompressedBytes) })),
  };
  const entrypoint = built.platforms[0]!.entrypoint;
  const work = mkdtempSync(join(tmpdir(), 'knr-bench-image-'));
  let registry: Awaited<ReturnType<typeof startRegistry>> | undefined;
  let containerd: Containerd | undefined;
  try {
    const tools = execFileSync('bash', [join(env.root, 'packages/sandbox/go/build.sh'), 'crane', 'registry'], { encoding: 'utf8', stdio: ['ignore', 'pipe', 'ignore'] }).trim().split('\n').pop()!;
    registry = await startRegistry(join(tools, 'registry'), join(work, 'registry'));
    const layout = join(work, 'layout');
    mkdirSync(layout);
    execFileSync('tar', ['-xf', tar, '-C', layout]);
    await exec(join(tools, 'crane'), ['push', layout, `${registry.address}/kube-node-ready:bench`]);
    const ref = `${registry.address}/kube-node-ready@${built.index}`;

    // Cold pulls: a containerd with an empty store each time.
    result.coldPullMs = [];
    result.startMs = [];
    for (let i = 0; i < runs; i++) {
      const c = await Containerd.start(join(work, `containerd-${i}`));
      try {
        result.coldPullMs.push(await c.pull(ref, 'linux/amd64'));
        const t = Date.now();
        const v = await c.run({ image: ref, id: `knr-start-${i}`, args: [...entrypoint, '--version'], readOnlyRoot: true });
        if (v.exitCode !== 0) throw new Error(`--version exited ${v.exitCode}: ${v.stderr}`);
        result.startMs.push(Date.now() - t);
      } finally {
        await c.stop();
      }
    }
    env.out(`image: cold pull of the amd64 image from loopback ${result.coldPullMs.map((m) => `${(m / 1000).toFixed(1)}s`).join(', ')}; start and exit (--version) ${result.startMs.map((m) => `${m} ms`).join(', ')}`);

    // The worker from the image against the sandbox, from the sandbox's network namespace.
    containerd = await Containerd.start(join(work, 'containerd'));
    await containerd.pull(ref, 'linux/amd64');
    const layoutS = sandboxLayout(env.sandboxDir, env.slot);
    const namespace = await workerServiceAccount(kc);
    const core = kc.makeApiClient(k8s.CoreV1Api);
    const node = (await core.listNode()).items[0]?.metadata?.name ?? 'bench-node';
    const walls: number[] = [];
    const rss: number[] = [];
    const charged: number[] = [];
    const exitCodes: number[] = [];
    for (let i = 0; i < runs; i++) {
      const id = `knr-bench-worker-${i}`;
      const token = await core.createNamespacedServiceAccountToken({ name: 'worker', namespace, body: { spec: { audiences: [], expirationSeconds: 600 } } });
      const files = writePodFiles(join(work, 'pods', id), {
        token: token.status?.token ?? '',
        caCert: readFileSync(certPaths(layoutS.paths.certs).caCert, 'utf8'),
        namespace,
        clusterDomain: layoutS.clusterDomain,
        nameserver: layoutS.clusterDnsIp,
      });
      const t = Date.now();
      const task = await containerd.start({
        image: ref,
        id,
        args: [...entrypoint, 'worker', '--timeout', '30s'],
        env: { NODE_NAME: node, POD_NAME: id, POD_NAMESPACE: namespace, KUBERNETES_SERVICE_HOST: layoutS.kubernetesServiceIp, KUBERNETES_SERVICE_PORT: '443' },
        mounts: files.mounts,
        netns: `/run/netns/${state.netns}`,
        readOnlyRoot: true,
      });
      // VmHWM is the process's high-water mark: its last reading before the exit is its peak.
      let hwm = 0;
      const cgroup = `/sys/fs/cgroup/memory/${containerd.namespace}/${id}/memory.max_usage_in_bytes`;
      let maxUsage = 0;
      for (;;) {
        const status = readOr(`/proc/${task.pid}/status`);
        const m = /^VmHWM:\s+(\d+) kB/m.exec(status);
        if (m) hwm = Math.max(hwm, Number(m[1]) * 1024);
        maxUsage = Math.max(maxUsage, Number(readOr(cgroup) || 0));
        if (!status) break;
        if (Date.now() - t > 60_000) throw new Error(`the worker from the image ran past 60 s:\n${task.logs()}`);
        await new Promise((r) => setTimeout(r, 20));
      }
      walls.push(Date.now() - t);
      exitCodes.push(await task.reap());
      rss.push(hwm);
      charged.push(maxUsage);
    }
    result.worker = { runs, wallMsMedian: Math.round(median(walls) ?? 0), wallMsMax: Math.max(...walls), peakRssMiBMax: mib(Math.max(...rss)), peakChargedMiBMax: mib(Math.max(...charged)), exitCodes };
    env.out(`image: worker from the image: wall ${result.worker.wallMsMedian} ms (median of ${runs}), peak RSS ${result.worker.peakRssMiBMax} MiB, peak charged to its cgroup (with page cache) ${result.worker.peakChargedMiBMax} MiB, exit codes ${exitCodes.join(',')}`);
  } catch (err) {
    result.error = String(err).split('\n').slice(0, 5).join(' ');
    env.out(`image: ${result.error}`);
  } finally {
    await containerd?.stop();
    await registry?.stop();
    rmSync(work, { recursive: true, force: true });
  }
  return result;
}

function readOr(file: string): string {
  try {
    return readFileSync(file, 'utf8');
  } catch {
    return '';
  }
}

/** A namespace with a ServiceAccount `worker` that may read what the worker's checks read (docs/worker.md, RBAC). */
async function workerServiceAccount(kc: k8s.KubeConfig): Promise<string> {
  const namespace = 'knr-bench-image';
  const core = kc.makeApiClient(k8s.CoreV1Api);
  const rbac = kc.makeApiClient(k8s.RbacAuthorizationV1Api);
  const ignoreConflict = (err: unknown) => {
    if ((err as { code?: number }).code !== 409) throw err;
  };
  await core.createNamespace({ body: { metadata: { name: namespace } } }).catch(ignoreConflict);
  await core.createNamespacedServiceAccount({ namespace, body: { metadata: { name: 'worker' } } }).catch(ignoreConflict);
  await rbac
    .createClusterRole({
      body: {
        metadata: { name: 'knr-bench-image-worker' },
        rules: [
          { apiGroups: [''], resources: ['services'], verbs: ['get'] },
          { apiGroups: ['discovery.k8s.io'], resources: ['endpointslices'], verbs: ['list'] },
        ],
      },
    })
    .catch(ignoreConflict);
  await rbac
    .createClusterRoleBinding({
      body: {
        metadata: { name: 'knr-bench-image-worker' },
        roleRef: { apiGroup: 'rbac.authorization.k8s.io', kind: 'ClusterRole', name: 'knr-bench-image-worker' },
        subjects: [{ kind: 'ServiceAccount', name: 'worker', namespace }],
      },
    })
    .catch(ignoreConflict);
  return namespace;
}
