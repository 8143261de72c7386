// What the real-node test files share: a harness whose controller runs the worker from the image the
// real nodes pull, with a real cluster's start-up timeouts and CoreDNS's Service as the cluster DNS,
// and real nodes added with the harness's taint and label, removed with everything they made.
import { afterAll, afterEach, beforeAll } from 'vitest';
import { repoRoot, sandboxControl } from '@kube-node-ready/sandbox';
import { harness, type Harness } from '../../packages/controller/test/harness.js';
import { CLUSTER_DNS_SERVICE } from '../../packages/sandbox/src/coredns.js';
import { realNodeProductImage } from '../../packages/sandbox/src/real-node.js';
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
  beforeAll(async () => {
    h = await harness(prefix);
  }, 120_000);
  afterEach(async () => {
    await h?.stopAll();
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
      return name;
    },
    async removeRealNode(name) {
      await sandboxControl(sandbox().state.dir, 'POST', `/remove-real-node/${name}`, 120_000);
      added.delete(name);
    },
  };
}
