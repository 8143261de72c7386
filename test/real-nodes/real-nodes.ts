// What the real-node test files share: a harness whose controller runs the worker from the image the
// real nodes pull, with a real cluster's start-up timeouts and CoreDNS's Service as the cluster DNS,
// and real nodes added with the harness's taint and label, removed with everything they made.
import { existsSync, readFileSync } from 'node:fs';
import { basename, join } from 'node:path';
import { afterAll, afterEach, beforeAll } from 'vitest';
import { repoRoot, sandboxControl } from '@kube-node-ready/sandbox';
import { harness, type Harness } from '../../packages/controller/test/harness.js';
import { CLUSTER_DNS_SERVICE } from '../../packages/sandbox/src/coredns.js';
import { REAL_NODE_RANGE, realNodeBridge, realNodeProductImage } from '../../packages/sandbox/src/real-node.js';
import { run } from '../../packages/sandbox/src/proc.js';
import { NETNS_DIR, NFT } from '../../packages/sandbox/src/runtime/pod-network.js';
import { deleteNode, sandbox, uniqueName } from '../sandbox.js';
import { holdRealNodeLock } from './machine-lock.js';

export interface RealNodeSuite {
  readonly h: Harness;
  /**
   * A controller whose workers run the image from the registry, with the start-up timeouts of a
   * real cluster rather than the harness's short ones (a node's first pod waits for its image pull);
   * `worker` adds to or overrides that worker configuration.
   */
  startController(worker?: Record<string, unknown>): Promise<{ repository: string; digest: string }>;
  /** A real node with the harness's taint and label (and these faults, `F` or `F=VALUE`); its name. */
  addRealNode(prefix: string, faults?: string[]): Promise<string>;
  /** Stops a real node the suite added and removes everything it made; it is not removed again at the end. */
  removeRealNode(name: string): Promise<void>;
  /** Each real node's directory and network namespace on the machine, as the sandbox reported them. */
  readonly made: ReadonlyMap<string, { dir: string; netns: string }>;
}

/** Registers the file's hooks: the machine's real-node lock, one harness, one controller per test, the real nodes removed at the end. */
export function realNodeSuite(prefix: string): RealNodeSuite {
  holdRealNodeLock();
  let h: Harness | undefined;
  const made = new Map<string, { dir: string; netns: string }>();
  /** Added and not removed yet: removed at the end. */
  const added = new Set<string>();
  /** Added by the running test: what a failure of it prints (their logs go with them at the end). */
  const addedByTest = new Set<string>();
  beforeAll(async () => {
    h = await harness(prefix);
  }, 120_000);
  afterEach(async (ctx) => {
    await h?.stopAll();
    if (ctx.task.result?.state === 'fail') ctx.task.meta.diagnostics = await describeRealNodes([...addedByTest].flatMap((n) => (made.has(n) ? [[n, made.get(n)!] as const] : [])));
    addedByTest.clear();
  });
  afterAll(async () => {
    await h?.stopAll();
    for (const n of added) {
      await sandboxControl(sandbox().state.dir, 'POST', `/remove-real-node/${n}`).catch(() => undefined);
      await deleteNode(n);
    }
    await h?.cleanup();
  });
  const harnessOf = (): Harness => {
    if (!h) throw new Error('the real-node suite is used before its beforeAll ran');
    return h;
  };
  return {
    get h() {
      return harnessOf();
    },
    made,
    async startController(worker = {}) {
      const image = realNodeProductImage(repoRoot());
      await harnessOf().start({
        worker: { image: { repository: image.repository, digest: image.digest }, scheduleTimeout: '60s', startTimeout: '120s', ...worker },
        // Real nodes ask real CoreDNS: the "no ready endpoint" evidence reads its Service.
        reconciliation: { clusterDnsService: CLUSTER_DNS_SERVICE },
      });
      return image;
    },
    async addRealNode(namePrefix, faults = []) {
      const { taint: t, selector } = harnessOf();
      const name = uniqueName(namePrefix);
      const query = new URLSearchParams([
        ['taint', `${t.key}=${t.value}:${t.effect}`],
        ['label', `${selector.key}=${selector.value}`],
        ...faults.map((f): [string, string] => ['fault', f]),
      ]);
      made.set(name, (await sandboxControl(sandbox().state.dir, 'POST', `/add-real-node/${name}?${query.toString()}`, 300_000)) as { dir: string; netns: string });
      added.add(name);
      addedByTest.add(name);
      return name;
    },
    async removeRealNode(name) {
      await sandboxControl(sandbox().state.dir, 'POST', `/remove-real-node/${name}`, 120_000);
      added.delete(name);
    },
  };
}

declare module 'vitest' {
  interface TaskMeta {
    /** What a failed test saw of the machine, printed under its error by scripts/test-summary.mjs. */
    diagnostics?: string;
  }
}

const TAIL_LINES = 12;

/**
 * The state of real nodes for a failed test's report, since the nodes and their logs go at the end:
 * the end of each node's kubelet, containerd and kube-proxy logs; its routes, link, neighbours and
 * nftables tables; whether it reaches the API server now; the sandbox's side of its link.
 */
async function describeRealNodes(nodes: ReadonlyArray<readonly [string, { dir: string; netns: string }]>): Promise<string> {
  const parts: string[] = [];
  for (const [name, { dir, netns }] of nodes) {
    parts.push(`real node ${name} (${dir}, namespace ${netns}):`);
    for (const file of ['kubelet.log', 'containerd.log', 'kube-proxy.log']) {
      const path = join(dir, file);
      const lines = existsSync(path) ? readFileSync(path, 'utf8').trimEnd().split('\n').slice(-TAIL_LINES) : ['(gone)'];
      parts.push(`  ${file}, last ${TAIL_LINES} lines:`, ...lines.map((l) => `    ${l.slice(0, 400)}`));
    }
    const lines = (r: { stdout: string; stderr: string }) => (r.stdout + r.stderr).trimEnd().split('\n').map((l) => `    ${l}`);
    const inNode = async (argv: string[]) => lines(await run('nsenter', [`--net=${join(NETNS_DIR, netns)}`, '--', ...argv]));
    // The sandbox's end of the node's link (real-node.ts: knr<slot>n<index>, the index in its directory's name).
    const { netns: sandboxNs, slot, advertiseAddress, apiPort } = sandbox().layout;
    const veth = `knr${slot}n${basename(dir).slice(1)}`;
    const healthz = `https://${advertiseAddress}:${apiPort}/healthz`;
    parts.push(
      '  ip route:',
      ...(await inNode(['ip', 'route'])),
      '  ip -s link show eth0:',
      ...(await inNode(['ip', '-s', 'link', 'show', 'eth0'])),
      '  ip neigh:',
      ...(await inNode(['ip', 'neigh'])),
      '  nft list tables:',
      ...(await inNode([NFT, 'list', 'tables'])),
      // Is the node's own path to the API server alive now (its pods' path goes through it)?
      `  the API server from the node (curl ${healthz}):`,
      ...(await inNode(['curl', '-sk', '-m', '5', '-o', '/dev/null', '-w', 'HTTP %{http_code} in %{time_total}s', healthz])),
      `  the sandbox's side (namespace ${sandboxNs}): routes to the real nodes, ${veth}, neighbours:`,
      ...lines(await run('ip', ['-n', sandboxNs, 'route', 'show', 'root', REAL_NODE_RANGE])),
      ...lines(await run('ip', ['-n', sandboxNs, '-s', 'link', 'show', veth])),
      ...lines(await run('ip', ['-n', sandboxNs, 'neigh', 'show', 'dev', realNodeBridge(slot)])),
    );
  }
  return parts.join('\n');
}
