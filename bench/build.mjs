// Bundles the benchmark (bench/src/main.ts) into dist/bench.mjs with the options scripts/bundle.mjs
// uses for the product, so it imports the workspace packages from their sources.
//   node bench/build.mjs
import { build } from 'esbuild';
import { nodeBundleOptions } from '../scripts/esbuild-options.mjs';
import { fileURLToPath } from 'node:url';

const root = fileURLToPath(new URL('..', import.meta.url));
await build({
  ...nodeBundleOptions,
  entryPoints: [`${root}/bench/src/entry.ts`],
  outfile: `${root}/dist/bench.mjs`,
});
