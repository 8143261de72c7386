// Bundles the single `kube-node-ready` entry point (controller, worker, status, verify) and the
// sandbox daemon into dist/ with esbuild. Self-contained ESM (dist/kube-node-ready.mjs plus
// dist/chunks/): the image copies them alone, and a worker starts without resolving node_modules.
//   node scripts/bundle.mjs [--quiet]
import { build } from 'esbuild';
import { nodeBundleOptions } from './esbuild-options.mjs';
import { execFileSync } from 'node:child_process';
import { existsSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { fileURLToPath } from 'node:url';

const root = fileURLToPath(new URL('..', import.meta.url));
const quiet = process.argv.includes('--quiet');
const pkg = JSON.parse(readFileSync(`${root}/packages/cli/package.json`, 'utf8'));
const version = process.env.KNR_VERSION || pkg.version;
// The commit as --version shows it: 12 characters, however the build names it.
let commit = (process.env.KNR_COMMIT || '').slice(0, 12);
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
const [product] = await Promise.all([
  // Code splitting: `kube-node-ready worker` loads the worker's chunks only, not the controller's
  // (start-up time and memory of every verification; docs/worker.md#benchmarks).
  build({
    ...common,
    // Without comments and indentation the code is all ASCII and smaller. V8 keeps a module's source
    // in memory for as long as the process runs, as a two-byte string if a single character of it is
    // not Latin-1 (one typographic apostrophe in a comment is enough), which doubles what it holds
    // (bench/results/2026-11-24-memory-limit.md). Names stay, so stack traces still read.
    minifyWhitespace: true,
    entryPoints: { 'kube-node-ready': `${root}/packages/cli/src/entry.ts` },
    outdir: `${root}/dist`,
    splitting: true,
    chunkNames: 'chunks/[name]-[hash]',
    outExtension: { '.js': '.mjs' },
    metafile: true,
  }),
  build({ ...common, entryPoints: [`${root}/packages/sandbox/src/entry.ts`], outfile: `${root}/dist/sandbox.mjs` }),
]);
// The npm packages the product's bundle holds, for scripts/dist.mjs (the image's SBOM and licences).
writeFileSync(`${root}/dist/bundled-packages.json`, `${JSON.stringify(bundledPackages(Object.keys(product.metafile.inputs)), null, 2)}\n`);
if (!quiet) console.log(`bundled dist/kube-node-ready.mjs and dist/sandbox.mjs (${version}, ${commit}) in ${Date.now() - started} ms`);

/**
 * Each npm package some bundled file came from (its innermost node_modules directory): name,
 * version, licence and where it is, sorted by name and version.
 */
function bundledPackages(inputs) {
  const dirs = new Set();
  for (const input of inputs) {
    const m = /^(.*node_modules\/(?:@[^/]+\/)?[^/]+)\//.exec(input);
    if (m) dirs.add(m[1]);
  }
  const seen = new Map();
  for (const dir of dirs) {
    const file = `${root}/${dir}/package.json`;
    if (!existsSync(file)) continue;
    const pkg = JSON.parse(readFileSync(file, 'utf8'));
    const license = typeof pkg.license === 'string' ? pkg.license : (pkg.license?.type ?? 'UNKNOWN');
    seen.set(`${pkg.name}@${pkg.version}`, { name: pkg.name, version: pkg.version, license, dir });
  }
  return [...seen.values()].sort((a, b) => a.name.localeCompare(b.name) || a.version.localeCompare(b.version));
}
