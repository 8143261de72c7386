// The whole controller (startController, real clock) with remediation on: a Karpenter node whose
// worker can never start exhausts its retries and is replaced through its NodeClaim, while a
// healthy node beside it is verified and kept. This proves the wiring in the composition root
// (docs/remediation.md, "Inside the controller"); until that is applied the configuration has no
// remediation keys and the test skips, saying so.
import { afterAll, beforeAll, expect, it } from 'vitest';
import { parseConfig } from '../../../config/load.js';
import type { ControllerConfigInput } from '../../../config/schema.js';
import { harness, nodeEvents, nodeEventsWhen, readNode, waitFor, type Harness } from '../../../../test/harness.js';
import { createNodeClaim, deleteNodeClaims, getNodeClaim, installNodeClaimCrd } from '../../../../test/remediation/karpenter.js';

const WIRED = (() => {
  try {
    parseConfig({ nodeManagement: { deleteFailedNodes: true, remediation: { minNodeAge: '0s' } } });
    return true;
  } catch {
    return false;
  }
})();
let h: Harness | undefined;
let skip: string | undefined = WIRED ? undefined : 'remediation is not wired into the controller yet: nodeManagement.remediation has no keys in config/schema.ts';

beforeAll(async () => {
  if (skip) return;
  const crd = await installNodeClaimCrd();
  if ('skip' in crd) skip = crd.skip;
  h = await harness('ctlrem');
});

afterAll(async () => {
  await h?.cleanup();
  if (h) await deleteNodeClaims(`knr-test=${h.id}`);
});

it('deleteFailedNodes: a failed Karpenter node is replaced through its NodeClaim; a healthy node is verified and kept', async (ctx) => {
  if (skip || !h) return ctx.skip(skip ?? 'no harness');
  const pool = `wired-${h.id}`;
  const providerID = `aws:///us-east-1a/i-wired-${h.id}`;
  const bad = await h.addNode({ prefix: `bad${h.id}`, faults: { neverStart: true }, providerID, labels: { 'karpenter.sh/nodepool': pool, 'karpenter.sh/registered': 'true' } });
  const claim = `${pool}-${bad}`;
  await createNodeClaim({ name: claim, pool, labels: { 'knr-test': h.id }, status: { providerID, nodeName: bad } });
  const good = await h.addNode({ prefix: `good${h.id}` });

  const overrides = { nodeManagement: { deleteFailedNodes: true, remediation: { minNodeAge: '0s' } } } as unknown as ControllerConfigInput;
  const ctl = await h.start(overrides);

  // 1 + maxRetries (1) attempts, each "not started" after startTimeout (4 s), then remediation.
  await waitFor(async () => (await getNodeClaim(claim)) === undefined, `NodeClaim ${claim} to be deleted`, 90_000, 250);
  expect(await readNode(bad)).toBeDefined(); // Karpenter (absent here) would drain and delete it
  // The Event (and the counter) follow the NodeClaim's deletion.
  const reasons = (await nodeEventsWhen(bad, (list) => list.some((e) => e.reason === 'RemediationNodeClaimDeleted'), 'the RemediationNodeClaimDeleted Event')).map((e) => e.reason);
  expect(reasons).toEqual(expect.arrayContaining(['VerificationWorkerNotStarted', 'VerificationFailed', 'RemediationNodeClaimDeleted']));
  const text = await ctl.metrics();
  expect(text).toContain('kube_node_ready_remediations_total{action="delete-nodeclaim",result="deleted"} 1');
  expect(text).toContain('kube_node_ready_remediation_blocked{reason="circuit-breaker"} 0');

  const opened = await waitFor(async () => (await readNode(good))?.metadata?.labels?.[h?.verifiedLabel.key ?? ''] === 'true', `${good} to be verified`, 60_000, 250);
  expect(opened).toBe(true);
  expect((await nodeEvents(good)).map((e) => e.reason)).not.toContain('RemediationNodeDeleted');
});
