// Bundles the single `kube-node-ready` entry point (controller, worker, status, verify) and the
// sandbox daemon into dist/ with esbuild. Self-contained ESM (dist/kube-node-ready.mjs plus
// dist/chunks/): the image copies them alone, and a worker starts without resolving node_modules.
//   node scripts/bundle.mjs [--quiet]
import { build } from 'esbuild';
import { nodeBundleOptions } from './esbuild-options.mjs';
import { execFileSync } from 'node:child_process';
import { readFileSync, rmSync } from 'node:fs';
import { fileURLToPath } from 'node:url';

const root = fileURLToPath(new URL('..', import.meta.url));
const quiet = process.argv.includes('--quiet');
const pkg = JSON.parse(readFileSync(`${root}/packages/cli/package.json`, 'utf8'));
const version = process.env.KNR_VERSION || pkg.version;
let commit = process.env.KNR_COMMIT || '';
if (!commit) {
  try {
    commit = execFileSync('git', ['rev-parse', '--short=12', 'HEAD'], { cwd: root, stdio: ['ignore', 'pipe', 'ignore'] })
      .toString()
      .trim();
  } catch {
    commit = 'unknown';
  }
}

const started = Date.now();
const common = {
  ...nodeBundleOptions,
  define: { __KNR_VERSION__: JSON.stringify(version), __KNR_COMMIT__: JSON.stringify(commit) },
};
rmSync(`${root}/dist/chunks`, { recursive: true, force: true });
await Promise.all([
  // Code splitting: `kube-node-ready worker` loads the worker's chunks only, not the controller's
  // (start-up time and memory of every verification; docs/worker.md#benchmarks).
  build({
    ...common,
    // Without comments and indentation the code is all ASCII and half the size. V8 keeps a module's
    // source in memory for as long as the process runs, as a two-byte string if a single character
    // of it is not Latin-1 (a comment's "’" was enough): the controller's largest chunk went from
    // 17 MiB held to 5 MiB (docs/benchmarks.md). Names stay, so stack traces still read.
    minifyWhitespace: true,
    entryPoints: { 'kube-node-ready': `${root}/packages/cli/src/main.ts` },
    outdir: `${root}/dist`,
    splitting: true,
    chunkNames: 'chunks/[name]-[hash]',
    outExtension: { '.js': '.mjs' },
  }),
  build({ ...common, entryPoints: [`${root}/packages/sandbox/src/main.ts`], outfile: `${root}/dist/sandbox.mjs` }),
]);
if (!quiet) console.log(`bundled dist/kube-node-ready.mjs and dist/sandbox.mjs (${version}, ${commit}) in ${Date.now() - started} ms`);
