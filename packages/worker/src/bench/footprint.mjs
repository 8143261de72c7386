// Where the worker's memory goes: Node.js alone, then what the worker loads on top, layer by layer.
// Each layer is a small module bundled with esbuild as the CLI bundle is built (nodeBundleOptions), imported by a fresh
// `node --expose-gc` process that then runs a full collection and reports its RSS and V8 heap, and
// its peak RSS, and the time from spawning it to its exit. The median of --runs processes per layer
// (default 5). Nothing is run: the last layer
// loads the worker's code without starting a verification (run.mjs measures a whole run).
//   node packages/worker/src/bench/footprint.mjs [--runs N]
import { build } from 'esbuild';
import { execFileSync } from 'node:child_process';
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { performance } from 'node:perf_hooks';
import { fileURLToPath } from 'node:url';
import { nodeBundleOptions } from '../../../../scripts/esbuild-options.mjs';

const here = fileURLToPath(new URL('.', import.meta.url));
const argv = process.argv.slice(2);
const i = argv.indexOf('--runs');
const runs = i >= 0 ? Number(argv[i + 1]) : 5;
if (!Number.isInteger(runs) || runs < 1) throw new Error('--runs takes a whole number of at least 1');

// Bound to a name and kept: esbuild drops a bare `import 'node:tls'` of a built-in module.
const sockets = "import * as net from 'node:net'; import * as dgram from 'node:dgram'; globalThis.net = [net, dgram];";
const tls = `${sockets} import * as tls from 'node:tls'; import * as https from 'node:https'; globalThis.tls = [tls, https];`;
// Each dependency as the worker imports it, on top of the TLS layer (each alone, not added up).
const layers = [
  { name: 'node', what: 'Node.js alone', code: '' },
  { name: 'sockets', what: '+ node:net, node:dgram', code: sockets },
  { name: 'tls', what: '+ node:tls, node:https (the API checks)', code: tls },
  { name: 'tls+pino', what: 'tls + pino', code: `${tls} import { pino } from 'pino'; globalThis.keep = pino;` },
  { name: 'tls+yaml', what: 'tls + yaml', code: `${tls} import { parse } from 'yaml'; globalThis.keep = parse;` },
  { name: 'tls+dns2', what: 'tls + dns2', code: `${tls} import dns2 from 'dns2'; globalThis.keep = dns2.Packet;` },
  { name: 'tls+zod', what: 'tls + zod/mini', code: `${tls} import * as z from 'zod/mini'; globalThis.keep = z.object({ a: z.string() });` },
  { name: 'worker', what: "the worker's code loaded, not run", code: "import { runWorker } from '../index.js'; globalThis.keep = runWorker;" },
];
const report = `
globalThis.gc();
const m = process.memoryUsage();
process.stdout.write(JSON.stringify({ rss: m.rss, heapUsed: m.heapUsed, maxRssKiB: process.resourceUsage().maxRSS }));
`;

const out = mkdtempSync(join(tmpdir(), 'knr-footprint-'));
const mib = (bytes) => Math.round((bytes / 2 ** 20) * 10) / 10;
const median = (xs) => [...xs].sort((a, b) => a - b)[Math.floor(xs.length / 2)];
try {
  const results = [];
  for (const layer of layers) {
    const file = join(out, `${layer.name}.mjs`);
    await build({
      // Resolved from here, so that '../index.js' and the packages resolve as in the worker.
      stdin: { contents: `${layer.code}\n${report}`, resolveDir: here, sourcefile: `footprint-${layer.name}.mjs`, loader: 'js' },
      outfile: file,
      ...nodeBundleOptions,
      // The image runs without source maps.
      sourcemap: false,
    });
    const samples = [];
    for (let r = 0; r < runs; r++) {
      const started = performance.now();
      const sample = JSON.parse(execFileSync(process.execPath, ['--expose-gc', file], { encoding: 'utf8' }));
      samples.push({ ...sample, wallMs: performance.now() - started });
    }
    const row = {
      layer: layer.name,
      what: layer.what,
      rssMiB: mib(median(samples.map((s) => s.rss))),
      heapUsedMiB: mib(median(samples.map((s) => s.heapUsed))),
      peakRssMiB: mib(median(samples.map((s) => s.maxRssKiB * 1024))),
      wallMs: Math.round(median(samples.map((s) => s.wallMs))),
    };
    results.push(row);
    process.stderr.write(`${row.what.padEnd(40)} RSS ${String(row.rssMiB).padStart(5)} MiB, heap ${String(row.heapUsedMiB).padStart(4)} MiB, peak RSS ${String(row.peakRssMiB).padStart(5)} MiB, ${String(row.wallMs).padStart(3)} ms from spawn to exit\n`);
  }
  process.stdout.write(`${JSON.stringify({ workerFootprint: { runs, node: process.version, layers: results } })}\n`);
} finally {
  rmSync(out, { recursive: true, force: true });
}
