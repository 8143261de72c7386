// Bundles the fault suite (chaos/src/main.ts) into dist/chaos.mjs with the options the product's
// bundle uses, so it imports the workspace packages from their sources.
//   node chaos/build.mjs
import { build } from 'esbuild';
import { nodeBundleOptions } from '../scripts/esbuild-options.mjs';
import { fileURLToPath } from 'node:url';

const root = fileURLToPath(new URL('..', import.meta.url));
await build({
  ...nodeBundleOptions,
  entryPoints: [`${root}/chaos/src/entry.ts`],
  outfile: `${root}/dist/chaos.mjs`,
});
