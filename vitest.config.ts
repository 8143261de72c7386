import { defineConfig } from 'vitest/config';

// Two projects: fast unit tests (pure logic, real loopback servers), and sandbox tests that
// need the real control plane. The sandbox project starts one shared sandbox per run
// (test/global-setup.ts) and isolates tests by namespace and node names.
export default defineConfig({
  resolve: { conditions: ['source'] },
  ssr: { resolve: { conditions: ['source'] } },
  test: {
    projects: [
      {
        extends: true,
        test: {
          name: 'unit',
          include: ['packages/*/src/**/*.test.ts', 'test/unit/**/*.test.ts'],
          exclude: ['**/*.sandbox.test.ts', '**/node_modules/**'],
        },
      },
      {
        extends: true,
        test: {
          name: 'sandbox',
          include: ['packages/*/src/**/*.sandbox.test.ts', 'test/**/*.sandbox.test.ts'],
          globalSetup: ['test/global-setup.ts'],
          testTimeout: 120_000,
          hookTimeout: 180_000,
          // One sandbox per run; test files share it, so keep file parallelism modest on 2 cores.
          maxWorkers: 2,
        },
      },
    ],
  },
});
