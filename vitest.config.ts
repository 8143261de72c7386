import { fileURLToPath } from 'node:url';
import { defineConfig } from 'vitest/config';

const pkg = (name: string) => fileURLToPath(new URL(`./packages/${name}/src/index.ts`, import.meta.url));

// Two projects: fast unit tests (pure logic, real loopback servers), and sandbox tests that
// need the real control plane. The sandbox project starts one shared sandbox per run
// (test/global-setup.ts) and isolates tests by namespace and node names.
export default defineConfig({
  // Workspace packages resolve to their TypeScript sources (the `source` export condition elsewhere).
  resolve: {
    alias: [{ find: /^@kube-node-ready\/(core|worker|controller|sandbox|cli)$/, replacement: pkg('$1') }],
  },
  test: {
    projects: [
      {
        extends: true,
        test: {
          name: 'unit',
          sequence: { groupOrder: 0 },
          // Vitest's default is one worker less than the cores: 1 here, and the unit tests took twice as long.
          maxWorkers: 2,
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
        // after the others, one file at a time, on a sandbox of their own.
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
