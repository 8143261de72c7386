// The whole job against the real apiserver, scheduler and worker processes (the kube-node-ready
// bundle run by the simulated kubelet): nodes pass and open, a node with broken DNS fails and keeps
// its taint, Karpenter's registration is awaited, a CNI taint is respected, re-verification works.
import { afterAll, afterEach, beforeAll, describe, expect, it } from 'vitest';
import { k8s } from '@kube-node-ready/sandbox';
import { harness, progressOf, verificationCondition, nodeEvents, nodeEventsWhen, readNode, waitFor, workerPods, type Harness, type TestController } from '../../../../test/harness.js';
import { core, deleteNode, readVerification, sandbox } from '../../../../../../test/sandbox.js';

let h: Harness;

beforeAll(async () => {
  h = await harness('ctlok');
});

afterEach(async () => {
  await h.cleanup(); // each test starts with no nodes of this harness
});

afterAll(async () => {
  await h?.cleanup();
});

async function patchNode(name: string, ops: object[]): Promise<void> {
  await core().patchNode({ name, body: ops }, k8s.setHeaderOptions('Content-Type', k8s.PatchStrategy.JsonPatch));
}

const phaseOf = async (name: string) => (await progressOf(name))['phase'];

/**
 * A new node `ctl` has opened, once nothing more is due for it: its worker pod gone, the events of
 * our own last writes in, and the one requeue the launch asked for (the worker pod's start deadline,
 * the harness's 4 s) fired, as it does even though the node has passed since. With the controller's
 * count of queue adds.
 */
async function settledOpenNode(ctl: TestController): Promise<{ node: string; adds: () => Promise<number> }> {
  const node = await h.addNode();
  await waitFor(async () => (await readNode(node))?.metadata?.labels?.[h.verifiedLabel.key] === 'true', 'the node to open', 60_000);
  await waitFor(async () => ((await workerPods(h.namespace, node)).length === 0 ? true : undefined), 'its worker pod to go', 30_000);
  await new Promise((r) => setTimeout(r, 5_000));
  return { node, adds: async () => Number(/^kube_node_ready_queue_adds_total (\d+)/m.exec(await ctl.metrics())?.[1] ?? 'NaN') };
}

describe('verification', () => {
  it('verifies several nodes: taint removed, label added, condition True, worker deleted, metrics; 5 writes per node and no Event for a pass at the first attempt', async () => {
    const ctl = await h.start();
    const nodes = await Promise.all([h.addNode(), h.addNode(), h.addNode()]);
    for (const node of nodes) await waitFor(async () => (await phaseOf(node)) === 'Passed', `${node} to pass`, 60_000);

    for (const node of nodes) {
      const n = await readNode(node);
      expect(n?.spec?.taints ?? []).toEqual([]);
      expect(n?.metadata?.labels?.[h.verifiedLabel.key]).toBe('true');
      const a = await progressOf(node);
      expect(a['attempt']).toBe('1');
      expect(a['last-outcome']).toBe('Passed');
      // A loaded machine can make an answer slow (a warning, not a failure).
      expect(a['last-message']).toMatch(/^all checks passed (with warnings )?in .* \(.*dns.*\)/);
      expect(Date.parse(a['verified-at'] ?? '')).toBeGreaterThan(0);
      const condition = await waitFor(async () => (await readNode(node))?.status?.conditions?.find((c) => c.type === h.conditionType && c.status === 'True'), 'the condition');
      expect(condition).toMatchObject({ status: 'True', reason: 'Passed' });
      await waitFor(async () => (await workerPods(h.namespace, node)).length === 0, `${node}'s worker to be deleted`);
      // The condition and the NodeVerification say what the pass did; no Event of its own.
      expect(condition?.message).toMatch(/all checks passed/);
    }
    // What verifying them cost, counted by the controller (ADR 0006): per node the worker pod created
    // and deleted, the opening patch, the NodeVerification created with its verdict, the condition.
    // No NodeVerification update (an attempt in flight is not written) and no Event.
    const requests = async (operation: string) => {
      let sum = 0;
      for (const text of await ctl.metricsOfEach()) {
        for (const line of text.split('\n')) {
          if (line.startsWith('kube_node_ready_api_requests_total{') && line.includes(`operation="${operation}"`) && line.includes('result="success"')) sum += Number(line.split(' ').pop());
        }
      }
      return sum;
    };
    const writes: Record<string, number> = {};
    for (const op of ['create pod', 'delete pod', 'patch node', 'patch node status', 'create nodeverification', 'update nodeverification', 'create event']) writes[op] = await requests(op);
    expect(writes).toEqual({ 'create pod': 3, 'delete pod': 3, 'patch node': 3, 'patch node status': 3, 'create nodeverification': 3, 'update nodeverification': 0, 'create event': 0 });
    for (const node of nodes) expect((await nodeEvents(node)).map((e) => e.reason).filter((r) => r?.startsWith('Verification')), node).toEqual([]);
    // Counters over every instance of the controller (the harness starts it again if a loaded machine costs it its Lease).
    expect(await ctl.counter('kube_node_ready_verifications_total{status="success",profile="default"}')).toBe(3);
    expect(await ctl.counter('kube_node_ready_creation_to_taint_removal_seconds_count{profile="default"}')).toBe(3);
    expect(await ctl.counter('kube_node_ready_check_duration_seconds_count{check="dns",result="pass"}')).toBe(3);
    // The controller's own reaction, one per node and step (each instance times what it saw: a restart
    // of the harness on a loaded machine can leave a step untimed).
    for (const step of ['launch', 'open']) {
      const observed = await ctl.counter(`kube_node_ready_reaction_seconds_count{step="${step}"}`);
      expect(observed, step).toBeGreaterThanOrEqual(1);
      expect(observed, step).toBeLessThanOrEqual(3);
      expect(await ctl.counter(`kube_node_ready_reaction_seconds_sum{step="${step}"}`), step).toBeGreaterThan(0);
    }
    const text = await ctl.metrics();
    for (const node of nodes) expect(text).toContain(`kube_node_ready_verification_status{node="${node}",status="verified"} 1`);
  });

  it('a pass with warnings opens the node and says so: the condition, one VerificationWarning Event, the warnings metric', async () => {
    // Every API step takes longer than 1 ms: the api check passes with a warning per step.
    const ctl = await h.start({ worker: { checks: { api: { slowAfter: '1ms' } } } });
    const node = await h.addNode();
    await waitFor(async () => (await phaseOf(node)) === 'Passed', `${node} to pass`, 60_000);

    const n = await readNode(node);
    expect(n?.spec?.taints ?? []).toEqual([]);
    expect(n?.metadata?.labels?.[h.verifiedLabel.key]).toBe('true');
    expect((await progressOf(node))['last-message']).toMatch(/^all checks passed with warnings in .* \(.*api.*\): .*api: .*slow: .* \(over api\.slowAfter 1ms\)/);
    const condition = await waitFor(async () => (await readNode(node))?.status?.conditions?.find((c) => c.type === h.conditionType && c.status === 'True'), 'the condition');
    expect(condition).toMatchObject({ reason: 'Passed', message: expect.stringMatching(/^all checks passed with warnings in /) as unknown });

    const events = await nodeEventsWhen(node, (list) => list.some((e) => e.reason === 'VerificationWarning'), `${node}'s VerificationWarning Event`);
    const warnings = events.filter((e) => e.reason === 'VerificationWarning');
    expect(warnings).toHaveLength(1);
    expect(warnings[0]).toMatchObject({ type: 'Warning', count: 1 });
    expect(warnings[0]?.message).toMatch(new RegExp(`^worker pod ${h.namespace}/knr-\\S+-a1 reported \\d+ warnings?: (.*; )?api: .*slow: `));
    expect(await ctl.metrics()).toMatch(/kube_node_ready_worker_warnings_total\{check="api"\} [1-9]/);
  });

  it('a node whose DNS is broken fails, retries with growing delays, and ends failed with its taint and an Event naming dns', async () => {
    await h.start({ reconciliation: { maxRetries: 2, initialBackoff: '1s', maxBackoff: '10s', backoffFactor: 2 } });
    const node = await h.addNode({ faults: { dns: 'dead' } });
    await waitFor(async () => (await phaseOf(node)) === 'Failed', 'the node to fail', 90_000);

    const n = await readNode(node);
    expect(n?.spec?.taints?.map((t) => t.key)).toEqual([h.taint.key, 'kube-node-ready.io/verification-failed']);
    expect(n?.metadata?.labels?.[h.verifiedLabel.key]).toBeUndefined();
    expect((await progressOf(node))['last-outcome']).toBe('ChecksFailed');
    expect((await progressOf(node))['last-message']).toMatch(/^checks? failed: .*dns: /);

    const events = await nodeEventsWhen(
      node,
      (list) => list.some((e) => e.reason === 'VerificationFailed') && list.filter((e) => e.reason === 'VerificationChecksFailed').length >= 3,
      'the failure Events',
    );
    const failures = events.filter((e) => e.reason === 'VerificationChecksFailed').map((e) => e.message ?? '');
    expect(failures).toHaveLength(3);
    expect(failures.every((m) => /dns: /.test(m))).toBe(true);
    // Growing delays between attempts: 1 s, then 2 s.
    expect(failures.some((m) => m.startsWith('attempt 1 of 3 failed') && m.endsWith('retrying in 1s'))).toBe(true);
    expect(failures.some((m) => m.startsWith('attempt 2 of 3 failed') && m.endsWith('retrying in 2s'))).toBe(true);
    expect(events.find((e) => e.reason === 'VerificationFailed')?.message).toMatch(/after 3 attempts and keeps its taint; last: checks? failed: .*dns: /);
    // The newest failed worker is kept for `kubectl logs`.
    const kept = await workerPods(h.namespace, node);
    expect(kept.map((p) => p.metadata?.annotations?.['kube-node-ready.io/attempt'])).toEqual(['3']);
    expect(kept[0]?.status?.phase).toBe('Failed');
  });

  it('a worker result holding "<" or "&" (e.g. an HTML error page) fails the attempt and the node still gets its verdict', async () => {
    // Such a message is stored with the attempt; the API server may encode it differently, so a
    // write guarded by it byte for byte would be refused every time and leave the node in Backoff
    // for good.
    await h.start({ reconciliation: { maxRetries: 1, initialBackoff: '1s' } });
    const node = await h.addNode({ faults: { terminationMessage: '<html><body>502 Bad Gateway & more</body></html>' } });
    await waitFor(async () => (await phaseOf(node)) === 'Failed', 'the node to fail after its retry', 60_000);
    const a = (await progressOf(node));
    expect(a['attempt']).toBe('2');
    expect(a['last-outcome']).toBe('WorkerError');
    expect(a['last-message']).toContain('<html><body>502 Bad Gateway &');
    expect((await readNode(node))?.spec?.taints?.map((t) => t.key)).toEqual([h.taint.key, 'kube-node-ready.io/verification-failed']);
  });

  it('waits for Karpenter to register the node before removing the taint', async () => {
    await h.start();
    const node = await h.addNode({ labels: { 'karpenter.sh/nodepool': 'default' } });
    await waitFor(async () => (await nodeEvents(node)).some((e) => e.reason === 'AwaitingKarpenterRegistration'), 'the worker to pass and the wait to be reported', 60_000);
    await new Promise((r) => setTimeout(r, 1_500));
    let n = await readNode(node);
    expect(n?.spec?.taints?.map((t) => t.key)).toEqual([h.taint.key]);
    expect(n?.metadata?.labels?.[h.verifiedLabel.key]).toBeUndefined();

    await patchNode(node, [{ op: 'add', path: '/metadata/labels/karpenter.sh~1registered', value: 'true' }]);
    await waitFor(async () => (await phaseOf(node)) === 'Passed', 'the node to open once registered', 20_000);
    n = await readNode(node);
    expect(n?.spec?.taints ?? []).toEqual([]);
    expect(n?.metadata?.labels?.[h.verifiedLabel.key]).toBe('true');
  });

  it('respects another startup taint: no worker until the CNI removed its taint (the node waits, saying so), then only our taint is removed', async () => {
    const cni = { key: 'node.example.com/cni-not-ready', value: 'true', effect: 'NoSchedule' };
    const gpu = { key: 'nvidia.com/gpu', value: 'present', effect: 'NoSchedule' };
    // GPU nodes keep their taint for good; the worker is told to tolerate it (worker.tolerations).
    const ctl = await h.start({ worker: { scheduleTimeout: '30s', tolerations: [{ key: gpu.key, operator: 'Exists', effect: 'NoSchedule' }] } });
    const node = await h.addNode({ taints: [cni, h.taint, gpu] });
    // Waiting: the condition and an Event name the CNI's taint (not the tolerated GPU one); no worker, no attempt.
    const waiting = await waitFor(
      async () => {
        const c = await verificationCondition(node);
        return c?.reason === 'WaitingForNode' ? c : undefined;
      },
      'the WaitingForNode condition of its NodeVerification',
    );
    // A step, not a verdict: not on the Node.
    expect((await readNode(node))?.status?.conditions?.find((c) => c.type === h.conditionType)).toBeUndefined();
    expect(waiting).toMatchObject({ status: 'Unknown', message: `no attempt until the node can run the worker; waiting for: taint ${cni.key}=true:NoSchedule removed (the worker does not tolerate it)` });
    const events = await nodeEventsWhen(node, (list) => list.some((e) => e.reason === 'VerificationWaitingForNode'), 'the VerificationWaitingForNode Event');
    expect(events.find((e) => e.reason === 'VerificationWaitingForNode')?.message).toContain(cni.key);
    await waitFor(async () => (await ctl.metrics()).includes(`kube_node_ready_verification_status{node="${node}",status="waiting"} 1`), 'the waiting status metric');
    expect(await workerPods(h.namespace, node)).toEqual([]);
    expect((await progressOf(node))['attempt'] ?? '0').toBe('0'); // none started

    // The CNI agent comes up and removes its taint (index 0): ours moves to index 0.
    await patchNode(node, [{ op: 'test', path: '/spec/taints/0/key', value: cni.key }, { op: 'remove', path: '/spec/taints/0' }]);
    const pod = await waitFor(async () => (await workerPods(h.namespace, node))[0], 'a worker pod once the taint is gone');
    expect(pod.spec?.affinity?.nodeAffinity?.requiredDuringSchedulingIgnoredDuringExecution?.nodeSelectorTerms?.[0]?.matchFields).toEqual([
      { key: 'metadata.name', operator: 'In', values: [node] },
    ]);
    // The worker is told the API server addresses: the ready endpoints of default/kubernetes.
    const slices = await sandbox()
      .kc.makeApiClient(k8s.DiscoveryV1Api)
      .listNamespacedEndpointSlice({ namespace: 'default', labelSelector: 'kubernetes.io/service-name=kubernetes' });
    const apiServers = slices.items.flatMap((sl) =>
      (sl.endpoints ?? []).filter((e) => e.conditions?.ready !== false).flatMap((e) => e.addresses.map((a) => `${a}:${sl.ports?.find((p) => p.name === 'https')?.port}`)),
    );
    expect(apiServers.length).toBeGreaterThan(0);
    const args = pod.spec?.containers[0]?.args ?? [];
    expect(args.slice(args.indexOf('--api-endpoints'))).toEqual(['--api-endpoints', apiServers.sort().join(',')]);

    await waitFor(async () => (await phaseOf(node)) === 'Passed', 'the node to pass', 60_000);
    const n = await readNode(node);
    expect(n?.spec?.taints?.map((t) => t.key)).toEqual([gpu.key]);
    expect((await progressOf(node))['attempt']).toBe('1');
    // The Event was recorded once, however many reconciles the node waited through.
    expect((await nodeEvents(node)).filter((e) => e.reason === 'VerificationWaitingForNode').map((e) => e.count ?? 1)).toEqual([1]);
  });

  it('a node coming up as on a real cloud (NotReady, an agent taint, then a slow CNI and a cold image pull) opens at attempt 1, deadlines shorter than its bring-up', async () => {
    const agent = { key: 'node.example.com/agent-not-ready', value: 'true', effect: 'NoSchedule' };
    // The NotReady period and the agent's taint are longer than the schedule deadline (3 s), the CNI
    // wait longer than the start deadline (8 s: the cold pull counts in it, with room for a loaded
    // machine). Without the launch gate and the sandbox wait, each one would fail an attempt
    // (NotScheduled / NotStarted).
    const ctl = await h.start({ worker: { scheduleTimeout: '3s', startTimeout: '8s' }, reconciliation: { maxRetries: 0 }, nodeManagement: { bringUpTimeout: '2m' } });
    // The agent's taint goes after 12 s (a wait under 10 s is not reported); the CNI is ready 12 s
    // after Ready (16 s), so the launched worker's sandbox waits for it too.
    const node = await h.addNode({ taints: [h.taint, agent], bringUp: { notReadyFor: '4s', cniDelay: '12s', imagePullDelay: '2s', removeTaintsAfter: `${agent.key}=12s` } });
    const reasons: string[] = [];
    await waitFor(
      async () => {
        const c = await verificationCondition(node);
        if (c?.reason && reasons.at(-1) !== c.reason) reasons.push(c.reason);
        return c?.reason === 'Passed';
      },
      'the node to pass',
      90_000,
      50,
    );
    const a = (await progressOf(node));
    expect(a).toMatchObject({ phase: 'Passed', attempt: '1', failures: '0' });
    // It said it was waiting before its one attempt; no attempt failed.
    expect(reasons[0]).toBe('WaitingForNode');
    expect(reasons).not.toContain('RetriesExhausted');
    const text = await ctl.metrics();
    expect(text).not.toMatch(/kube_node_ready_attempt_outcomes_total\{outcome="Not(Scheduled|Started)",profile="default"\} [1-9]/);
    const events = await nodeEventsWhen(node, (list) => list.some((e) => e.reason === 'VerificationWaitingForNode'), 'the VerificationWaitingForNode Event');
    expect(events.map((e) => e.reason)).not.toContain('VerificationStarted');
    // Reported at 10 s: Ready by then (4 s), the agent's taint not yet gone (12 s).
    expect(events.find((e) => e.reason === 'VerificationWaitingForNode')?.message).toBe(
      `no attempt until the node can run the worker; waiting for: taint ${agent.key}=true:NoSchedule removed (the worker does not tolerate it)`,
    );
  });

  // (That stuck-node remediation leaves such a node alone is a decide() table test: it takes 60 s or more.)
  it('a Windows node is never sent the Linux worker: reported (condition, Event, status waiting), its taint kept', async () => {
    const ctl = await h.start();
    const node = await h.addNode({ labels: { 'kubernetes.io/os': 'windows' } });
    const condition = await waitFor(
      async () => (await readNode(node))?.status?.conditions?.find((c) => c.type === h.conditionType && c.reason === 'UnsupportedOS'),
      'the UnsupportedOS condition',
      30_000,
    );
    expect(condition).toMatchObject({ status: 'False', message: expect.stringMatching(/runs on Linux only; this node's kubernetes.io\/os is windows/) });
    const events = await nodeEventsWhen(node, (list) => list.some((e) => e.reason === 'NodeOSUnsupported'), 'the NodeOSUnsupported Event');
    expect(events.filter((e) => e.reason === 'NodeOSUnsupported')).toHaveLength(1);
    expect(await workerPods(h.namespace, node)).toEqual([]);
    const n = await readNode(node);
    expect(n?.spec?.taints?.map((t) => t.key)).toContain(h.taint.key);
    expect((await progressOf(node))['attempt'] ?? '0').toBe('0'); // none started
    expect(await ctl.metrics()).toContain(`kube_node_ready_verification_status{node="${node}",status="waiting"} 1`);
  });

  it('the safety-net resync re-queues only nodes with work left: a verified node is not reconciled again without an event', async () => {
    const ctl = await h.start({ reconciliation: { resyncInterval: '1s' } });
    const { adds } = await settledOpenNode(ctl);
    const before = await adds();
    await new Promise((r) => setTimeout(r, 6_000)); // six resyncs
    const after = await adds();
    // Re-queuing every node would make one add per resync (6). At most one stray event is allowed
    // for (another test file's deleted NodeVerifications queue nothing since their Nodes are not
    // this controller's).
    expect(after - before, `queue adds during six resyncs (${before} -> ${after})`).toBeLessThanOrEqual(1);
  });

  it('a deleted node is reconciled once: the garbage collector deleting its NodeVerification after it queues nothing', async () => {
    const ctl = await h.start();
    const { node, adds } = await settledOpenNode(ctl);
    const before = await adds();
    await deleteNode(node);
    // kube-controller-manager's garbage collector deletes the NodeVerification the Node owned.
    await waitFor(async () => ((await readVerification(node)) === undefined ? true : undefined), `${node}'s NodeVerification to be garbage-collected`, 60_000);
    await new Promise((r) => setTimeout(r, 3_000)); // its delete event
    const after = await adds();
    expect(after - before, `queue adds from the node's deletion to 3 s after its NodeVerification's (${before} -> ${after})`).toBe(1);
  });

  it('verifies a node again when its verified label is removed', async () => {
    await h.start();
    const node = await h.addNode();
    await waitFor(async () => (await phaseOf(node)) === 'Passed', 'the first verification', 60_000);
    const firstVerifiedAt = (await progressOf(node))['verified-at'];
    await new Promise((r) => setTimeout(r, 1_100)); // verified-at has second precision

    await patchNode(node, [{ op: 'remove', path: `/metadata/labels/${h.verifiedLabel.key.replace('/', '~1')}` }]);
    await waitFor(async () => (await progressOf(node))['attempt'] === '2', 'a second attempt', 30_000);
    await waitFor(async () => (await readNode(node))?.metadata?.labels?.[h.verifiedLabel.key] === 'true', 'the label to come back', 60_000);
    // The Node is opened first, then the NodeVerification records the pass.
    const a = await waitFor(async () => ((await phaseOf(node)) === 'Passed' ? progressOf(node) : undefined), 'the second pass to be recorded', 10_000);
    expect(a['verified-at']).not.toBe(firstVerifiedAt);
  });
});
