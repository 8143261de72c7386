// The startup timeout against the real apiserver (nodeManagement.startupTimeout, onStartupTimeout),
// one profile per outcome: three nodes that can never run the worker (another agent's startup
// taint stays on them) reach the timeout. keep: failed, taint kept, failed taint added; open: our
// taint removed, unverified (no label, no failed taint), the other taint untouched; replace:
// failed, then deleted by remediation (a plain node: the Node object). A fourth node whose taint
// goes in time is verified as usual.
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import type { ControllerConfigInput } from '../../../config/schema.js';
import { harness, nodeEventsWhen, progressOf, readNode, waitFor, type Harness } from '../../../../test/harness.js';
import { core, readVerification } from '../../../../../../test/sandbox.js';
import { k8s } from '@kube-node-ready/sandbox';

let h: Harness;

beforeAll(async () => {
  h = await harness('ctlstart');
});

afterAll(async () => {
  await h?.cleanup();
});

const OUTCOME = 'startup.kube-node-ready.test/outcome';
const AGENT = { key: 'agent.kube-node-ready.test/not-ready', value: 'true', effect: 'NoSchedule' };

describe('startup timeout', () => {
  it('keep, open and replace each do what they say to a node without a verdict in time; a node that comes up in time is verified', async () => {
    const profile = (outcome: 'keep' | 'open' | 'replace') => ({
      name: outcome,
      nodeSelector: { matchLabels: { [OUTCOME]: outcome } },
      nodeManagement: { startupTimeout: '8s', onStartupTimeout: outcome, ...(outcome === 'replace' ? { deleteFailedNodes: true } : {}) },
    });
    const ctl = await h.start({
      nodeManagement: { remediation: { minNodeAge: '0s' } },
      profiles: [profile('keep'), profile('open'), profile('replace')],
    } as ControllerConfigInput);
    const add = (outcome: string) => h.addNode({ prefix: outcome, labels: { [OUTCOME]: outcome }, taints: [h.taint, AGENT] });
    const [keep, open, replace, inTime] = await Promise.all([add('keep'), add('open'), add('replace'), add('keep')]);
    // The fourth node's agent finishes in time (well before 8 s): it is verified, not timed out.
    await core().patchNode({ name: inTime, body: [{ op: 'replace', path: '/spec/taints', value: [h.taint] }] }, k8s.setHeaderOptions('Content-Type', k8s.PatchStrategy.JsonPatch));

    const phase = async (node: string) => (await progressOf(node))['phase'];
    await waitFor(async () => (await phase(inTime)) === 'Passed', `${inTime} to pass`, 60_000);
    await waitFor(async () => (await phase(keep)) === 'Failed' && (await phase(open)) === 'Failed', `${keep} and ${open} to time out`, 60_000);

    // keep: failed, closed, the failed taint added; the message says what it waited for.
    const kept = await readNode(keep);
    expect((kept?.spec?.taints ?? []).map((t) => t.key).sort()).toEqual([AGENT.key, h.taint.key, 'kube-node-ready.io/verification-failed'].sort());
    const keptNv = await readVerification(keep);
    expect(keptNv?.status).toMatchObject({ profile: 'keep', phase: 'Failed', lastAttempt: { reason: 'StartupTimeout' } });
    expect(keptNv?.status?.lastAttempt?.message).toContain(`no verdict within nodeManagement.startupTimeout (8s) of the node's creation: the node still could not run the worker (waiting for: taint ${AGENT.key}`);
    const condition = await waitFor(async () => (await readNode(keep))?.status?.conditions?.find((c) => c.type === h.conditionType), `${keep}'s condition`);
    expect(condition).toMatchObject({ status: 'False', reason: 'StartupTimeout' });
    const events = await nodeEventsWhen(keep, (list) => list.some((e) => e.reason === 'VerificationStartupTimeout'), 'the VerificationStartupTimeout Event');
    expect(events.find((e) => e.reason === 'VerificationStartupTimeout')?.message).toContain('keeps its taint (onStartupTimeout: keep)');

    // open: our taint gone, the agent's kept; not verified, no failed taint.
    const opened = await waitFor(async () => {
      const n = await readNode(open);
      return (n?.spec?.taints ?? []).some((t) => t.key === h.taint.key) ? undefined : n;
    }, `${open} to be opened`);
    expect((opened.spec?.taints ?? []).map((t) => t.key)).toEqual([AGENT.key]);
    expect(opened.metadata?.labels?.[h.verifiedLabel.key]).toBeUndefined();
    expect((await readVerification(open))?.status).toMatchObject({ profile: 'open', phase: 'Failed', lastAttempt: { reason: 'StartupTimeout' } });

    // replace: failed, then deleted by remediation.
    await waitFor(async () => ((await readNode(replace)) === undefined ? true : undefined), `${replace} to be deleted by remediation`, 90_000).catch((err: Error) => {
      const said = ctl.logs.filter((l) => l['node'] === replace || String(l['controller'] ?? '') === 'remediation').map((l) => JSON.stringify(l));
      throw new Error(`${err.message}\nthe controller's log about it:\n${said.slice(-20).join('\n')}`, { cause: err });
    });
    expect(await ctl.counter('kube_node_ready_remediations_total{action="delete-node",result="deleted"}')).toBe(1);
    // keep and open nodes are left to their owners: nothing else was deleted.
    expect(await readNode(keep)).toBeDefined();
    expect(await readNode(open)).toBeDefined();
  }, 240_000);
});
