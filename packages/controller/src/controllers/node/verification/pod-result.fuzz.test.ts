import { describe, expect, it } from 'vitest';
import { fuzz } from '../../../../../core/src/testing/fuzz.js';
import { isValidSummaryDoc, terminationMessage } from '../../../../../core/src/testing/summary-inputs.js';
import { aNode, aWorkerPod, testConfig } from '../../../testing/builders.js';
import { evaluateWorkerPod, MAX_MESSAGE } from './pod-result.js';
import type { WorkerSummary } from './summary.js';
import { Outcome } from './types.js';

/**
 * Fuzz test of reading a finished worker pod (seeded: a failure names its seed, and
 * KNR_FUZZ_SEED=<seed> replays that case alone). The termination message is whatever the container
 * wrote: a summary, a cut or mangled one, or garbage. Only a valid summary that passed, with exit
 * code 0, may verify a node.
 */

const T0 = Date.UTC(2025, 0, 1);
const config = testConfig();
const node = aNode('node-1').tainted().build();
const pod = aWorkerPod(node, 1).createdAt(T0).scheduledAt(T0);

function summaryOf(text: string): WorkerSummary | undefined {
  try {
    const doc: unknown = JSON.parse(text);
    return isValidSummaryDoc(doc) ? doc : undefined;
  } catch {
    return undefined;
  }
}

/** The outcome docs/worker.md gives the exit code and summary (independently of pod-result.ts). */
function expectedOutcome(exitCode: number, summary: WorkerSummary | undefined): Outcome {
  if (exitCode !== 0 && exitCode !== 1) return Outcome.WorkerError;
  if (!summary) return Outcome.WorkerError;
  if (exitCode === 0 && summary.ok && summary.checks.every((c) => c.ok)) return Outcome.Passed;
  if (exitCode === 1 && !summary.ok) return Outcome.ChecksFailed;
  return Outcome.WorkerError;
}

describe('evaluateWorkerPod on any termination message (fuzz)', () => {
  it('passes only a valid passing summary with exit 0, and always gives a one-line message of at most MAX_MESSAGE', () => {
    fuzz(
      0x90d000,
      2000,
      (r) => {
        const { kind, text } = terminationMessage(r);
        const exitCode = r.chance(0.85) ? r.pick([0, 1]) : r.pick([2, 3, 137, 143, -1, 255, 2 ** 31 - 1]);
        const reason = r.chance(0.1) ? 'OOMKilled' : undefined;
        const progress = evaluateWorkerPod(pod.exited(exitCode, text, reason ? { reason } : {}).build(), T0 + 60_000, config.worker);
        if (!progress.done) throw new Error(`a terminated worker pod is not done: ${JSON.stringify(progress)}`);
        const { result } = progress;
        const summary = summaryOf(text);
        const what = `exit ${exitCode}, ${kind}: ${text.slice(0, 120)}`;

        expect(result.outcome, what).toBe(expectedOutcome(exitCode, summary));
        if (result.outcome === Outcome.Passed) expect(summary !== undefined && exitCode === 0, what).toBe(true);
        expect(result.message.length, what).toBeLessThanOrEqual(MAX_MESSAGE);
        expect(result.message, what).not.toMatch(/[\n\r]/);
        expect(result.message.length, what).toBeGreaterThan(0);
        expect(result.exitCode).toBe(exitCode);
        expect(result.failedChecks, what).toEqual(
          result.outcome === Outcome.ChecksFailed ? (summary?.checks ?? []).filter((c) => !c.ok).map((c) => c.name) : [],
        );
      },
      { hangAfterCpuMs: 20_000 },
    );
  }, 120_000);
});
