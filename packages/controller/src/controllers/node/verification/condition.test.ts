import { describe, expect, it } from 'vitest';
import { testConfig } from '../../../testing/builders.js';
import { desiredCondition, waitingCondition, writesToNode } from './condition.js';
import { Outcome, Phase } from './types.js';

const config = testConfig();
const passed = desiredCondition({ uid: 'u', attempt: 1, failures: 0, phase: Phase.Passed, lastOutcome: Outcome.Passed }, config);
const failed = desiredCondition({ uid: 'u', attempt: 3, failures: 3, phase: Phase.Failed, lastOutcome: Outcome.ChecksFailed }, config);
const verifying = desiredCondition({ uid: 'u', attempt: 2, failures: 0, phase: Phase.Verifying }, config);
const backoff = desiredCondition({ uid: 'u', attempt: 2, failures: 1, phase: Phase.Backoff, nextAttemptAt: 0, lastOutcome: Outcome.ChecksFailed }, config);

describe('writesToNode: which conditions reach the Node', () => {
  it('every final verdict: passed, failed for good, never launchable, an unsupported OS', () => {
    expect(writesToNode(passed, undefined)).toBe(true);
    expect(writesToNode(failed, undefined)).toBe(true);
    expect(writesToNode(waitingCondition(['Ready'], true, config), undefined)).toBe(true);
  });

  it('no step of a first verification: the Node carries no verdict yet', () => {
    expect(writesToNode(verifying, undefined)).toBe(false);
    expect(writesToNode(backoff, undefined)).toBe(false);
    expect(writesToNode(waitingCondition(['Ready'], false, config), undefined)).toBe(false);
    expect(writesToNode(backoff, verifying)).toBe(false);
  });

  it('the first step of a verification again withdraws the earlier verdict the Node still carries', () => {
    expect(writesToNode(verifying, passed)).toBe(true);
    expect(writesToNode(verifying, failed)).toBe(true);
  });
});
