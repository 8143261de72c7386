// The suite's table: one row per run of a scenario (an inconclusive run and its rerun each have
// one), its verdict, whether its premises were met ("-" where it has none), violations per
// invariant (the scenario's own promise "-" where it has none), recovery and settle times.
import { INVARIANTS, type Invariant, type ScenarioResult } from './run.js';
import type { Verdict } from './verdict.js';

const HEADERS: Record<Invariant, string> = {
  wrongOpen: 'wrong opening',
  lost: 'lost',
  duplicates: 'duplicate workers',
  wrongDelete: 'wrong deletion',
  foreignDamage: 'foreign damage',
  recovery: 'recovery > bound',
  promise: 'scenario promise',
};

const secs = (ms: number | undefined) => (ms === undefined ? '-' : `${(ms / 1000).toFixed(1)} s`);

const VERDICT: Record<Verdict, string> = { pass: 'pass', violated: 'VIOLATED', inconclusive: 'inconclusive' };

/** Premises of one run: "-" (none), "met", or "NOT MET" with what was missing and what was measured. */
export function premiseCell(r: Pick<ScenarioResult, 'premises'>): string {
  if (r.premises.length === 0) return '-';
  const missed = r.premises.filter((p) => !p.met);
  return missed.length === 0 ? 'met' : `NOT MET: ${missed.map((p) => `${p.what} (${p.measured})`).join('; ')}`;
}

/** What a row shows of one run. */
export type Row = Pick<ScenarioResult, 'scenario' | 'run' | 'verdict' | 'premises' | 'nodes' | 'healthy' | 'violations' | 'promise' | 'recoveryMs' | 'settleMs' | 'opened' | 'workerPods' | 'controllerDeletions'>;

function rows(results: Row[]): string[][] {
  return results.map((r) => [
    r.run > 1 ? `${r.scenario} (run ${r.run})` : r.scenario,
    VERDICT[r.verdict],
    premiseCell(r),
    `${r.nodes} (${r.healthy} healthy)`,
    ...INVARIANTS.map((k) => (k === 'promise' && r.promise === undefined ? '-' : String(r.violations[k]))),
    secs(r.recoveryMs),
    secs(r.settleMs),
    `${r.opened} / ${r.workerPods} / ${r.controllerDeletions}`,
  ]);
}

const header = () => ['scenario', 'verdict', 'premise', 'nodes', ...INVARIANTS.map((k) => HEADERS[k]), 'recovery', 'all healthy open', 'opened / pods / deleted'];

export function textTable(results: Row[]): string {
  const all = [header(), ...rows(results)];
  const widths = all[0]!.map((_, c) => Math.max(...all.map((r) => r[c]!.length)));
  const line = (r: string[]) => r.map((cell, c) => cell.padEnd(widths[c]!)).join('  ');
  return [line(all[0]!), widths.map((w) => '-'.repeat(w)).join('  '), ...all.slice(1).map(line)].join('\n');
}

export function markdownTable(results: Row[]): string {
  const h = header();
  return [`| ${h.join(' | ')} |`, `| ${h.map(() => '---').join(' | ')} |`, ...rows(results).map((r) => `| ${r.join(' | ')} |`)].join('\n');
}
