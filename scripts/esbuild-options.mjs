// esbuild options shared by every bundle of the repository (product, sandbox, bench): Node 24 ESM,
// workspace packages from their TypeScript sources.
export const nodeBundleOptions = {
  bundle: true,
  platform: 'node',
  format: 'esm',
  target: 'node24',
  conditions: ['source'],
  sourcemap: true,
  legalComments: 'none',
  logLevel: 'warning',
  // pino-pretty is optional (development only); the rest is bundled.
  external: ['pino-pretty'],
  // CommonJS dependencies call require() for Node built-ins.
  banner: { js: "import { createRequire as __knrCreateRequire } from 'node:module'; const require = __knrCreateRequire(import.meta.url);" },
};
