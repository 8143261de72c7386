// `make chaos`: the fault suite (docs/reliability.md). Each scenario breaks something on purpose
// during a burst of simulated nodes and counts violations of the six invariants.
//   node dist/chaos.mjs [--quick] [--only leader-kill,node-recreate] [--seed N] [--slot 20]
//                       [--nodes N] [--reruns 1] [--out chaos/results/<date>[-quick].json] [--update-docs]
// Exits 1 when any scenario violated an invariant (or failed to run); 3 when none did but a
// scenario's premise was not met even when run again (inconclusive, verdict.ts); 0 otherwise.
import { mkdirSync, readFileSync, writeFileSync } from 'node:fs';
import { cpus, loadavg } from 'node:os';
import { dirname, join, resolve } from 'node:path';
import { parseArgs } from 'node:util';
import { repoRoot, stopSandbox } from '@kube-node-ready/sandbox';
import { children } from '../../bench/src/util.js';
import type { ChaosEnv } from './cluster.js';
import { rng } from '../../packages/core/src/testing/random.js';
import { INVARIANTS, RECOVERY_BOUND_MS, runScenario, SETTLE_BOUND_MS, type ScenarioResult } from './run.js';
import { SCENARIOS } from './scenarios.js';
import { markdownTable, premiseCell, textTable } from './table.js';
import { EXIT, suiteOutcome } from './verdict.js';

/** Scenarios of the short version that `make test` runs. */
// make test's share of the suite, kept short for every build: the controller killed mid-burst and
// nodes re-created under their own names while their worker runs. The others (worker pods deleted
// and evicted, watches expired by etcd compaction, API and DNS faults, the apiserver restarted) run
// in make chaos only.
export const QUICK = ['leader-kill', 'node-recreate'];

const HELP = `make chaos: the fault suite (docs/reliability.md)
  node dist/chaos.mjs [options]
    --quick           the short version (make test): ${QUICK.join(', ')}, about 12 nodes each
    --only a,b        run these scenarios (${SCENARIOS.map((s) => s.name).join(', ')})
    --seed N          random seed (default: time-based; printed, so a run can be repeated)
    --slot N          sandbox slot (default 20)
    --nodes N         nodes in each scenario's burst, instead of its own size
    --reruns N        run a scenario again, up to N times, while its premise is not met and
                      nothing was violated (default 1)
    --out FILE        results JSON (default chaos/results/<date>[-quick].json)
    --update-docs     write the table into docs/reliability.md
  Exit code: 0 every scenario passed; 1 a violation (a broken promise: a product fault) or a
  scenario that could not run; ${EXIT.inconclusive} inconclusive: nothing was violated, but a scenario did not
  create the situation it tests (its premise), even when run again: not a product fault, run it again.
`;

async function main(argv: string[]): Promise<number> {
  const { values } = parseArgs({
    args: argv,
    options: {
      quick: { type: 'boolean', default: process.env.CHAOS === 'quick' },
      only: { type: 'string' },
      seed: { type: 'string' },
      slot: { type: 'string', default: '20' },
      nodes: { type: 'string' },
      reruns: { type: 'string', default: '1' },
      out: { type: 'string' },
      'update-docs': { type: 'boolean', default: false },
      help: { type: 'boolean', short: 'h' },
    },
  });
  if (values.help) {
    process.stdout.write(HELP);
    return 0;
  }
  const quick = values.quick ?? false;
  const names = values.only ? values.only.split(',') : quick ? QUICK : SCENARIOS.map((s) => s.name);
  const unknown = names.filter((n) => !SCENARIOS.some((s) => s.name === n));
  if (unknown.length > 0) throw new Error(`unknown scenario ${unknown.join(', ')}; known: ${SCENARIOS.map((s) => s.name).join(', ')}`);
  const seed = values.seed !== undefined ? Number(values.seed) : Date.now() % 1_000_000;
  const slot = Number(values.slot);
  const nodes = values.nodes !== undefined ? Number(values.nodes) : undefined;
  if (nodes !== undefined && !(Number.isInteger(nodes) && nodes >= 1)) throw new Error(`--nodes ${values.nodes}: expected a whole number of nodes, at least 1`);
  const reruns = Number(values.reruns);
  if (!(Number.isInteger(reruns) && reruns >= 0)) throw new Error(`--reruns ${values.reruns}: expected a whole number, 0 or more`);
  const root = repoRoot();
  const date = new Date().toISOString().slice(0, 10);
  const out = resolve(values.out ?? join(root, 'chaos', 'results', `${date}${quick ? '-quick' : ''}.json`));
  const env: ChaosEnv = {
    dir: join(root, '.sandbox', `chaos-${slot}`),
    slot,
    logDir: join(root, '.sandbox', `chaos-${slot}-logs`),
    out: (line) => process.stdout.write(`${new Date().toISOString().slice(11, 19)} ${line}\n`),
  };
  sandboxOf = { dir: env.dir, slot };

  mkdirSync(env.logDir, { recursive: true });
  env.out(`chaos: ${names.length} scenarios (${quick ? 'quick' : 'full'}), seed ${seed}, sandbox slot ${slot}, logs in ${env.logDir}`);

  const random = rng(seed);
  // Every run, reruns included (the table shows them all); the last run of each scenario decides.
  const results: ScenarioResult[] = [];
  const lastRuns: ScenarioResult[] = [];
  const failedToRun: string[] = [];
  for (const [i, name] of names.entries()) {
    const s = SCENARIOS.find((x) => x.name === name)!;
    const tag = `(${i + 1}/${names.length}) ${name}`;
    env.out(`${tag}: ${s.what}`);
    for (let run = 1; ; run++) {
      try {
        const r = await runScenario(env, s, { quick, random, seed, run, ...(nodes !== undefined ? { nodes } : {}) });
        results.push(r);
        const bad = INVARIANTS.filter((k) => r.violations[k] > 0);
        env.out(
          `${tag}${run > 1 ? ` (run ${run})` : ''}: ${r.verdict === 'inconclusive' ? 'INCONCLUSIVE' : r.verdict}: ` +
            `${bad.length === 0 ? 'no violations' : `VIOLATIONS: ${bad.map((k) => `${k} ${r.violations[k]}`).join(', ')}`}; premise ${premiseCell(r)}; ` +
            `recovery ${fmt(r.recoveryMs)}, settled ${fmt(r.settleMs)}, ${(r.durationMs / 1000).toFixed(0)}s`,
        );
        for (const p of r.premises) env.out(`    premise ${p.met ? 'met' : 'NOT MET'}: ${p.what}: ${p.measured}`);
        for (const line of r.promise?.summary ?? []) env.out(`    ${line}`);
        for (const d of r.details.slice(0, 20)) env.out(`    ${d.invariant}: ${d.detail}`);
        if (r.verdict === 'inconclusive' && run <= reruns) {
          env.out(`${tag}: its premise was not met and nothing was violated: the run tested nothing, running it again (${run} of ${reruns} reruns)`);
          continue;
        }
        lastRuns.push(r);
      } catch (err) {
        failedToRun.push(name);
        env.out(`${tag}: could not run: ${err instanceof Error ? (err.stack ?? err.message) : String(err)}`);
        await stopSandbox(env.dir, slot, () => {}).catch(() => {});
      }
      break;
    }
  }

  const outcome = suiteOutcome(lastRuns, failedToRun);
  process.stdout.write(`\n${textTable(results)}\n`);
  const report = {
    date: new Date().toISOString(),
    quick,
    seed,
    bounds: { settleMs: SETTLE_BOUND_MS, recoveryMs: RECOVERY_BOUND_MS },
    machine: { cpus: cpus().length, loadavg: loadavg().map((x) => Number(x.toFixed(2))) },
    reruns,
    failedToRun,
    results,
  };
  mkdirSync(dirname(out), { recursive: true });
  writeFileSync(out, `${JSON.stringify(report, null, 2)}\n`);
  env.out(`results: ${out}`);
  if (values['update-docs']) {
    const doc = join(root, 'docs', 'reliability.md');
    const text = readFileSync(doc, 'utf8');
    const begin = '<!-- chaos-table:begin -->';
    const end = '<!-- chaos-table:end -->';
    const a = text.indexOf(begin);
    const b = text.indexOf(end);
    if (a < 0 || b < a) throw new Error(`${doc} has no ${begin} ... ${end} block to update`);
    const cmd = `node dist/chaos.mjs${quick ? ' --quick' : ''}${values.only ? ` --only ${values.only}` : ''}${nodes !== undefined ? ` --nodes ${nodes}` : ''} --seed ${seed}`;
    const block = `${begin}\n${markdownTable(results)}\n\nRun ${report.date.slice(0, 16).replace('T', ' ')} UTC, seed ${seed} (\`${cmd}\`), ${report.machine.cpus} cores, load ${report.machine.loadavg.join(' ')}: ${outcome.line}.\n${end}`;
    writeFileSync(doc, text.slice(0, a) + block + text.slice(b + end.length));
    env.out(`updated ${doc}`);
  }
  const violations = results.reduce((a, r) => a + INVARIANTS.reduce((x, k) => x + r.violations[k], 0), 0);
  const missed = results.filter((r) => r.premises.some((p) => !p.met)).length;
  env.out(`chaos: ${violations} violation(s) and ${missed} premise miss(es) in ${results.length} run(s)`);
  env.out(`chaos: ${outcome.line}`);
  return outcome.code;
}

const fmt = (ms: number | undefined) => (ms === undefined ? '-' : `${(ms / 1000).toFixed(1)}s`);

const killChildren = () => {
  for (const c of children) c.kill('SIGKILL');
};
/** The sandbox the scenarios run in: stopped on SIGINT/SIGTERM too (it runs detached, with its nodes). */
let sandboxOf: { dir: string; slot: number } | undefined;
let exiting = false;
const onSignal = (code: number) => () => {
  killChildren();
  if (exiting || !sandboxOf) process.exit(code);
  exiting = true;
  process.stderr.write(`chaos: stopping the sandbox of slot ${sandboxOf.slot} (again to exit at once)\n`);
  void stopSandbox(sandboxOf.dir, sandboxOf.slot, () => {})
    .catch(() => {})
    .finally(() => process.exit(code));
};
process.on('SIGINT', onSignal(130));
process.on('SIGTERM', onSignal(143));

main(process.argv.slice(2)).then(
  (code) => {
    killChildren();
    process.exit(code);
  },
  (err: unknown) => {
    killChildren();
    process.stderr.write(`chaos: ${err instanceof Error ? err.message : String(err)}\n`);
    process.exit(2);
  },
);
