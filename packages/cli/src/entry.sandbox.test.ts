// The bundles' entry points (dist/kube-node-ready.mjs, dist/sandbox.mjs, as scripts/bundle.mjs
// builds them: the sandbox project's global setup does, before any test) on a Node.js other than
// 24: one line and exit 2, before any dependency loads (undici's zstd support failed with a stack
// trace under Node.js 20). On Node.js 24 they run as before. In the sandbox project because its
// setup builds the bundles; this file uses no cluster. With KNR_SANDBOX_DIR the setup does not
// build: run `node scripts/bundle.mjs` first.
import { execFileSync, spawnSync } from 'node:child_process';
import { join } from 'node:path';
import { describe, expect, it } from 'vitest';
import { repoRoot } from '@kube-node-ready/sandbox';
import { nodeVersionProblem, REQUIRED_NODE_MAJOR } from '../../core/src/node-version.js';

const dist = join(repoRoot(), 'dist');

/** A Node.js binary of another major on this machine (PATH, then the usual places), if any. */
function otherNode(): { path: string; version: string } | undefined {
  const candidates = [...(process.env.PATH ?? '').split(':').map((dir) => join(dir, 'node')), '/usr/bin/node', '/usr/local/bin/node'];
  for (const path of new Set(candidates)) {
    try {
      const version = execFileSync(path, ['--version'], { encoding: 'utf8', stdio: ['ignore', 'pipe', 'ignore'] }).trim();
      if (Number(/^v(\d+)\./.exec(version)?.[1]) !== REQUIRED_NODE_MAJOR) return { path, version };
    } catch {
      // not there, or not a Node.js
    }
  }
  return undefined;
}

const run = (node: string, args: string[]) => spawnSync(node, args, { encoding: 'utf8', timeout: 30_000 });

describe('on a Node.js other than 24', () => {
  const other = otherNode();

  for (const [bundle, program, args] of [
    ['kube-node-ready.mjs', 'kube-node-ready', ['--version']],
    ['sandbox.mjs', 'sandbox', ['up']],
  ] as const) {
    it(`dist/${bundle} ${args.join(' ')} says which Node.js it needs in one line and exits 2`, (ctx) => {
      if (!other) return ctx.skip(`no Node.js other than ${REQUIRED_NODE_MAJOR} on this machine (looked in PATH, /usr/bin, /usr/local/bin)`);
      const result = run(other.path, [join(dist, bundle), ...args]);
      expect({ status: result.status, stderr: result.stderr, stdout: result.stdout }).toEqual({
        status: 2,
        stderr: `${nodeVersionProblem(program, other.version, other.path)}\n`,
        stdout: '',
      });
    });
  }
});

describe('on Node.js 24', () => {
  it('dist/kube-node-ready.mjs --version prints the version', () => {
    const result = run(process.execPath, [join(dist, 'kube-node-ready.mjs'), '--version']);
    expect(result.status, result.stderr).toBe(0);
    expect(result.stdout).toMatch(new RegExp(`^kube-node-ready \\S+ \\(commit \\S+, node v${REQUIRED_NODE_MAJOR}\\.`));
  });

  it('dist/sandbox.mjs add-nodes --help prints its usage and exits 0', () => {
    const result = run(process.execPath, [join(dist, 'sandbox.mjs'), 'add-nodes', '--help']);
    expect(result.status, result.stderr).toBe(0);
    expect(result.stdout).toMatch(/^usage: sandbox add-nodes \[COUNT\]/);
  });
});
