// The suite's table: one row per scenario, violations per invariant (the scenario's own promise "-"
// where it has none), recovery and settle times.
import { INVARIANTS, type Invariant, type ScenarioResult } from './run.js';

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

function rows(results: ScenarioResult[]): string[][] {
  return results.map((r) => [
    r.scenario,
    `${r.nodes} (${r.healthy} healthy)`,
    ...INVARIANTS.map((k) => (k === 'promise' && r.promise === undefined ? '-' : String(r.violations[k]))),
    secs(r.recoveryMs),
    secs(r.settleMs),
    `${r.opened} / ${r.workerPods} / ${r.controllerDeletions}`,
  ]);
}

const header = () => ['scenario', 'nodes', ...INVARIANTS.map((k) => HEADERS[k]), 'recovery', 'all healthy open', 'opened / pods / deleted'];

export function textTable(results: ScenarioResult[]): string {
  const all = [header(), ...rows(results)];
  const widths = all[0]!.map((_, c) => Math.max(...all.map((r) => r[c]!.length)));
  const line = (r: string[]) => r.map((cell, c) => cell.padEnd(widths[c]!)).join('  ');
  return [line(all[0]!), widths.map((w) => '-'.repeat(w)).join('  '), ...all.slice(1).map(line)].join('\n');
}

export function markdownTable(results: ScenarioResult[]): string {
  const h = header();
  return [`| ${h.join(' | ')} |`, `| ${h.map(() => '---').join(' | ')} |`, ...rows(results).map((r) => `| ${r.join(' | ')} |`)].join('\n');
}
