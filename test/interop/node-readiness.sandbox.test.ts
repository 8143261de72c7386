// kube-node-ready beside the real node-readiness-controller (sigs.k8s.io/node-readiness-controller
// v0.5.0, installed from its own chart with leader election and its RBAC), driven by the rule in
// examples/node-readiness-rule.yaml: kube-node-ready verifies the network and writes its condition,
// the node-readiness-controller removes the rule's taint once that condition (and the CNI's) is True.
import { readFileSync } from 'node:fs';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { parse } from 'yaml';
import { applyObjects, CNI_REPORTER_CONDITION, FAULT, installNodeReadinessController, k8s, NODE_READINESS_RULES, renderCniReporter, statusCode, type NodeReadinessController } from '@kube-node-ready/sandbox';
import type { ControllerConfigInput } from '../../packages/controller/src/config/schema.js';
import { harness, type Harness } from '../../packages/controller/test/harness.js';
import { core, sandbox, waitFor } from '../sandbox.js';

const EXAMPLE = new URL('../../examples/node-readiness-rule.yaml', import.meta.url);
const exampleText = readFileSync(EXAMPLE, 'utf8');

interface Rule {
  apiVersion: string;
  kind: string;
  metadata: { name: string };
  spec: {
    conditions: Array<{ type: string; requiredStatus: string }>;
    taint: { key: string; value?: string; effect: string };
    enforcementMode: 'bootstrap-only' | 'continuous';
    nodeSelector: { matchLabels?: Record<string, string>; matchExpressions?: unknown[] };
  };
  status?: { nodeEvaluations?: Array<{ nodeName: string; conditionResults?: Array<{ type: string; currentStatus: string }>; taintStatus?: string }> };
}

const example = parse(exampleText) as Rule;
/** The condition kube-node-ready writes, as the example's rule reads it (the product's default type). */
const VERIFIED_CONDITION = example.spec.conditions.find((c) => c.type.startsWith('kube-node-ready.io/'))!.type;
/** The CNI's condition the rule also requires: the test reports it, as the CNI's reporter would. */
const CNI_CONDITION = example.spec.conditions.find((c) => c !== example.spec.conditions.find((d) => d.type === VERIFIED_CONDITION))!.type;
const RULE_TAINT = example.spec.taint;
/** The worker's toleration of the rule's taint, exactly as the example's helm command sets it. */
type Tolerations = NonNullable<NonNullable<ControllerConfigInput['worker']>['tolerations']>;
const exampleTolerations = (): Tolerations => {
  const m = /config\.worker\.tolerations=(\[.*\])'/.exec(exampleText);
  if (!m) throw new Error(`${EXAMPLE.pathname} no longer shows the worker's toleration (config.worker.tolerations=[...])`);
  return JSON.parse(m[1]!) as Tolerations;
};

const MODE_LABEL = 'interop.kube-node-ready.io/mode';
const rules = () => sandbox().kc.makeApiClient(k8s.CustomObjectsApi);

/**
 * The example's rule, applied as written but for what keeps it to this test's nodes in the shared
 * sandbox: its name, and its node selector narrowed to this test's label and the mode under test.
 */
async function applyExampleRule(h: Harness, mode: Rule['spec']['enforcementMode']): Promise<Rule> {
  const rule = parse(exampleText) as Rule;
  rule.metadata.name = `${rule.metadata.name}-${h.id}-${mode}`;
  rule.spec.enforcementMode = mode;
  rule.spec.nodeSelector.matchLabels = { ...rule.spec.nodeSelector.matchLabels, [h.selector.key]: h.selector.value, [MODE_LABEL]: mode };
  await rules().createClusterCustomObject({ ...NODE_READINESS_RULES, body: rule });
  return rule;
}

async function readRule(name: string): Promise<Rule> {
  return (await rules().getClusterCustomObject({ ...NODE_READINESS_RULES, name })) as Rule;
}

const readNode = (name: string) => core().readNode({ name });
const taintKeys = (n: k8s.V1Node) => (n.spec?.taints ?? []).map((t) => t.key);
const condition = (n: k8s.V1Node, type: string) => n.status?.conditions?.find((c) => c.type === type);

/** Reports the CNI's condition True, as Calico's readiness reporter would. */
async function reportCniReady(node: string): Promise<void> {
  const now = new Date();
  await core().patchNodeStatus(
    { name: node, body: { status: { conditions: [{ type: CNI_CONDITION, status: 'True', reason: 'CNIReady', message: 'reported by the test', lastHeartbeatTime: now, lastTransitionTime: now }] } } },
    k8s.setHeaderOptions('Content-Type', k8s.PatchStrategy.StrategicMergePatch),
  );
}

async function patchNode(name: string, body: object): Promise<void> {
  await core().patchNode({ name, body }, k8s.setHeaderOptions('Content-Type', k8s.PatchStrategy.MergePatch));
}

/** Re-verification as an operator asks for it: the verified label removed (here on a node whose DNS has since broken). */
async function reverifyWithBrokenDns(h: Harness, node: string): Promise<void> {
  await patchNode(node, { metadata: { annotations: { [FAULT.dns]: 'dead' }, labels: { [h.verifiedLabel.key]: null } } });
}

/** What the node-readiness-controller recorded for a node: its evaluation in the rule's status. */
async function evaluation(rule: string, node: string) {
  return (await readRule(rule)).status?.nodeEvaluations?.find((e) => e.nodeName === node);
}

describe('kube-node-ready with node-readiness-controller (examples/node-readiness-rule.yaml)', () => {
  let h: Harness;
  let nrc: NodeReadinessController | undefined;
  const applied: string[] = [];

  beforeAll(async () => {
    h = await harness('nrc');
    nrc = await installNodeReadinessController(sandbox(), { namespace: `nrc-${h.id}`, release: `nrc-${h.id}`, timeoutMs: 150_000 });
    await h.start({
      worker: { tolerations: exampleTolerations() },
      // The product's condition type, the one the example's rule reads (this test's nodes only: the
      // node selector and taint stay this test's own).
      nodeManagement: { condition: { type: VERIFIED_CONDITION } },
    });
  }, 240_000);

  afterAll(async () => {
    await h?.stopAll();
    // Rules first, while their controller still runs to release its finalizer.
    for (const name of applied) await rules().deleteClusterCustomObject({ ...NODE_READINESS_RULES, name }).catch(() => undefined);
    await waitFor(async () => {
      for (const name of applied) {
        const gone = await readRule(name).then(
          () => false,
          (err: unknown) => statusCode(err) === 404,
        );
        if (!gone) return false;
      }
      return true;
    }, 'the rules to be deleted', 30_000).catch(() => undefined);
    await nrc?.uninstall();
    await h?.cleanup();
  }, 120_000);

  it('the example is a valid NodeReadinessRule for the CRD the controller serves', async () => {
    const rule = await applyExampleRule(h, 'bootstrap-only');
    applied.push(rule.metadata.name);
    const stored = await readRule(rule.metadata.name);
    expect(stored.spec.conditions).toEqual(example.spec.conditions);
    expect(stored.spec.taint).toEqual(example.spec.taint);
    expect(stored.spec.enforcementMode).toBe(example.spec.enforcementMode);
    await applyExampleRule(h, 'continuous').then((r) => applied.push(r.metadata.name));
  });

  it('a verified node: kube-node-ready removes its taint and sets the condition, then node-readiness-controller removes the rule taint', async () => {
    const rule = `${example.metadata.name}-${h.id}-bootstrap-only`;
    const node = await h.addNode({ taints: [h.taint, RULE_TAINT], labels: { [MODE_LABEL]: 'bootstrap-only' } });
    await reportCniReady(node);
    // The rule's taint holds while the verification runs: the node-readiness-controller has looked
    // at the node and found the verification condition not True yet.
    const first = await waitFor(() => evaluation(rule, node), `node-readiness-controller to evaluate ${node} under ${rule}`, 60_000, 250);
    if (first.conditionResults?.find((c) => c.type === VERIFIED_CONDITION)?.currentStatus !== 'True') expect(first.taintStatus).toBe('Present');

    const done = await waitFor(
      async () => {
        const n = await readNode(node);
        return condition(n, VERIFIED_CONDITION)?.status === 'True' && !taintKeys(n).includes(RULE_TAINT.key) ? n : undefined;
      },
      `${node}: ${VERIFIED_CONDITION}=True and ${RULE_TAINT.key} removed`,
      90_000,
      250,
    );
    expect(taintKeys(done)).not.toContain(h.taint.key);
    expect(done.metadata?.labels?.[h.verifiedLabel.key]).toBe(h.verifiedLabel.value);
    // The taint went because of the condition: the controller recorded it True when it acted.
    const ev = await waitFor(async () => {
      const e = await evaluation(rule, node);
      return e?.taintStatus === 'Absent' ? e : undefined;
    }, `${rule}'s status to record ${node}'s taint absent`, 30_000, 250);
    expect(ev.conditionResults?.find((c) => c.type === VERIFIED_CONDITION)?.currentStatus).toBe('True');
    expect(Object.keys(done.metadata?.annotations ?? {}).some((k) => k.startsWith('readiness.k8s.io/bootstrap-completed-'))).toBe(true);

    // bootstrap-only: a re-verification (condition Unknown, then False here) does not re-taint.
    await reverifyWithBrokenDns(h, node);
    await waitFor(async () => condition(await readNode(node), VERIFIED_CONDITION)?.status === 'False', `${node}: ${VERIFIED_CONDITION}=False after the re-verification with broken DNS`, 90_000, 250);
    await new Promise((r) => setTimeout(r, 5_000)); // the controller has seen the change by now (it reacts in well under a second)
    expect(taintKeys(await readNode(node))).not.toContain(RULE_TAINT.key);
  }, 240_000);

  it('a node that fails verification keeps both taints', async () => {
    const rule = `${example.metadata.name}-${h.id}-bootstrap-only`;
    const node = await h.addNode({ taints: [h.taint, RULE_TAINT], labels: { [MODE_LABEL]: 'bootstrap-only' }, faults: { dns: 'dead' } });
    await reportCniReady(node);
    await waitFor(
      async () => {
        const n = await readNode(node);
        return condition(n, VERIFIED_CONDITION)?.reason === 'RetriesExhausted' ? n : undefined;
      },
      `${node}: ${VERIFIED_CONDITION}=False (RetriesExhausted)`,
      120_000,
      250,
    );
    const ev = await waitFor(async () => {
      const e = await evaluation(rule, node);
      return e?.conditionResults?.find((c) => c.type === VERIFIED_CONDITION)?.currentStatus === 'False' ? e : undefined;
    }, `${rule} to evaluate ${node} with ${VERIFIED_CONDITION}=False`, 30_000, 250);
    expect(ev.taintStatus).toBe('Present');
    const n = await readNode(node);
    expect(taintKeys(n)).toEqual(expect.arrayContaining([h.taint.key, RULE_TAINT.key]));
    expect(n.metadata?.labels?.[h.verifiedLabel.key]).toBeUndefined();
  }, 200_000);

  it("the CNI condition from node-readiness-controller's own reporter (its cni-readiness example DaemonSet): False while the node's CNI is not ready, then True, then the rule taint goes", async () => {
    expect(CNI_CONDITION).toBe(CNI_REPORTER_CONDITION);
    const rule = `${example.metadata.name}-${h.id}-bootstrap-only`;
    const reporterLabel = { [MODE_LABEL]: 'bootstrap-only', 'interop.kube-node-ready.io/reporter': h.id };
    const objects = renderCniReporter(sandbox().state.binDir, { namespace: h.namespace, name: h.id, nodeSelector: reporterLabel });
    await applyObjects(sandbox(), objects);
    try {
      // The CNI comes up 20 s after the node: its health endpoint answers 503 until then.
      const node = await h.addNode({ taints: [h.taint, RULE_TAINT], labels: reporterLabel, bringUp: { cniDelay: '20s' } });
      const notReady = await waitFor(
        async () => {
          const c = condition(await readNode(node), CNI_CONDITION);
          return c ? c : undefined;
        },
        `${node}: the reporter to write ${CNI_CONDITION}`,
        60_000,
        250,
      );
      expect(notReady).toMatchObject({ status: 'False', reason: 'EndpointNotReady' });
      expect(notReady.message).toContain('503');
      const done = await waitFor(
        async () => {
          const n = await readNode(node);
          return condition(n, CNI_CONDITION)?.status === 'True' && condition(n, VERIFIED_CONDITION)?.status === 'True' && !taintKeys(n).includes(RULE_TAINT.key) ? n : undefined;
        },
        `${node}: ${CNI_CONDITION}=True from the reporter, ${VERIFIED_CONDITION}=True, and ${RULE_TAINT.key} removed`,
        120_000,
        250,
      );
      expect(condition(done, CNI_CONDITION)).toMatchObject({ reason: 'EndpointOK' });
      const ev = await waitFor(async () => {
        const e = await evaluation(rule, node);
        return e?.taintStatus === 'Absent' ? e : undefined;
      }, `${rule}'s status to record ${node}'s taint absent`, 30_000, 250);
      expect(ev.conditionResults?.find((c) => c.type === CNI_CONDITION)?.currentStatus).toBe('True');
    } finally {
      await sandbox().kc.makeApiClient(k8s.AppsV1Api).deleteNamespacedDaemonSet({ name: objects.find((o) => o.kind === 'DaemonSet')!.metadata!.name!, namespace: h.namespace }).catch(() => undefined);
      const rbac = sandbox().kc.makeApiClient(k8s.RbacAuthorizationV1Api);
      for (const o of objects) {
        if (o.kind === 'ClusterRole') await rbac.deleteClusterRole({ name: o.metadata!.name! }).catch(() => undefined);
        if (o.kind === 'ClusterRoleBinding') await rbac.deleteClusterRoleBinding({ name: o.metadata!.name! }).catch(() => undefined);
      }
    }
  }, 240_000);

  it('continuous: the condition going False on a re-verification re-taints the node', async () => {
    const node = await h.addNode({ taints: [h.taint, RULE_TAINT], labels: { [MODE_LABEL]: 'continuous' } });
    await reportCniReady(node);
    await waitFor(
      async () => {
        const n = await readNode(node);
        return condition(n, VERIFIED_CONDITION)?.status === 'True' && !taintKeys(n).includes(RULE_TAINT.key) ? n : undefined;
      },
      `${node}: ${VERIFIED_CONDITION}=True and ${RULE_TAINT.key} removed`,
      90_000,
      250,
    );
    await reverifyWithBrokenDns(h, node);
    const retainted = await waitFor(
      async () => {
        const n = await readNode(node);
        return taintKeys(n).includes(RULE_TAINT.key) ? n : undefined;
      },
      `${node}: ${RULE_TAINT.key} back once the re-verification takes ${VERIFIED_CONDITION} away from True`,
      90_000,
      250,
    );
    expect(condition(retainted, VERIFIED_CONDITION)?.status).not.toBe('True');
    expect(retainted.spec?.taints?.find((t) => t.key === RULE_TAINT.key)).toMatchObject({ value: RULE_TAINT.value, effect: RULE_TAINT.effect });
  }, 240_000);
});
