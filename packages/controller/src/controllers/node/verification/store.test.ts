import { silentLogger } from '@kube-node-ready/core';
import { describe, expect, it } from 'vitest';
import { installationOf, newNodeVerification, statusOf, VERIFIED_CONDITION, type NodeVerification } from '../../../api/nodeverification.js';
import { realClock } from '../../../clock.js';
import type { KubeClient } from '../../../kube/client.js';
import { aNode, testConfig } from '../../../testing/builders.js';
import { MemoryProgressStore, NodeVerificationStore } from './store.js';
import { Outcome, Phase, type VerificationState } from './types.js';

// The attempt in flight is not written (ADR 0006): every reader of the store sees it (remediation
// does not call a node whose worker runs stuck) until an outcome newer than it is stored.
const config = testConfig();
const node = aNode('n1').tainted().build();
const uid = node.metadata?.uid ?? '';
const inFlight: VerificationState = { uid, attempt: 2, failures: 1, phase: Phase.Verifying, pod: 'kube-system/knr-n1-a2' };
const backoff: VerificationState = { uid, attempt: 1, failures: 1, phase: Phase.Backoff, nextAttemptAt: Date.UTC(2026, 0, 1), lastOutcome: Outcome.NotStarted, lastAttempt: 1, lastMessage: 'x' };

function stored(state: VerificationState): NodeVerification {
  const nv = newNodeVerification(node, installationOf(config.nodeManagement.condition.type));
  return { ...nv, status: statusOf(state, node, { type: VERIFIED_CONDITION, status: 'False', reason: 'NotStarted', message: 'x' }, nv, Date.UTC(2026, 0, 1)) };
}

describe.each([
  ['NodeVerificationStore', (cache: Map<string, NodeVerification>) => new NodeVerificationStore({ kube: {} as KubeClient, config, clock: realClock, log: silentLogger(), cache })],
  ['MemoryProgressStore (dry run)', () => new MemoryProgressStore()],
])('%s: the attempt in flight', (_name, make) => {
  it('is what read() says while the stored progress is older, and goes once an outcome at least as new is stored or the node is forgotten', async () => {
    const cache = new Map<string, NodeVerification>();
    const store = make(cache);
    store.follow(inFlight, 'n1');
    expect(store.read(node)).toEqual({ kind: 'ok', state: inFlight });
    expect(store.inFlight('n1')).toEqual(inFlight);
    // A node re-created under the name is another node: not its attempt.
    expect(store.read(aNode('n1').tainted().uid('another').build())).toEqual({ kind: 'none' });
    expect(store.inFlight('n1')).toBeUndefined();

    store.follow(inFlight, 'n1');
    if (store instanceof NodeVerificationStore) cache.set('n1', stored(backoff)); // attempt 1's outcome, older
    else await store.save(node, backoff);
    expect(store.read(node)).toEqual({ kind: 'ok', state: inFlight });
    const passed: VerificationState = { ...inFlight, failures: 0, phase: Phase.Passed, lastOutcome: Outcome.Passed, lastAttempt: 2, lastMessage: 'ok', verifiedAt: Date.UTC(2026, 0, 1) };
    if (store instanceof NodeVerificationStore) cache.set('n1', stored(passed));
    else await store.save(node, passed);
    expect(store.read(node)).toMatchObject({ kind: 'ok', state: { attempt: 2, phase: Phase.Passed } });
    expect(store.inFlight('n1')).toBeUndefined();

    store.follow({ ...inFlight, attempt: 3 }, 'n1');
    store.forget('n1');
    expect(store.inFlight('n1')).toBeUndefined();
  });
});
