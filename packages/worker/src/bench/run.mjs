// Bundles the bench entry (the worker, as the CLI bundle would carry it) and the harness with
// esbuild into a temporary directory, then runs the harness. Prints one JSON line of figures.
//   node packages/worker/src/bench/run.mjs [--runs N]
import { build } from 'esbuild';
import { execFileSync } from 'node:child_process';
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { fileURLToPath } from 'node:url';

const here = fileURLToPath(new URL('.', import.meta.url));
const runsFlag = process.argv.indexOf('--runs');
const runs = runsFlag > 0 ? process.argv[runsFlag + 1] : '10';
const out = mkdtempSync(join(tmpdir(), 'knr-bench-build-'));
const common = {
  bundle: true,
  platform: 'node',
  format: 'esm',
  target: 'node24',
  conditions: ['source'],
  logLevel: 'warning',
  external: ['pino-pretty'],
  banner: { js: "import { createRequire as __knrCreateRequire } from 'node:module'; const require = __knrCreateRequire(import.meta.url);" },
};
try {
  await Promise.all([
    build({ ...common, entryPoints: [join(here, 'entry.ts')], outfile: join(out, 'worker.mjs') }),
    build({ ...common, entryPoints: [join(here, 'harness.ts')], outfile: join(out, 'harness.mjs') }),
  ]);
  execFileSync(process.execPath, [join(out, 'harness.mjs'), join(out, 'worker.mjs'), runs], { stdio: 'inherit' });
} finally {
  rmSync(out, { recursive: true, force: true });
}
