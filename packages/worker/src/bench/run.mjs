// Bundles the bench entry (the worker, as the CLI bundle would carry it) and a harness with esbuild
// into a temporary directory, then runs the harness.
//   node packages/worker/src/bench/run.mjs [--runs N] [--node-flags "--max-semi-space-size=1 ..."]
//     loopback stand-ins for the API server and DNS; prints one JSON line of figures. --node-flags:
//     Node.js flags for the worker process (to try what the image could set).
//   node packages/worker/src/bench/run.mjs --sandbox [--runs N] [--slot 4 | --dir RUNNING_SANDBOX] [--out bench/results] [--no-build]
//     one healthy verification against the real sandbox cluster, per command line the image could
//     run; rebuilds dist/ first (scripts/bundle.mjs) unless --no-build, starts and stops its own
//     sandbox on --slot unless --dir names a running one, writes <out>/worker-<date>.json.
import { build } from 'esbuild';
import { execFileSync } from 'node:child_process';
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { nodeBundleOptions } from '../../../../scripts/esbuild-options.mjs';

const here = fileURLToPath(new URL('.', import.meta.url));
const root = fileURLToPath(new URL('../../../../', import.meta.url));
const argv = process.argv.slice(2);
const flag = (name, fallback) => {
  const i = argv.indexOf(name);
  return i >= 0 ? argv[i + 1] : fallback;
};
const sandbox = argv.includes('--sandbox');
const runs = flag('--runs', sandbox ? '20' : '10');
const out = mkdtempSync(join(tmpdir(), 'knr-bench-build-'));
// As the CLI bundle is built; without source maps unless a variant asks for them.
const common = { ...nodeBundleOptions, sourcemap: false };
try {
  if (!sandbox) {
    await Promise.all([
      build({ ...common, entryPoints: [join(here, 'entry.ts')], outfile: join(out, 'worker.mjs') }),
      build({ ...common, entryPoints: [join(here, 'harness.ts')], outfile: join(out, 'harness.mjs') }),
    ]);
    execFileSync(process.execPath, [join(out, 'harness.mjs'), join(out, 'worker.mjs'), runs, flag('--node-flags', '')], { stdio: 'inherit' });
  } else {
    if (!argv.includes('--no-build')) execFileSync(process.execPath, [join(root, 'scripts', 'bundle.mjs'), '--quiet'], { stdio: 'inherit' });
    await Promise.all([
      // With a source map, as the CLI bundle ships one: the source-maps variant reads it.
      build({ ...common, sourcemap: true, entryPoints: [join(here, 'entry.ts')], outfile: join(out, 'worker.mjs') }),
      build({ ...common, entryPoints: [join(here, 'sandbox-harness.ts')], outfile: join(out, 'sandbox-harness.mjs') }),
    ]);
    const pass = ['--slot', '--dir', '--out'].flatMap((name) => (flag(name) === undefined ? [] : [name, flag(name)]));
    execFileSync(process.execPath, [join(out, 'sandbox-harness.mjs'), '--root', root, '--worker-bundle', join(out, 'worker.mjs'), '--runs', runs, ...pass], {
      stdio: 'inherit',
    });
  }
} finally {
  rmSync(out, { recursive: true, force: true });
}
