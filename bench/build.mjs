// Bundles the benchmark (bench/src/main.ts) into dist/bench.mjs with the options scripts/bundle.mjs
// uses for the product, so it imports the workspace packages from their sources.
//   node bench/build.mjs
import { build } from 'esbuild';
import { fileURLToPath } from 'node:url';

const root = fileURLToPath(new URL('..', import.meta.url));
await build({
  bundle: true,
  platform: 'node',
  format: 'esm',
  target: 'node24',
  conditions: ['source'],
  sourcemap: true,
  legalComments: 'none',
  logLevel: 'warning',
  external: ['pino-pretty'],
  banner: { js: "import { createRequire as __knrCreateRequire } from 'node:module'; const require = __knrCreateRequire(import.meta.url);" },
  entryPoints: [`${root}/bench/src/main.ts`],
  outfile: `${root}/dist/bench.mjs`,
});
