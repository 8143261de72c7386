// A scenario's verdict and the suite's exit code. A violation is a broken promise: a product fault.
// A premise not met means the scenario did not create the situation it is about (no node waited
// longer than stuckNodeTimeout, say), so its promise was not put to the test: that is no product
// fault, and no pass either. Such a run is inconclusive, is run again, and stays visible in the table.

/** What a scenario needs to have happened for its promises to be tested, and whether it did. */
export interface Premise {
  /** What had to happen, e.g. "a node waited longer than stuckNodeTimeout (120 s) for its worker under one leader". */
  what: string;
  met: boolean;
  /** What was measured, e.g. "longest 244.1 s". */
  measured: string;
}

/**
 * `violated`: an invariant or the scenario's promise was broken (whatever the premises: a broken
 * promise is a fault even in a run that missed its premise). `inconclusive`: nothing broken, but a
 * premise was not met. `pass`: nothing broken, every premise met.
 */
export type Verdict = 'pass' | 'violated' | 'inconclusive';

export function verdictOf(r: { violations: Record<string, number>; premises: readonly Premise[] }): Verdict {
  if (Object.values(r.violations).some((n) => n > 0)) return 'violated';
  if (r.premises.some((p) => !p.met)) return 'inconclusive';
  return 'pass';
}

/** Exit codes of dist/chaos.mjs (2 is the CLI's own error: bad flags, a crash). */
export const EXIT = { pass: 0, violated: 1, inconclusive: 3 } as const;

/**
 * The suite's outcome from the last run of each scenario (an inconclusive run is run again; the
 * rerun's verdict stands, and the miss stays in the table). Any violation, or a scenario that could
 * not run at all, fails the suite (exit 1). Otherwise a scenario still inconclusive after its reruns
 * makes the suite inconclusive (exit 3: not a product fault, but not a pass: run it again).
 */
export function suiteOutcome(lastRuns: ReadonlyArray<{ scenario: string; verdict: Verdict }>, failedToRun: readonly string[]): { code: number; line: string } {
  const violated = lastRuns.filter((r) => r.verdict === 'violated').map((r) => r.scenario);
  const inconclusive = lastRuns.filter((r) => r.verdict === 'inconclusive').map((r) => r.scenario);
  const passed = lastRuns.length - violated.length - inconclusive.length;
  const parts = [`${passed} passed`, `${violated.length} violated${violated.length ? ` (${violated.join(', ')})` : ''}`, `${inconclusive.length} inconclusive${inconclusive.length ? ` (${inconclusive.join(', ')})` : ''}`];
  if (failedToRun.length > 0) parts.push(`${failedToRun.length} could not run (${failedToRun.join(', ')})`);
  const summary = `${parts.join(', ')} of ${lastRuns.length + failedToRun.length} scenario(s)`;
  if (violated.length > 0 || failedToRun.length > 0) return { code: EXIT.violated, line: `FAILED: ${summary}` };
  if (inconclusive.length > 0) {
    return { code: EXIT.inconclusive, line: `INCONCLUSIVE: ${summary}; a premise was not met even after a rerun: no promise was broken, but these scenarios tested nothing, run them again` };
  }
  return { code: EXIT.pass, line: `PASSED: ${summary}` };
}
