import { fileURLToPath } from 'node:url';
import { defineConfig } from 'vitest/config';
import { BaseSequencer, type TestSpecification } from 'vitest/node';

const pkg = (name: string) => fileURLToPath(new URL(`./packages/${name}/src/index.ts`, import.meta.url));

/**
 * The sandbox files that take longest, longest first (by the durations a run records in
 * .test-results.json). Vitest runs the longest files first only when its results cache knows them,
 * which a fresh clone's does not; it then starts with the largest files, and a long file left for
 * last keeps one worker busy alone at the end while the others have nothing left to run.
 */
const SLOWEST_FIRST = [
  'real-nodes/real-node.sandbox',
  'real-nodes/faults.sandbox',
  'real-nodes/karpenter.sandbox',
  // Real nodes too: done before the serial project's real-node file takes the machine's real nodes.
  'real-nodes/daemonset.sandbox',
  'verification/cluster-wide.sandbox',
  'verification/queue.sandbox',
  'chart/troubleshooting.sandbox',
  'sandbox/src/cluster.sandbox',
  'chart/alerts-dns-outage.serial.sandbox',
  'verification/cluster-dns.serial.sandbox',
  'verification/verification.sandbox',
  'remediation/leader-change.sandbox',
  'chart/chart.sandbox',
  'sandbox/src/kubelet-lifecycle.sandbox',
  'chart/alerts.live.sandbox',
  'verification/resilience.sandbox',
  'verification/failures.sandbox',
  'verification/refused.sandbox',
  'sandbox/src/lifecycle.sandbox',
];

/**
 * After every other file of their project: the serial project runs beside the sandbox project, and
 * its real nodes wait for the sandbox project's real-node files (first there) to finish
 * (test/real-nodes/machine-lock.ts).
 */
const LAST = ['real-nodes/coredns.serial.sandbox'];

/** Vitest's order (projects, groups, its cache), except that within a project SLOWEST_FIRST go first and LAST last. */
class SlowestFirst extends BaseSequencer {
  override async sort(files: TestSpecification[]): Promise<TestSpecification[]> {
    const sorted = await super.sort(files);
    const rank = (f: TestSpecification): number => {
      if (LAST.some((part) => f.moduleId.includes(part))) return SLOWEST_FIRST.length + 1;
      const i = SLOWEST_FIRST.findIndex((part) => f.moduleId.includes(part));
      return i < 0 ? SLOWEST_FIRST.length : i;
    };
    // Projects keep their places (Vitest groups them); within one, by rank, then Vitest's order.
    const project = new Map<string, number>();
    sorted.forEach((f, i) => project.set(f.project.name, project.get(f.project.name) ?? i));
    return sorted
      .map((f, i) => ({ f, i }))
      .sort((x, y) => (project.get(x.f.project.name) ?? 0) - (project.get(y.f.project.name) ?? 0) || rank(x.f) - rank(y.f) || x.i - y.i)
      .map(({ f }) => f);
  }
}

// Two projects: fast unit tests (pure logic, real loopback servers), and sandbox tests that
// need the real control plane. The sandbox project starts one shared sandbox per run
// (test/global-setup.ts) and isolates tests by namespace and node names.
export default defineConfig({
  // Workspace packages resolve to their TypeScript sources (the `source` export condition elsewhere).
  resolve: {
    alias: [{ find: /^@kube-node-ready\/(core|worker|controller|sandbox|cli)$/, replacement: pkg('$1') }],
  },
  test: {
    sequence: { sequencer: SlowestFirst },
    projects: [
      {
        extends: true,
        test: {
          name: 'unit',
          sequence: { groupOrder: 0 },
          // Vitest's default is one worker less than the cores: on a 2-core machine the unit tests would
          // run one file at a time.
          maxWorkers: 2,
          // Many unit tests run real binaries (helm, promtool, go): on a loaded 2-core machine beside
          // the sandbox suite, several of them in one test can outlast Vitest's default 5 s.
          testTimeout: 30_000,
          include: ['packages/*/src/**/*.test.ts', 'test/unit/**/*.test.ts', 'test/chart/**/*.test.ts'],
          exclude: ['**/*.sandbox.test.ts', '**/node_modules/**'],
        },
      },
      {
        extends: true,
        test: {
          name: 'sandbox',
          sequence: { groupOrder: 1 },
          include: ['packages/*/src/**/*.sandbox.test.ts', 'test/**/*.sandbox.test.ts'],
          exclude: ['**/*.serial.sandbox.test.ts', '**/node_modules/**'],
          globalSetup: ['test/global-setup.ts'],
          testTimeout: 120_000,
          hookTimeout: 180_000,
          // One sandbox per run; test files share it, so keep file parallelism modest on 2 cores.
          maxWorkers: 2,
        },
      },
      {
        // Tests that disrupt the whole cluster (restart the apiserver, flip cluster-wide faults) run
        // one file at a time, on a sandbox of their own; make test runs this project beside the
        // sandbox project, as a vitest run of its own.
        extends: true,
        test: {
          name: 'sandbox-serial',
          sequence: { groupOrder: 2 },
          include: ['packages/*/src/**/*.serial.sandbox.test.ts', 'test/**/*.serial.sandbox.test.ts'],
          globalSetup: ['test/global-setup.ts'],
          testTimeout: 180_000,
          hookTimeout: 180_000,
          fileParallelism: false,
          maxWorkers: 1,
        },
      },
    ],
  },
});
