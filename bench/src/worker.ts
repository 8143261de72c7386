// Scenario 4: wall time and peak RSS of one healthy verification. Uses the worker's own bench
// (packages/worker/src/bench/run.mjs): its sandbox mode when present (the worker as the image runs
// it, inside the sandbox network against the real apiserver and cluster DNS, under /usr/bin/time),
// else its loopback mode (stand-in API server and DNS on 127.0.0.1).
import { execFile } from 'node:child_process';
import { existsSync, mkdtempSync, readdirSync, readFileSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import type { BenchEnv } from './burst.js';
import type { ImageResult } from './image.js';

export interface WorkerResult {
  source: string;
  runs: number;
  wallMsMedian?: number;
  wallMsMax?: number;
  cpuMsMedian?: number;
  checksMsMedian?: number;
  peakRssMiBMax?: number;
  /** Everything the worker bench reported, for the details. */
  raw?: unknown;
  /** Where the memory and start-up go: Node.js alone, then each layer the worker loads (footprint.mjs). */
  footprint?: FootprintLayer[];
  /** The worker from the container image (bench/src/image.ts). */
  image?: ImageResult;
  error?: string;
}

export interface FootprintLayer {
  layer: string;
  what: string;
  /** After a full collection, medians over the runs. */
  rssMiB: number;
  heapUsedMiB: number;
  peakRssMiB: number;
  /** From spawning the process to its exit. */
  wallMs: number;
}

/** The worker's memory and start-up, layer by layer, without running it (packages/worker/src/bench/footprint.mjs). */
export async function runWorkerFootprint(env: BenchEnv, runs: number): Promise<FootprintLayer[] | { error: string }> {
  const script = join(env.root, 'packages', 'worker', 'src', 'bench', 'footprint.mjs');
  env.out(`worker: ${script} (${runs} runs per layer)`);
  try {
    const stdout = await exec(process.execPath, [script, '--runs', String(runs)], env.root);
    const line = stdout.split('\n').find((l) => l.includes('"workerFootprint"'));
    if (!line) throw new Error(`no result line in: ${stdout.slice(-500)}`);
    return (JSON.parse(line) as { workerFootprint: { layers: FootprintLayer[] } }).workerFootprint.layers;
  } catch (err) {
    return { error: String(err).split('\n')[0] ?? String(err) };
  }
}

export async function runWorkerBench(env: BenchEnv, runs: number): Promise<WorkerResult> {
  const script = join(env.root, 'packages', 'worker', 'src', 'bench', 'run.mjs');
  if (!existsSync(script)) return { source: 'none', runs: 0, error: `${script} does not exist` };
  const sandboxMode = existsSync(join(env.root, 'packages', 'worker', 'src', 'bench', 'sandbox-harness.ts'));
  if (sandboxMode) {
    const out = mkdtempSync(join(tmpdir(), 'knr-bench-worker-'));
    try {
      env.out(`worker: ${script} --sandbox (${runs} runs per variant, on this sandbox)`);
      await exec(process.execPath, [script, '--sandbox', '--no-build', '--dir', env.sandboxDir, '--runs', String(runs), '--out', out], env.root);
      const file = readdirSync(out).find((f) => f.endsWith('.json'));
      if (!file) throw new Error('the worker bench wrote no result file');
      const report = JSON.parse(readFileSync(join(out, file), 'utf8')) as {
        results: Array<{ name: string; wallMs: { median: number; max: number }; cpuMs: { median: number }; checksWallMs?: { median: number }; peakRssMiB: { max: number } }>;
      };
      // The variant the image runs: with --enable-source-maps only if the Dockerfile's ENTRYPOINT says so.
      const dockerfile = readFileSync(join(env.root, 'Dockerfile'), 'utf8');
      const entrypoint = /^ENTRYPOINT .*$/m.exec(dockerfile)?.[0] ?? '';
      const name = entrypoint.includes('--enable-source-maps') ? 'image' : 'image-no-source-maps';
      const image = report.results.find((r) => r.name === name) ?? report.results.find((r) => r.name === 'image');
      if (!image) throw new Error('the worker bench reported no "image" variant');
      return {
        source: `packages/worker/src/bench/run.mjs --sandbox (variant "${image.name}", as the Dockerfile's ENTRYPOINT runs the bundle: every check, in the sandbox network namespace)`,
        runs,
        wallMsMedian: image.wallMs.median,
        wallMsMax: image.wallMs.max,
        cpuMsMedian: image.cpuMs.median,
        checksMsMedian: image.checksWallMs?.median,
        peakRssMiBMax: image.peakRssMiB.max,
        raw: report.results,
      };
    } catch (err) {
      env.out(`worker: the sandbox mode failed (${String(err).split('\n')[0]}); using the loopback mode`);
    } finally {
      rmSync(out, { recursive: true, force: true });
    }
  }
  try {
    env.out(`worker: ${script} (loopback, ${runs} runs)`);
    const stdout = await exec(process.execPath, [script, '--runs', String(runs)], env.root);
    const line = stdout.split('\n').find((l) => l.includes('"workerBench"'));
    if (!line) throw new Error(`no result line in: ${stdout.slice(-500)}`);
    const r = (JSON.parse(line) as { workerBench: { wallMsMedian: number; wallMsMax: number; checksMsMedian: number; peakRssMiBMax: number } }).workerBench;
    return {
      source: 'packages/worker/src/bench/run.mjs (loopback stand-ins for the API server and DNS)',
      runs,
      wallMsMedian: r.wallMsMedian,
      wallMsMax: r.wallMsMax,
      checksMsMedian: r.checksMsMedian,
      peakRssMiBMax: r.peakRssMiBMax,
      raw: r,
    };
  } catch (err) {
    return { source: 'packages/worker/src/bench/run.mjs', runs, error: String(err) };
  }
}

function exec(cmd: string, args: string[], cwd: string): Promise<string> {
  return new Promise((resolve, reject) => {
    execFile(cmd, args, { cwd, maxBuffer: 16 * 1024 * 1024, timeout: 600_000 }, (err, stdout, stderr) => {
      if (err) reject(new Error(`${err.message}\n${stderr.slice(-2000)}`));
      else resolve(stdout);
    });
  });
}
