// `make bench`: kube-node-ready's benchmarks in the sandbox (docs/benchmarks.md). Its commands and
// options: USAGE below (node dist/bench.mjs --help).
import { execFileSync } from 'node:child_process';
import { existsSync, mkdirSync, readFileSync, writeFileSync } from 'node:fs';
import { cpus, loadavg, release, totalmem } from 'node:os';
import { dirname, join, resolve } from 'node:path';
import { fileURLToPath } from 'node:url';
import { parseArgs } from 'node:util';
import { repoRoot, stopSandbox } from '@kube-node-ready/sandbox';
import { runBurst, type BenchEnv, type BurstResult } from './burst.js';
import { drawChart, drawScaleChart, type ChartInput } from './chart.js';
import { chartMemoryLimit } from './limited.js';
import { BENCH_WORKER_IMAGE, describeRuntime, INSTANT_WORKER_IMAGE, type ControllerRuntime, type ControllerTuning } from './controller.js';
import { drawSideBySideChart, LONG_LEASE, runSideBySide, type SideBySideResult } from './neighbour.js';
import { chartTuning, raceTable, runRace, summarize as summarizeRace, type RaceResult } from './race.js';
import { runObserver } from './observer.js';
import { distribution, median, percentile, type Distribution } from './stats.js';
import { runScale, type ScaleResult } from './scale.js';
import { runSteady, type SteadyResult } from './steady.js';
import type { WorkerResult } from './worker.js';
import { measureProfileLookup } from './profiles.js';
import { children, round } from './util.js';

/** The bench's commands and options (--help); the bundle has no comments to read them from. */
const USAGE = `  node dist/bench.mjs [--quick] [--out bench/results/<date>[-quick].json] [--slot 10] [--reps N]
                      [--sizes 50,200,1000] [--steady-nodes 5000] [--max-concurrent 25] [--workers 20]
                      [--qps 200] [--burst 400] [--direct] [--controller-node-flags=--max-semi-space-size=2]
                      (default: the NODE_OPTIONS the Helm chart gives the controller; '=' for none)
                      [--controller-env='MALLOC_ARENA_MAX=2'] (default: the rest of the chart's fixed env; '=' for none)
                      [--controller-memory-limit 512Mi] (default: the chart's controller memory limit)
                      [--instant-worker] (bursts with a worker that passes at once: the controller's own cost)
                      [--burst-timeout SECONDS] (how long a burst may take; default 120 + 0.6 per node)
                      [--own-cost-size N] (after the bursts, one burst of N nodes with the instant worker and
                      slots for all: the controller's own cost and reaction; default 1000, 0 in --quick)
  node dist/bench.mjs side-by-side [--sizes 50,200,1000] [--reps 2] [--footprint 1000,5000] [--slot 10] [--out FILE]
                      kube-node-ready beside node-readiness-controller, the bench setting its condition
                      (bench/src/neighbour.ts); with --side-by-side after the bursts (the race replaced it in make bench)
  node dist/bench.mjs race [--sizes 50,200,1000] [--tuned qps=100,burst=200,workers=20,max-concurrent=100] [--slot 10] [--out FILE]
                      the race with node-readiness-controller and its own reporter, each at its chart's defaults
                      (bench/src/race.ts); make bench runs it after the bursts (not in --quick unless --race)
  node dist/bench.mjs race-chart FILE.json               redraw the race's chart, print its table
  node dist/bench.mjs scale [--scale-nodes 1000,2000,5000] [--scale-burst 100] [--slot 10] [--out FILE]
                      the controller's memory and CPU as the cluster grows, and their slope per node
                      (bench/src/scale.ts); make bench runs it after the steady state (not in --quick)
  node dist/bench.mjs side-by-side-chart FILE.json       redraw the side-by-side chart
  node dist/bench.mjs scale-chart FILE.json              redraw the scale chart
  node dist/bench.mjs chart RESULTS.json [--png FILE]    redraw the chart of a results file
  node dist/bench.mjs analyze RESULTS.json               slot use and refill delay per burst run
  node dist/bench.mjs observe ...                        (internal) the observer process`;

const TARGETS = {
  reactionP99MsAt200: 1000,
  taintRemovedAfterWorkerFinishedP99MsAt200: 1000,
  apiWritesPerVerifiedNode: 4,
  controllerRssMiBWith5000Nodes: 150,
  controllerPeakRssMiBAt1000: 200,
  /** Under the chart's memory limit, in every scenario. */
  oomKills: 0,
};

async function main(argv: string[]): Promise<number> {
  if (argv[0] === 'profiles') {
    // What choosing a node's profile costs per reconcile (docs/profiles.md): no cluster needed.
    const results = [1, 5, 20].map((n) => measureProfileLookup(n));
    for (const r of results) console.log(`${r.profiles} profiles: ${r.nsPerLookup} ns per lookup (${r.nsPerLookupNoMatch} ns for a node no profile selects), ${r.lookups} lookups`);
    const { values } = parseArgs({ args: argv.slice(1), options: { out: { type: 'string' } } });
    if (values.out) writeFileSync(resolve(values.out), `${JSON.stringify({ date: new Date().toISOString(), node: process.version, results }, null, 2)}\n`);
    return 0;
  }
  if (argv[0] === 'observe') {
    const { values } = parseArgs({
      args: argv.slice(1),
      options: {
        kubeconfig: { type: 'string' },
        'node-selector': { type: 'string' },
        namespace: { type: 'string' },
        'taint-key': { type: 'string' },
        'verified-label': { type: 'string' },
        'condition-type': { type: 'string' },
      },
    });
    await runObserver({
      kubeconfig: values.kubeconfig!,
      nodeSelector: values['node-selector']!,
      namespace: values.namespace!,
      taintKey: values['taint-key']!,
      verifiedLabel: values['verified-label']!,
      ...(values['condition-type'] ? { conditionType: values['condition-type'] } : {}),
    });
    return 0;
  }
  if (argv[0] === 'analyze') {
    const file = argv[1];
    if (!file) throw new Error('usage: bench analyze RESULTS.json');
    const results = JSON.parse(readFileSync(file, 'utf8')) as Results;
    const cap = (results.config.tuning as ControllerTuning).maxConcurrentVerifications;
    for (const b of results.bursts) {
      const s = slotUse(b.samples, cap);
      console.log(`burst ${b.size} (run ${b.repetition}): slots busy ${Math.round(s.utilisation * 100)} %, refill delay p50 ${s.refill.p50 ?? '-'} ms, p90 ${s.refillP90 ?? '-'} ms`);
    }
    return 0;
  }
  if (argv[0] === 'side-by-side-chart') {
    const file = argv[1];
    if (!file) throw new Error('usage: bench side-by-side-chart RESULTS-side-by-side.json');
    const r = JSON.parse(readFileSync(file, 'utf8')) as SideBySideResult & { date: string; commit: string };
    const png = file.replace(/\.json$/, '.png');
    await drawSideBySideChart(r, `kube-node-ready vs node-readiness-controller ${r.versions.nodeReadinessController}: reaction per node, ${r.date.slice(0, 10)}, commit ${r.commit}`, png);
    console.log(`wrote ${png}`);
    return 0;
  }
  if (argv[0] === 'race-chart') {
    const file = argv[1];
    if (!file) throw new Error('usage: bench race-chart RESULTS-race.json');
    const r = JSON.parse(readFileSync(file, 'utf8')) as RaceResult & { date: string; commit: string };
    const png = file.replace(/\.json$/, '.png');
    await drawRaceChart(r, png);
    console.log(`wrote ${png}`);
    for (const line of raceTable({ ...r, bySize: summarizeRace(r.runs) })) console.log(line);
    return 0;
  }
  if (argv[0] === 'scale-chart') {
    const file = argv[1];
    if (!file) throw new Error('usage: bench scale-chart RESULTS-scale.json');
    const r = JSON.parse(readFileSync(file, 'utf8')) as ScaleResult & { date: string; commit: string };
    const png = file.replace(/\.json$/, '.png');
    await drawScaleChart(r, scaleTitle(r.date, r.commit, r.points[0]?.burst.size ?? 0, r.limit.memory), png);
    console.log(`wrote ${png}`);
    return 0;
  }
  if (argv[0] === 'chart') {
    const { values, positionals } = parseArgs({ args: argv.slice(1), allowPositionals: true, options: { png: { type: 'string' } } });
    const file = positionals[0];
    if (!file) throw new Error('usage: bench chart RESULTS.json [--png FILE]');
    const results = JSON.parse(readFileSync(file, 'utf8')) as Results;
    const png = values.png ?? file.replace(/\.json$/, '.png');
    await drawChart(chartInput(results), resolve(png));
    console.log(`wrote ${png}`);
    return 0;
  }

  const sideOnly = argv[0] === 'side-by-side';
  const scaleOnly = argv[0] === 'scale';
  const raceOnly = argv[0] === 'race';
  const { values } = parseArgs({
    args: sideOnly || scaleOnly || raceOnly ? argv.slice(1) : argv,
    options: {
      race: { type: 'boolean' },
      'race-sizes': { type: 'string' },
      tuned: { type: 'string' },
      'scale-nodes': { type: 'string' },
      'scale-burst': { type: 'string', default: '100' },
      'side-by-side': { type: 'boolean' },
      'side-by-side-sizes': { type: 'string' },
      footprint: { type: 'string' },
      quick: { type: 'boolean', default: process.env.BENCH === 'quick' },
      out: { type: 'string' },
      slot: { type: 'string', default: '10' },
      reps: { type: 'string' },
      sizes: { type: 'string' },
      'steady-nodes': { type: 'string' },
      'max-concurrent': { type: 'string', default: '25' },
      workers: { type: 'string', default: '20' },
      qps: { type: 'string', default: '200' },
      burst: { type: 'string', default: '400' },
      direct: { type: 'boolean', default: false },
      'controller-node-flags': { type: 'string' },
      'controller-env': { type: 'string' },
      'controller-memory-limit': { type: 'string' },
      'instant-worker': { type: 'boolean', default: false },
      'burst-timeout': { type: 'string' },
      'own-cost-size': { type: 'string' },
      gates: { type: 'boolean', default: false },
      help: { type: 'boolean', short: 'h' },
    },
  });
  if (values.help) {
    console.log(`usage:\n${USAGE}`);
    return 0;
  }
  const quick = values.quick!;
  const slot = Number(values.slot);
  if (!Number.isInteger(slot) || slot < 10 || slot > 19) throw new Error(`--slot: the bench uses sandbox slots 10-19, got ${values.slot}`);
  const reps = Number(values.reps ?? (quick ? 1 : 3));
  const sizes = (values.sizes ?? (quick ? '20' : '50,200,1000')).split(',').filter(Boolean).map(Number);
  const steadyNodes = Number(values['steady-nodes'] ?? (quick ? 500 : 5000));
  const tuning: ControllerTuning = { maxConcurrentVerifications: Number(values['max-concurrent']), workers: Number(values.workers), qps: Number(values.qps), burst: Number(values.burst) };
  const root = repoRoot();
  const bundle = fileURLToPath(import.meta.url);
  const date = new Date().toISOString().slice(0, 10);
  const outFile = resolve(values.out ?? join(root, 'bench', 'results', `${date}${quick ? '-quick' : ''}.json`));
  mkdirSync(dirname(outFile), { recursive: true });
  const out = (line: string) => console.log(`[${new Date().toISOString().slice(11, 19)}] ${line}`);
  const env: BenchEnv = { root, bundle, slot, sandboxDir: join(root, '.sandbox', `bench-${slot}`), logDir: join(root, '.sandbox', `bench-${slot}-logs`), tuning, out, direct: values.direct!, controller: controllerRuntime(root, values['controller-node-flags'], values['controller-env']), controllerMemoryLimit: values['controller-memory-limit'] ?? chartMemoryLimit(root), workerImage: values['instant-worker'] ? INSTANT_WORKER_IMAGE : BENCH_WORKER_IMAGE, ...(values['burst-timeout'] ? { burstTimeoutMs: seconds('--burst-timeout', values['burst-timeout']) * 1000 } : {}) };
  for (const f of ['kube-node-ready.mjs', 'sandbox.mjs']) if (!existsSync(join(root, 'dist', f))) throw new Error(`dist/${f} is missing: run \`node scripts/bundle.mjs\` first`);

  const stop = () => {
    out('interrupted: stopping the controller, the observer and the sandbox');
    for (const child of children) child.kill('SIGKILL');
    void stopSandbox(env.sandboxDir, slot, () => {}).finally(() => process.exit(130));
  };
  process.once('SIGINT', stop);
  process.once('SIGTERM', stop);

  const sideSizes = (values['side-by-side-sizes'] ?? (sideOnly ? values.sizes : undefined) ?? (quick ? '10' : '50,200,1000')).split(',').filter(Boolean).map(Number);
  // The race (like with like) took its place in make bench; the side-by-side runs when asked for.
  const runSide = sideOnly || values['side-by-side'] === true;
  const sideReps = Number(values.reps ?? (quick ? 1 : 2));
  // Both controllers' RSS with this many realistic Nodes, before the bursts ('' or 0: none).
  const footprintCounts = (values.footprint ?? (quick ? '' : '1000,5000')).split(',').filter(Boolean).map(Number).filter((n) => n > 0);
  const sideFile = outFile.replace(/\.json$/, '-side-by-side.json');
  const side = async (): Promise<void> => {
    out(`bench: side by side with node-readiness-controller: bursts ${sideSizes.join(', ')} x ${sideReps}, alternating`);
    const sideStarted = Date.now();
    const header = () => runHeader('kube-node-ready vs node-readiness-controller', sideStarted);
    // Written after every run too (partial: true), so a long run interrupted still leaves its figures.
    const r: SideBySideResult = await runSideBySide(env, sideSizes, sideReps, (partial) => writeResults(sideFile, { ...header(), partial: true, ...partial }), footprintCounts);
    const doc = {
      ...header(),
      config: { tuning, workerImage: 'kube-node-ready-instant', note: 'both controllers through counting proxies of their own, chart RBAC and defaults, leader election on (kube-node-ready with a 60s/40s/5s Lease, node-readiness-controller with its defaults); runs alternate, and so does which contender goes first', kubeNodeReadyLeaderElection: LONG_LEASE },
      ...r,
    };
    writeResults(sideFile, doc);
    out(`bench: wrote ${sideFile}`);
    const png = sideFile.replace(/\.json$/, '.png');
    try {
      await drawSideBySideChart(r, `kube-node-ready vs node-readiness-controller ${r.versions.nodeReadinessController}: reaction per node, ${cpus().length} cores, ${doc.date.slice(0, 10)}, commit ${doc.commit}`, png);
      out(`bench: wrote ${png}`);
    } catch (err) {
      out(`bench: no side-by-side chart: ${String(err).split('\n')[0]}`);
    }
    for (const f of r.footprint ?? []) {
      const ours = f.rssMiB['kube-node-ready'];
      const theirs = f.rssMiB['node-readiness-controller'];
      out(`side by side footprint, ${f.nodes} realistic nodes (${f.nodeObjectBytes} bytes each): RSS mean/max MiB ours ${ours.mean}/${ours.max}, theirs ${theirs.mean}/${theirs.max}, ratio theirs/ours ${round(theirs.mean / ours.mean, 2)}`);
    }
    out('side by side (reaction: ours node created -> taint removed, theirs condition True -> taint removed; ms; ratio = theirs / ours):');
    out('  size  ours p50/p99        theirs p50/p99      ratio p50/p99   writes/node ours/theirs   CPU-s ours/theirs   peak RSS MiB ours/theirs');
    for (const s of r.bySize) {
      out(
        `  ${String(s.size).padStart(4)}  ${`${s.ours.reactionP50 ?? '-'}/${s.ours.reactionP99 ?? '-'}`.padEnd(18)}  ${`${s.theirs.reactionP50 ?? '-'}/${s.theirs.reactionP99 ?? '-'}`.padEnd(18)}  ` +
          `${`${s.ratio.reactionP50 ?? '-'}/${s.ratio.reactionP99 ?? '-'}`.padEnd(14)}  ${`${s.ours.writesPerNode}/${s.theirs.writesPerNode}`.padEnd(24)}  ${`${s.ours.cpuSeconds}/${s.theirs.cpuSeconds}`.padEnd(18)}  ${s.ours.peakRssMiB}/${s.theirs.peakRssMiB}` +
          `   (ours without the worker pod's life: p50 ${s.ours.controllerOnlyP50Median ?? '-'} p99 ${s.ours.controllerOnlyP99Median ?? '-'})`,
      );
    }
  };

  const raceSizes = (values['race-sizes'] ?? (raceOnly ? values.sizes : undefined) ?? (quick ? '10' : '50,200,1000')).split(',').filter(Boolean).map(Number);
  const runRaceToo = raceOnly || (values.race ?? !quick);
  const raceFile = outFile.replace(/\.json$/, '-race.json');
  const race = async (): Promise<void> => {
    const tuned = values.tuned ? parseTuning(values.tuned, chartTuning(root)) : undefined;
    out(`bench: the race with node-readiness-controller and its reporter: bursts ${raceSizes.join(', ')}, each contender at its chart's defaults${tuned ? ', and kube-node-ready tuned' : ''}; slot ${slot}`);
    const raceStarted = Date.now();
    const header = () => runHeader('kube-node-ready vs node-readiness-controller with its reporter (the race)', raceStarted);
    const r = await runRace(env, raceSizes, tuned, (partial) => writeResults(raceFile, { ...header(), partial: true, ...partial }));
    const doc = { ...header(), ...r };
    writeResults(raceFile, doc);
    out(`bench: wrote ${raceFile}`);
    try {
      await drawRaceChart(doc, raceFile.replace(/\.json$/, '.png'));
      out(`bench: wrote ${raceFile.replace(/\.json$/, '.png')}`);
    } catch (err) {
      out(`bench: no race chart: ${String(err).split('\n')[0]} (redraw with: node dist/bench.mjs race-chart ${raceFile})`);
    }
    for (const line of raceTable(r)) out(line);
  };

  const scaleCounts = (values['scale-nodes'] ?? (quick ? '' : '1000,2000,5000')).split(',').filter(Boolean).map(Number).filter((n) => n > 0);
  const scaleFile = outFile.replace(/\.json$/, '-scale.json');
  const scale = async (): Promise<number> => {
    const burstSize = Number(values['scale-burst']);
    out(`bench: scale: ${scaleCounts.join(', ')} realistic nodes, a burst of ${burstSize} at each; slot ${slot}`);
    const scaleStarted = Date.now();
    const r = await runScale(env, scaleCounts, burstSize, quick ? 10_000 : 30_000);
    const doc = {
      ...runHeader('kube-node-ready: cost as the cluster grows', scaleStarted),
      config: { tuning, workerImage: 'kube-node-ready-instant', note: 'one controller per size, run as the chart runs it (NODE_OPTIONS, memory limit); the burst with slots for all its nodes' },
      ...r,
    };
    writeResults(scaleFile, doc);
    out(`bench: wrote ${scaleFile}`);
    try {
      await drawScaleChart(r, scaleTitle(doc.date, doc.commit, burstSize, r.limit.memory), scaleFile.replace(/\.json$/, '.png'));
      out(`bench: wrote ${scaleFile.replace(/\.json$/, '.png')}`);
    } catch (err) {
      out(`bench: no scale chart: ${String(err).split('\n')[0]} (redraw with: node dist/bench.mjs scale-chart ${scaleFile})`);
    }
    out(`scale: slope per cached node: V8 heap in use ${r.slope.heapUsedBytesPerNode} bytes, RSS ${r.slope.rssBytesPerNode} bytes, anonymous ${r.slope.anonBytesPerNode}, charged ${r.slope.chargedBytesPerNode}; start-up CPU ${r.slope.startupCpuMsPerThousandNodes} ms per 1000 nodes`);
    for (const p of r.projection) out(`scale: projected steady state at ${p.nodes} nodes: heap in use ${p.heapUsedMiB} MiB, RSS ${p.rssMiB} MiB, anonymous ${p.anonMiB}, charged ${p.chargedMiB}; start-up ${p.startupCpuSeconds} CPU-s`);
    const kills = r.points.reduce((a, p) => a + p.oomKills, 0);
    if (kills > 0) out(`bench: FAILED: the controller was OOM-killed ${kills} times under the chart's memory limit in the scale scenario`);
    return kills;
  };

  /** What a scenario's results file starts with: which bench, when, how long, at which commit, on what, how loaded. */
  function runHeader(bench: string, startedAt: number) {
    return {
      bench,
      date: new Date().toISOString(),
      durationSeconds: Math.round((Date.now() - startedAt) / 1000),
      commit: process.env.KNR_COMMIT || git(root, ['rev-parse', '--short=12', 'HEAD']),
      machine: { nproc: cpus().length, cpuModel: cpus()[0]?.model ?? 'unknown', kernel: release(), node: process.version, kubernetesVersion: env.kubernetesVersion ?? 'unknown' },
      load: { loadavgAtEnd: loadavg().map((x) => round(x, 2)), otherSandboxes: otherSandboxes(slot) },
    };
  }

  const started = Date.now();
  if (sideOnly) {
    await side();
    return 0;
  }
  if (scaleOnly) return (await scale()) > 0 ? 1 : 0;
  if (raceOnly) {
    await race();
    return 0;
  }
  const load = { loadavgAtStart: loadavg().map((x) => round(x, 2)), otherSandboxesAtStart: otherSandboxes(slot) };
  out(`bench: ${quick ? 'quick' : 'full'} run: bursts ${sizes.join(', ')} x ${reps}, steady state with ${steadyNodes} nodes; slot ${slot}; load average ${load.loadavgAtStart.join(' ')}; other sandboxes running: ${load.otherSandboxesAtStart.join(', ') || 'none'}`);
  out(`bench: controller tuning: maxConcurrentVerifications ${tuning.maxConcurrentVerifications}, workers ${tuning.workers}, kubernetes.qps ${tuning.qps}, burst ${tuning.burst}; ${describeRuntime(env.controller)}`);

  /** The progress lines of a finished burst. */
  const report = (r: BurstResult, tag: string): void => {
    out(
      `${tag}: total ${fmtS(r.totalMs)}, open p50 ${fmtS(r.latencyMs.taintRemovedAfterNodeCreated.p50)} p99 ${fmtS(r.latencyMs.taintRemovedAfterNodeCreated.p99)}, ` +
        `reaction p99 ${fmtS(r.latencyMs.podCreatedAfterNodeCreated.p99)} (from launchable ${fmtS(r.latencyMs.podCreatedAfterLaunchable.p99)}), open after worker p99 ${fmtS(r.latencyMs.taintRemovedAfterWorkerFinished.p99)}, ` +
        `launchable to open p50 ${fmtS(r.latencyMs.taintRemovedAfterLaunchable.p50)} p99 ${fmtS(r.latencyMs.taintRemovedAfterLaunchable.p99)}, ` +
        `${r.api.writesPerNode} writes/node, controller ${r.controller.cpuSeconds} CPU-s, peak RSS ${r.controller.peakRssMiB} MiB`,
    );
    const m = r.controllerMetrics;
    if ((m['reactionLaunchCount'] ?? 0) + (m['reactionOpenCount'] ?? 0) > 0) {
      const pct = (share: number | undefined) => `${Math.round((share ?? 0) * 1000) / 10} %`;
      out(
        `${tag}: the controller's own reaction (its metric, bucket bounds): launch p50 <= ${m['reactionLaunchSecondsP50']}s p99 <= ${m['reactionLaunchSecondsP99']}s, ${pct(m['reactionLaunchShareUnder1s'])} within 1 s (${m['reactionLaunchCount']} nodes); ` +
          `open p50 <= ${m['reactionOpenSecondsP50']}s p99 <= ${m['reactionOpenSecondsP99']}s, ${pct(m['reactionOpenShareUnder1s'])} within 1 s (${m['reactionOpenCount']} nodes)`,
      );
    }
  };
  const bursts: BurstResult[] = [];
  for (const size of sizes) {
    for (let rep = 1; rep <= reps; rep++) {
      const r = await runBurst(env, size, rep);
      bursts.push(r);
      report(r, `burst ${size} (run ${rep})`);
    }
  }
  // The controller's own cost (issue 15, goal 3): a burst whose worker passes at once, with slots for
  // all, so that what is measured is the controller, the apiserver and the scheduler, not the checks.
  const ownCostSize = Number(values['own-cost-size'] ?? (quick || values['instant-worker'] ? 0 : 1000));
  let ownCost: BurstResult | undefined;
  if (ownCostSize > 0) {
    out(`bench: the controller's own cost: a burst of ${ownCostSize} nodes with the instant worker and ${ownCostSize} slots`);
    ownCost = await runBurst({ ...env, workerImage: INSTANT_WORKER_IMAGE, tuning: { ...tuning, maxConcurrentVerifications: ownCostSize } }, ownCostSize, 1);
    report(ownCost, `own cost, burst ${ownCostSize}`);
  }
  let steady: SteadyResult | undefined;
  let worker: WorkerResult | undefined;
  if (steadyNodes > 0) {
    ({ steady, worker } = await runSteady(env, steadyNodes, quick ? 15_000 : 60_000, quick ? 3 : 10, { gates: values.gates! }));
    out(`memory ${steadyNodes}: steady RSS mean ${steady.rssMiB.mean} MiB (max ${steady.rssMiB.max}), peaks ${steady.phases.map((p) => `${p.phase} ${p.peakRssMiB}`).join(', ')} MiB under a ${steady.limit.memory} limit, ${steady.oomKills} OOM kills, synced in ${fmtS(steady.syncMs)}`);
    if (worker.error) out(`worker: ${worker.error}`);
    else out(`worker: wall ${worker.wallMsMedian} ms (median), checks ${worker.checksMsMedian} ms, peak RSS ${worker.peakRssMiBMax} MiB`);
    for (const l of worker.footprint ?? []) out(`worker footprint: ${l.what}: RSS ${l.rssMiB} MiB, peak ${l.peakRssMiB} MiB, heap ${l.heapUsedMiB} MiB, ${l.wallMs} ms from spawn to exit`);
  }

  const results: Results = {
    bench: 'kube-node-ready',
    mode: quick ? 'quick' : 'full',
    date: new Date().toISOString(),
    durationSeconds: Math.round((Date.now() - started) / 1000),
    commit: process.env.KNR_COMMIT || git(root, ['rev-parse', '--short=12', 'HEAD']),
    dirtyTree: git(root, ['status', '--porcelain', '--untracked-files=no']) !== '',
    machine: {
      nproc: cpus().length,
      cpuModel: cpus()[0]?.model ?? 'unknown',
      memoryGiB: round(totalmem() / 2 ** 30, 1),
      kernel: release(),
      node: process.version,
      kubernetesVersion: env.kubernetesVersion ?? 'unknown',
    },
    load: { ...load, loadavgAtEnd: loadavg().map((x) => round(x, 2)), otherSandboxesAtEnd: otherSandboxes(slot) },
    config: { tuning, direct: values.direct!, controllerNodeFlags: env.controller.nodeFlags, controllerEnv: env.controller.env, controllerMemoryLimit: env.controllerMemoryLimit, workerImage: env.workerImage.repository, note: 'every other controller setting is the default (docs/configuration.md); Node.js flags and environment: the Helm chart\'s unless --controller-node-flags or --controller-env say otherwise; leader election on; worker checks: all (dns, api, tcp, service, podnet)' },
    targets: TARGETS,
    summary: summarize(bursts, steady?.rssMiB.max),
    bursts,
    ...(ownCost ? { ownCost } : {}),
    steady,
    worker,
  };
  writeResults(outFile, results);
  out(`bench: wrote ${outFile}`);
  const png = outFile.replace(/\.json$/, '.png');
  try {
    await drawChart(chartInput(results), png);
    out(`bench: wrote ${png}`);
  } catch (err) {
    out(`bench: no chart: ${String(err).split('\n')[0]} (install gnuplot-nox; redraw with: node dist/bench.mjs chart ${outFile})`);
  }
  printSummary(results, out);
  const scaleKills = scaleCounts.length > 0 ? await scale() : 0;
  if (runRaceToo) await race();
  else out('bench: the race with node-readiness-controller skipped in the quick run (make bench runs it; --race to force)');
  if (runSide) await side();
  else out('bench: the side-by-side with node-readiness-controller (its condition set by the bench) skipped: the race replaces it (--side-by-side to run it)');
  const oomKills = [...bursts, ...(ownCost ? [ownCost] : [])].reduce((a, b) => a + b.controller.oomKills, 0) + (steady?.oomKills ?? 0) + scaleKills;
  if (oomKills > 0) {
    out(`bench: FAILED: the controller was OOM-killed ${oomKills} times under the chart's memory limit (the per-scenario figures above say where; its logs are in ${env.logDir})`);
    return 1;
  }
  return 0;
}

interface Results {
  bench: string;
  mode: string;
  date: string;
  durationSeconds: number;
  commit: string;
  dirtyTree: boolean;
  machine: Record<string, unknown>;
  load: Record<string, unknown>;
  config: Record<string, unknown>;
  targets: typeof TARGETS;
  summary: ReturnType<typeof summarize>;
  bursts: BurstResult[];
  /** The burst of --own-cost-size nodes with the instant worker and slots for all (full runs). */
  ownCost?: BurstResult;
  steady?: SteadyResult;
  worker?: WorkerResult;
}

/** Per burst size, all repetitions pooled (per-node latencies) or their median (per-run totals). */
function summarize(bursts: BurstResult[], steadyRss: number | undefined) {
  const sizes = [...new Set(bursts.map((b) => b.size))];
  const pooled = (runs: BurstResult[], pick: (s: BurstResult['samples'][number]) => number | null): Distribution =>
    distribution(runs.flatMap((r) => r.samples.map(pick)).filter((v): v is number => v !== null));
  return {
    bySize: sizes.map((size) => {
      const runs = bursts.filter((b) => b.size === size);
      const med = (pick: (r: BurstResult) => number | undefined) => {
        const v = runs.map(pick).filter((x): x is number => x !== undefined);
        const m = median(v);
        return m === undefined ? undefined : round(m, 2);
      };
      return {
        size,
        runs: runs.length,
        verified: runs.map((r) => r.verified),
        workerPodsByRun: runs.map((r) => r.workerPods),
        failedAttemptsByRun: runs.map((r) => r.failedWorkerPods),
        totalMsMedian: med((r) => r.totalMs),
        totalMsByRun: runs.map((r) => r.totalMs),
        podCreatedAfterNodeCreated: pooled(runs, (s) => (s[0] !== null && s[1] !== null ? s[1] - s[0] : null)),
        workerFinishedAfterPodCreated: pooled(runs, (s) => (s[4] !== null && s[2] !== null ? s[2] - s[4] : null)),
        taintRemovedAfterWorkerFinished: pooled(runs, (s) => (s[2] !== null && s[3] !== null ? s[3] - s[2] : null)),
        taintRemovedAfterNodeCreated: pooled(runs, (s) => (s[0] !== null && s[3] !== null ? s[3] - s[0] : null)),
        podCreatedAfterNodeCreatedFreeSlotP99Median: med((r) => r.latencyMs.podCreatedAfterNodeCreatedFreeSlot.p99),
        podCreatedAfterLaunchableP99Median: med((r) => r.latencyMs.podCreatedAfterLaunchable.p99),
        taintRemovedAfterLaunchableP50Median: med((r) => r.latencyMs.taintRemovedAfterLaunchable?.p50),
        taintRemovedAfterLaunchableP99Median: med((r) => r.latencyMs.taintRemovedAfterLaunchable?.p99),
        writesPerNodeMedian: med((r) => r.api.writesPerNode),
        nodeWritesPerNodeMedian: med((r) => r.api.nodeWritesPerNode),
        requestsPerNodeMedian: med((r) => Object.values(r.api.perVerifiedNode).reduce((a, b) => a + b, 0)),
        controllerCpuSecondsMedian: med((r) => r.controller.cpuSeconds),
        controllerCpuMsPerNodeMedian: med((r) => r.controller.cpuMsPerNode),
        controllerPeakRssMiBMax: Math.max(...runs.map((r) => r.controller.peakRssMiB)),
        machineBusyMedian: med((r) => r.machine.busyFraction),
      };
    }),
    steadyRssMiBMax: steadyRss,
  };
}

/**
 * How busy the verification slots were: the time single-attempt worker pods ran (created to
 * finished) over cap x the burst's worker span, and the refill delay, pairing the k-th pod to
 * finish with the (cap+k)-th pod created (a slot freed, the next pod that took it).
 */
export function slotUse(samples: BurstResult['samples'], cap: number): { utilisation: number; refill: Distribution; refillP90?: number } {
  const single = samples.filter((s) => s[1] !== null && s[2] !== null && (s[4] === undefined || s[4] === s[1])) as number[][];
  const created = single.map((s) => s[1]!).sort((a, b) => a - b);
  const finished = single.map((s) => s[2]!).sort((a, b) => a - b);
  if (created.length === 0) return { utilisation: 0, refill: { n: 0 } };
  const busy = single.reduce((a, s) => a + (s[2]! - s[1]!), 0);
  const span = finished[finished.length - 1]! - created[0]!;
  const refills: number[] = [];
  for (let k = 0; cap + k < created.length; k++) if (created[cap + k]! > finished[k]!) refills.push(created[cap + k]! - finished[k]!);
  return { utilisation: busy / (cap * span), refill: distribution(refills), ...(refills.length ? { refillP90: Math.round(percentile(refills, 90)!) } : {}) };
}

function printSummary(r: Results, out: (l: string) => void): void {
  out('summary (all runs pooled per size; ms):');
  out('  size  total(median)  reaction p50/p99   worker p50/p99   open-after-worker p50/p99   open p50/p95/p99/max          writes/node');
  for (const s of r.summary.bySize) {
    const d = (x: Distribution, keys: Array<keyof Distribution>) => keys.map((k) => x[k] ?? '-').join('/');
    out(
      `  ${String(s.size).padStart(4)}  ${String(s.totalMsMedian ?? '-').padStart(13)}  ${d(s.podCreatedAfterNodeCreated, ['p50', 'p99']).padStart(16)}  ${d(s.workerFinishedAfterPodCreated, ['p50', 'p99']).padStart(15)}  ` +
        `${d(s.taintRemovedAfterWorkerFinished, ['p50', 'p99']).padStart(26)}  ${d(s.taintRemovedAfterNodeCreated, ['p50', 'p95', 'p99', 'max']).padStart(28)}  ${s.writesPerNodeMedian}`,
    );
  }
  if (r.steady) {
    out(`  steady state: ${r.steady.nodes} verified nodes, controller RSS max ${r.steady.rssMiB.max} MiB (target < ${r.targets.controllerRssMiBWith5000Nodes})`);
    out(`  under the chart's limit (${r.steady.limit.memory}${r.steady.limit.enforced ? '' : ', not enforced'}): ${r.steady.phases.map((p) => `${p.phase} peak ${p.peakRssMiB} MiB / ${p.oomKills} OOM kills / ${p.restarts} restarts`).join('; ')}`);
  }
  for (const b of r.bursts) if (b.controller.oomKills || b.controller.restarts) out(`  burst ${b.size} (run ${b.repetition}): ${b.controller.oomKills} OOM kills, ${b.controller.restarts} restarts under ${b.controller.memoryLimit.memory}`);
}

function chartInput(r: Results): ChartInput {
  const load = r.load as { loadavgAtStart?: number[] };
  return {
    title: `kube-node-ready bursts in the sandbox: ${r.machine.nproc} cores, ${r.date.slice(0, 10)}, commit ${r.commit}, load avg at start ${load.loadavgAtStart?.[0] ?? '?'}`,
    bursts: r.bursts.map((b) => ({ size: b.size, samples: b.samples })),
  };
}

/** Indented JSON, but arrays of numbers (the per-node samples) on one line each. */
function writeResults(file: string, doc: unknown): void {
  writeFileSync(file, `${JSON.stringify(doc, null, 1).replace(/\[\n[-\d.,\s(null)]*\]/g, (m) => m.replace(/\s+/g, ''))}\n`);
}

function scaleTitle(date: string, commit: string, burst: number, limit: string): string {
  return `kube-node-ready as the cluster grows: ${cpus().length} cores, ${date.slice(0, 10)}, commit ${commit}, under the chart's ${limit} limit, bursts of ${burst}`;
}

function fmtS(ms: number | undefined): string {
  return ms === undefined ? '-' : `${(ms / 1000).toFixed(ms < 10_000 ? 2 : 1)}s`;
}

function git(root: string, args: string[]): string {
  try {
    return execFileSync('git', args, { cwd: root, stdio: ['ignore', 'pipe', 'ignore'] }).toString().trim();
  } catch {
    return 'unknown';
  }
}

function seconds(option: string, value: string): number {
  const n = Number(value);
  if (!Number.isFinite(n) || n <= 0) throw new Error(`${option}: expected a number of seconds, got ${value}`);
  return n;
}

function otherSandboxes(slot: number): string[] {
  try {
    return execFileSync('ip', ['netns', 'list']).toString().split('\n').map((l) => l.split(' ')[0] ?? '').filter((n) => n.startsWith('knr-sandbox-') && n !== `knr-sandbox-${slot}`);
  } catch {
    return [];
  }
}

/**
 * The environment the Helm chart's Deployment gives the controller, as far as it is fixed in the
 * template (`- name: X` with a literal `value:`): NODE_OPTIONS becomes the process's flags, the rest
 * (the malloc tuning) its environment. The bench runs the controller the way users run it; read
 * from the template, so the two cannot drift apart. `--controller-node-flags` and `--controller-env`
 * ('K=V K2=V2'; '' for none) replace either part for an experiment.
 */
function controllerRuntime(root: string, nodeFlags: string | undefined, env: string | undefined): ControllerRuntime {
  const template = join(root, 'deploy', 'helm', 'kube-node-ready', 'templates', 'deployment.yaml');
  const chart = new Map<string, string>();
  for (const m of readFileSync(template, 'utf8').matchAll(/- name: (\w+)\s*\n\s*value: (\S.*)$/gm)) chart.set(m[1]!, m[2]!.trim().replace(/^["']|["']$/g, ''));
  const flags = nodeFlags ?? chart.get('NODE_OPTIONS');
  if (flags === undefined) throw new Error(`no NODE_OPTIONS in ${template}: pass --controller-node-flags (or --controller-node-flags= for none)`);
  chart.delete('NODE_OPTIONS');
  const vars = env === undefined ? Object.fromEntries(chart) : Object.fromEntries(env.split(' ').filter(Boolean).map((kv) => {
    const at = kv.indexOf('=');
    if (at < 1) throw new Error(`--controller-env: expected NAME=VALUE, got ${kv}`);
    return [kv.slice(0, at), kv.slice(at + 1)];
  }));
  return { nodeFlags: flags.split(' ').filter(Boolean), env: vars };
}

main(process.argv.slice(2)).then(
  (code) => process.exit(code),
  (err: unknown) => {
    console.error(`bench: ${err instanceof Error ? (err.stack ?? err.message) : String(err)}`);
    process.exit(1);
  },
);

/** `qps=100,burst=200,workers=20,max-concurrent=100` on top of the chart's settings. */
function parseTuning(text: string, base: ControllerTuning): ControllerTuning {
  const keys: Record<string, keyof ControllerTuning> = { qps: 'qps', burst: 'burst', workers: 'workers', 'max-concurrent': 'maxConcurrentVerifications' };
  const t = { ...base };
  for (const part of text.split(',').filter(Boolean)) {
    const [k, v] = part.split('=');
    const key = keys[k ?? ''];
    if (!key || !/^\d+$/.test(v ?? '')) throw new Error(`--tuned: "${part}" is not one of ${Object.keys(keys).join(', ')} = a whole number`);
    t[key] = Number(v);
  }
  return t;
}

/** The race's chart: per size, each contender's node Ready -> open distribution. */
async function drawRaceChart(r: RaceResult & { date: string; commit: string }, png: string): Promise<void> {
  const labels = { 'kube-node-ready': 'kube-node-ready (chart defaults)', 'kube-node-ready-tuned': 'kube-node-ready (tuned)', 'node-readiness-controller': 'node-readiness-controller + its reporter' };
  await drawSideBySideChart(
    { runs: r.runs.map((x) => ({ contender: x.contender, size: x.size, samples: x.samples })) },
    `kube-node-ready vs node-readiness-controller ${r.versions.nodeReadinessController} with its reporter: node Ready -> taint removed, ${r.date.slice(0, 10)}, commit ${r.commit}`,
    png,
    labels,
  );
}
