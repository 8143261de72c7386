// Per-pool profiles against the real apiserver, scheduler and worker processes: a node of each of
// two pools is verified with its own profile's checks, retries and name (NodeVerification, worker
// pod, metrics), while a node no profile selects keeps the top-level settings.
import { afterAll, afterEach, beforeAll, describe, expect, it } from 'vitest';
import { harness, progressOf, waitFor, workerPods, type Harness } from '../../../../test/harness.js';
import { readVerification } from '../../../../../../test/sandbox.js';

let h: Harness;

beforeAll(async () => {
  h = await harness('ctlprof');
});

afterEach(async () => {
  await h.cleanup(); // each test starts its own controller, with no nodes of this harness
});

afterAll(async () => {
  await h?.cleanup();
});

const POOL = 'pool.kube-node-ready.test/name';

describe('profiles', () => {
  it('two pools, two profiles: each node verified with its own checks and retries; the rest with the top-level settings', async () => {
    const ctl = await h.start({
      profiles: [
        { name: 'dns-only', nodeSelector: { matchLabels: { [POOL]: 'dns-only' } }, worker: { checks: { enabled: ['dns'] } } },
        {
          name: 'strict',
          nodeSelector: { matchExpressions: [{ key: POOL, operator: 'In', values: ['strict'] }] },
          // A name that does not resolve: this pool's nodes fail dns, and with no retry they fail at once.
          worker: { checks: { dns: { names: ['no-such-name.kube-node-ready.invalid'] } } },
          reconciliation: { maxRetries: 0 },
        },
      ],
    });
    const [dnsOnly, strict, plain] = await Promise.all([
      h.addNode({ prefix: 'dnsonly', labels: { [POOL]: 'dns-only' } }),
      h.addNode({ prefix: 'strict', labels: { [POOL]: 'strict' } }),
      h.addNode({ prefix: 'plain' }),
    ]);
    const phase = async (node: string) => (await progressOf(node))['phase'];
    // The dns-only node's worker mounts its profile's key of the worker ConfigMap.
    const pod = await waitFor(async () => (await workerPods(h.namespace, dnsOnly))[0], `${dnsOnly}'s worker pod`, 60_000);
    expect(pod.spec?.volumes?.find((v) => v.configMap)?.configMap?.items).toEqual([{ key: 'worker.dns-only.yaml', path: 'worker.yaml' }]);

    await waitFor(async () => (await phase(dnsOnly)) === 'Passed' && (await phase(plain)) === 'Passed', `${dnsOnly} and ${plain} to pass`, 120_000);
    await waitFor(async () => (await phase(strict)) === 'Failed', `${strict} to fail`, 120_000);

    const checksOf = async (node: string) => ((await readVerification(node))?.status?.lastAttempt?.checks ?? []).map((c) => c.name);
    expect(await checksOf(dnsOnly)).toEqual(['dns']);
    expect((await checksOf(plain)).length).toBeGreaterThan(1);
    const failed = await readVerification(strict);
    expect(failed?.status).toMatchObject({ profile: 'strict', attempt: 1, failures: 1, lastAttempt: { reason: 'ChecksFailed' } });
    expect(failed?.status?.lastAttempt?.message).toContain('no-such-name.kube-node-ready.invalid');
    expect((await readVerification(dnsOnly))?.status?.profile).toBe('dns-only');
    expect((await readVerification(plain))?.status?.profile).toBe('default');

    expect(await ctl.counter('kube_node_ready_verifications_total{status="success",profile="dns-only"}')).toBe(1);
    expect(await ctl.counter('kube_node_ready_verifications_total{status="success",profile="default"}')).toBe(1);
    expect(await ctl.counter('kube_node_ready_attempt_outcomes_total{outcome="ChecksFailed",profile="strict"}')).toBe(1);
    expect(await ctl.counter('kube_node_ready_check_failures_total{check="dns",profile="strict"}')).toBe(1);
  });

  it('a container check that exits 1 fails its pool\'s node with its message while the other pool opens; one whose image cannot run fails at once with the reason', async () => {
    // The simulated kubelet runs `sandbox-shell` as /bin/sh; an image it has no command for cannot
    // start (CreateContainerError, where a real kubelet would report ErrImagePull: docs/sandbox.md).
    await h.start({
      profiles: [
        {
          name: 'gpu',
          nodeSelector: { matchLabels: { [POOL]: 'gpu' } },
          worker: { containerChecks: [{ name: 'smoke', image: 'sandbox-shell', command: ['/bin/sh', '-c', 'echo "CUDA smoke test: no device found"; exit 1'] }] },
          reconciliation: { maxRetries: 0 },
        },
        {
          name: 'pull',
          nodeSelector: { matchLabels: { [POOL]: 'pull' } },
          worker: { containerChecks: [{ name: 'missing', image: 'registry.invalid/no-such-image:1', timeout: '5m' }] },
          reconciliation: { maxRetries: 0 },
        },
        { name: 'general', nodeSelector: { matchLabels: { [POOL]: 'general' } } },
      ],
    });
    const [gpu, pull, general] = await Promise.all([
      h.addNode({ prefix: 'gpu', labels: { [POOL]: 'gpu' } }),
      h.addNode({ prefix: 'pull', labels: { [POOL]: 'pull' } }),
      h.addNode({ prefix: 'general', labels: { [POOL]: 'general' } }),
    ]);
    const phase = async (node: string) => (await progressOf(node))['phase'];
    await waitFor(async () => (await phase(general)) === 'Passed', `${general} to pass`, 120_000);
    await waitFor(async () => (await phase(gpu)) === 'Failed' && (await phase(pull)) === 'Failed', `${gpu} and ${pull} to fail`, 120_000);

    const failed = await readVerification(gpu);
    expect(failed?.status?.lastAttempt?.reason).toBe('ChecksFailed');
    expect(failed?.status?.lastAttempt?.message).toContain('smoke: exit code 1: CUDA smoke test: no device found');
    expect(failed?.status?.lastAttempt?.checks?.find((c) => c.name === 'smoke')).toMatchObject({ ok: false });
    const unpulled = await readVerification(pull);
    expect(unpulled?.status?.lastAttempt?.message).toMatch(/missing: .*CreateContainerError/);
    // It failed at once, not after the check's 5-minute timeout or the worker's deadline.
    const finished = Date.parse(unpulled?.status?.lastAttempt?.finishedAt ?? '');
    expect(finished - Date.parse(unpulled?.status?.nodeCreatedAt ?? '')).toBeLessThan(120_000);
    expect((await readVerification(general))?.status?.lastAttempt?.checks?.some((c) => c.name === 'smoke')).toBe(false);
  }, 240_000);
});
