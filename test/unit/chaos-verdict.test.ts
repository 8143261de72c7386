import { describe, expect, it } from 'vitest';
import { INVARIANTS, type Invariant } from '../../chaos/src/run.js';
import { QUEUE, queueWaitFloorMs } from '../../chaos/src/scenarios.js';
import { markdownTable, premiseCell, textTable, type Row } from '../../chaos/src/table.js';
import { EXIT, suiteOutcome, verdictOf, type Premise } from '../../chaos/src/verdict.js';

const none = (): Record<Invariant, number> => Object.fromEntries(INVARIANTS.map((k) => [k, 0])) as Record<Invariant, number>;
const met: Premise = { what: 'a node waited longer than stuckNodeTimeout (120 s)', met: true, measured: 'longest 244.0 s' };
const missed: Premise = { what: 'a node waited longer than stuckNodeTimeout (120 s)', met: false, measured: 'longest 26.6 s' };

// A premise not met is no product fault and no pass: the suite keeps the two apart.
describe('chaos: a scenario run is violated, inconclusive or passed', () => {
  it.each([
    { case: 'nothing broken, every premise met', violations: {}, premises: [met], want: 'pass' },
    { case: 'nothing broken, no premise to meet', violations: {}, premises: [], want: 'pass' },
    { case: 'nothing broken, a premise not met', violations: {}, premises: [met, missed], want: 'inconclusive' },
    { case: 'a broken promise, premises met', violations: { wrongOpen: 1 }, premises: [met], want: 'violated' },
    { case: 'a broken promise in a run that missed its premise', violations: { wrongDelete: 2 }, premises: [missed], want: 'violated' },
  ])('$case: $want', ({ violations, premises, want }) => {
    expect(verdictOf({ violations: { ...none(), ...violations }, premises })).toBe(want);
  });
});

describe('chaos: the exit code follows the last run of each scenario', () => {
  it.each([
    { case: 'all passed', runs: ['pass', 'pass'], failed: [], code: EXIT.pass, line: /^PASSED: 2 passed/ },
    { case: 'one violated, one inconclusive', runs: ['violated', 'inconclusive'], failed: [], code: EXIT.violated, line: /^FAILED: .*1 violated \(s0\), 1 inconclusive \(s1\)/ },
    { case: 'one inconclusive after its reruns', runs: ['pass', 'inconclusive'], failed: [], code: EXIT.inconclusive, line: /^INCONCLUSIVE: .*1 inconclusive \(s1\).*run them again/ },
    { case: 'a scenario could not run', runs: ['pass'], failed: ['queue'], code: EXIT.violated, line: /could not run \(queue\)/ },
  ])('$case: exit $code', ({ runs, failed, code, line }) => {
    const outcome = suiteOutcome(
      runs.map((verdict, i) => ({ scenario: `s${i}`, verdict: verdict as 'pass' | 'violated' | 'inconclusive' })),
      failed,
    );
    expect(outcome.code).toBe(code);
    expect(outcome.line).toMatch(line);
  });

  it('tells an inconclusive suite from a failed and a passed one', () => {
    expect(new Set(Object.values(EXIT)).size).toBe(3);
    expect(EXIT.inconclusive).not.toBe(2); // the CLI's own error
  });
});

describe('chaos: the table', () => {
  const row = (over: Partial<Row>): Row => ({
    scenario: 'queue',
    run: 1,
    verdict: 'pass',
    premises: [met],
    nodes: 152,
    healthy: 152,
    violations: none(),
    promise: { summary: [], observed: {} },
    recoveryMs: 100,
    settleMs: 600,
    opened: 152,
    workerPods: 152,
    controllerDeletions: 0,
    ...over,
  });

  it('shows a premise miss apart from the violation columns, with what was measured', () => {
    const table = markdownTable([row({ verdict: 'inconclusive', premises: [met, missed] }), row({ run: 2 })]);
    const [head, , first, second] = table.split('\n');
    expect(head).toMatch(/^\| scenario \| verdict \| premise \| nodes \| wrong opening /);
    expect(first).toMatch(/^\| queue \| inconclusive \| NOT MET: a node waited longer than stuckNodeTimeout \(120 s\) \(longest 26\.6 s\) \| 152 \(152 healthy\) \| 0 \| 0 \| 0 \| 0 \| 0 \| 0 \| 0 \|/);
    expect(second).toMatch(/^\| queue \(run 2\) \| pass \| met \|/);
  });

  it('says VIOLATED, and "-" for a scenario without premises or promise', () => {
    const text = textTable([row({ scenario: 'baseline', verdict: 'violated', premises: [], promise: undefined, violations: { ...none(), lost: 1 } })]);
    expect(text.split('\n')[2]).toMatch(/^baseline\s+VIOLATED\s+-\s+152 \(152 healthy\)\s+0\s+1\s+0\s+0\s+0\s+0\s+-\s/);
    expect(premiseCell({ premises: [] })).toBe('-');
  });
});

describe('chaos: the queue scenario makes its line long by construction', () => {
  it('the least wait is the slots at their fastest pace minus the time the burst takes to join', () => {
    // 10 nodes, 2 slots held 6 s each: the 10th node gets its worker no sooner than 4 x 6 s after
    // the first; created 9 / 3 = 3 s after the first.
    expect(queueWaitFloorMs(10, 2, 6_000, 3)).toBe(21_000);
    expect(queueWaitFloorMs(1, 2, 6_000, 3)).toBe(0);
  });

  it('outlasts stuckNodeTimeout by at least 30 s, full and quick', () => {
    for (const size of ['full', 'quick'] as const) {
      expect(queueWaitFloorMs(QUEUE.nodes[size], QUEUE.slots[size], QUEUE.holdMs, QUEUE.perSecond)).toBeGreaterThan(QUEUE.stuckNodeTimeoutMs + 30_000);
    }
  });
});
