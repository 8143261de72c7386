// Pod lifecycle in the simulated kubelet: probes, init containers, the kubelet API's container logs,
// pod Events, and the pod side of node bring-up (CNI and image pull delays).
import { execFile } from 'node:child_process';
import { rmSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { promisify } from 'node:util';
import { afterAll, describe, expect, it } from 'vitest';
import { addNode, core, createNamespace, deleteNode, readPod, sandbox, waitFor } from '../../../test/sandbox.js';
import { BRING_UP } from './bring-up.js';
import { k8s } from './kube.js';

const run = promisify(execFile);
const nodes: string[] = [];
afterAll(async () => {
  for (const n of nodes) await deleteNode(n);
});

async function node(prefix: string, annotations: Record<string, string> = {}): Promise<string> {
  const name = await addNode({ prefix, annotations });
  nodes.push(name);
  return name;
}

function kubectl(...args: string[]): Promise<string> {
  const { state } = sandbox();
  return run(join(state.binDir, 'kubectl'), ['--kubeconfig', state.kubeconfig, ...args], { timeout: 30_000 }).then((r) => r.stdout);
}

/** kubectl's error output for a command that must fail. */
async function kubectlError(...args: string[]): Promise<string> {
  try {
    await kubectl(...args);
  } catch (err) {
    return String((err as { stderr?: string }).stderr ?? err);
  }
  throw new Error(`kubectl ${args.join(' ')} succeeded`);
}

async function events(ns: string, pod: string): Promise<k8s.CoreV1Event[]> {
  return (await core().listNamespacedEvent({ namespace: ns, fieldSelector: `involvedObject.name=${pod}` })).items;
}

const eventText = (e: k8s.CoreV1Event[]) => e.map((x) => `${x.type} ${x.reason} x${x.count ?? 1}: ${x.message}`);

/** What a pod looks like, for a wait that timed out: phase, conditions, each container's state, its Events. */
async function podReport(ns: string, name: string): Promise<string> {
  const p = await readPod(ns, name);
  if (!p) return `pod ${ns}/${name}: not found`;
  const st = (s: k8s.V1ContainerStatus) => {
    const [state, detail] = Object.entries(s.state ?? {})[0] ?? ['?', {}];
    const d = detail as { reason?: string; exitCode?: number };
    return `${s.name}=${state}${d.reason ? `/${d.reason}` : ''}${d.exitCode !== undefined ? `/exit ${d.exitCode}` : ''} ready=${s.ready} restarts=${s.restartCount}`;
  };
  const ev = await events(ns, name).catch(() => []);
  return [
    `pod ${ns}/${name}: phase=${p.status?.phase} node=${p.spec?.nodeName} ip=${p.status?.podIP ?? '-'}`,
    `  conditions: ${(p.status?.conditions ?? []).map((c) => `${c.type}=${c.status}`).join(' ')}`,
    `  init containers: ${(p.status?.initContainerStatuses ?? []).map(st).join('; ') || '-'}`,
    `  containers: ${(p.status?.containerStatuses ?? []).map(st).join('; ') || '-'}`,
    `  events:\n${eventText(ev).map((t) => `    ${t}`).join('\n') || '    -'}`,
  ].join('\n');
}

/** Waits until `check` accepts the pod; on timeout, says what the pod looked like. */
async function waitForPod<T>(ns: string, name: string, check: (p: k8s.V1Pod) => T | undefined | false, what: string, timeoutMs = 30_000): Promise<T> {
  try {
    return await waitFor(async () => {
      const p = await readPod(ns, name);
      return p ? check(p) : undefined;
    }, what, timeoutMs);
  } catch (err) {
    throw new Error(`${(err as Error).message}\n${await podReport(ns, name).catch((e: unknown) => String(e))}`, { cause: err });
  }
}

async function waitForEvent(ns: string, pod: string, reason: string, message: RegExp, timeoutMs = 30_000): Promise<k8s.CoreV1Event> {
  return waitFor(async () => (await events(ns, pod)).find((e) => e.reason === reason && message.test(e.message ?? '')), `a ${reason} Event (${message}) for ${pod}`, timeoutMs).catch(async (err: Error) => {
    throw new Error(`${err.message}\n${await podReport(ns, pod)}`, { cause: err });
  });
}

const condition = (p: k8s.V1Pod, type: string) => p.status?.conditions?.find((c) => c.type === type)?.status;
const podDir = (p: k8s.V1Pod) => join(sandbox().layout.paths.pods, p.metadata!.uid!);
const shell = (name: string, script: string, extra: Partial<k8s.V1Container> = {}): k8s.V1Container => ({ name, image: 'sandbox-shell', command: ['/bin/sh', '-c', script], ...extra });

describe('simulated kubelet: probes', () => {
  it('a readiness probe (httpGet on the pod IP) gates the pod Ready condition and its Service endpoint', async () => {
    const ns = await createNamespace('ready');
    const nodeName = await node('ready');
    // Answers 200 on /ready while a file named "ready" exists in its directory, 503 otherwise.
    const server = `require('http').createServer((q, s) => { s.statusCode = require('fs').existsSync('ready') ? 200 : 503; s.end(); }).listen(8080, process.env.MY_IP)`;
    await core().createNamespacedPod({
      namespace: ns,
      body: {
        metadata: { name: 'web', labels: { app: 'web' } },
        spec: {
          nodeName,
          terminationGracePeriodSeconds: 1,
          containers: [
            {
              name: 'main',
              image: 'sandbox-node',
              args: ['-e', server],
              env: [{ name: 'MY_IP', valueFrom: { fieldRef: { fieldPath: 'status.podIP' } } }],
              ports: [{ name: 'http', containerPort: 8080 }],
              readinessProbe: { httpGet: { path: '/ready', port: 'http' as unknown as k8s.IntOrString }, periodSeconds: 1, failureThreshold: 1 },
            },
          ],
        },
      },
    });
    await core().createNamespacedService({ namespace: ns, body: { metadata: { name: 'web' }, spec: { selector: { app: 'web' }, ports: [{ port: 80, targetPort: 'http' as unknown as k8s.IntOrString }] } } });
    const slice = (ready: boolean) =>
      waitFor(async () => {
        const slices = await sandbox().kc.makeApiClient(k8s.DiscoveryV1Api).listNamespacedEndpointSlice({ namespace: ns, labelSelector: 'kubernetes.io/service-name=web' });
        const endpoints = slices.items.flatMap((s) => s.endpoints ?? []);
        return endpoints.length === 1 && endpoints[0]!.conditions?.ready === ready ? endpoints[0] : undefined;
      }, `the Service endpoint to be ready=${ready}`);

    const unready = await waitForPod(ns, 'web', (p) => (p.status?.containerStatuses?.[0]?.state?.running && (p.status?.containerStatuses?.[0]?.restartCount ?? 0) === 0 ? p : undefined), 'the container to run');
    // The probe has failed (503) by now at the latest a second later; the pod must not have been Ready.
    await new Promise((r) => setTimeout(r, 2000));
    const still = (await readPod(ns, 'web'))!;
    expect([still.status?.phase, condition(still, 'Ready'), condition(still, 'ContainersReady'), still.status?.containerStatuses?.[0]?.ready]).toEqual(['Running', 'False', 'False', false]);
    await slice(false);
    await waitForEvent(ns, 'web', 'Unhealthy', /^Readiness probe failed: HTTP probe failed with statuscode: 503$/);

    writeFileSync(join(podDir(unready), 'ready'), '');
    const ready = await waitForPod(ns, 'web', (p) => condition(p, 'Ready') === 'True' && p, 'the pod to turn Ready once its readiness probe passes', 15_000);
    expect(ready.status?.containerStatuses?.[0]?.ready).toBe(true);
    await slice(true);

    rmSync(join(podDir(unready), 'ready'));
    const again = await waitForPod(ns, 'web', (p) => condition(p, 'Ready') === 'False' && p, 'the pod to turn unready once its readiness probe fails', 15_000);
    expect(again.status?.phase).toBe('Running');
    expect(again.status?.containerStatuses?.[0]?.restartCount).toBe(0); // readiness never restarts
  });

  it('a failing liveness probe restarts the container (restartCount, lastState, Killing Event); a passing exec probe sees the container env', async () => {
    const ns = await createNamespace('live');
    const nodeName = await node('live');
    await core().createNamespacedPod({
      namespace: ns,
      body: {
        metadata: { name: 'flaky' },
        spec: {
          nodeName,
          terminationGracePeriodSeconds: 1,
          containers: [
            // The first run is unhealthy; the run after the restart makes itself healthy.
            shell('main', 'if [ -f marker ]; then echo "second run"; touch healthy; else touch marker; echo "first run"; fi; exec sleep 600', {
              livenessProbe: { exec: { command: ['/bin/sh', '-c', 'test -f healthy'] }, initialDelaySeconds: 1, periodSeconds: 1, failureThreshold: 2 },
            }),
            shell('steady', 'exec sleep 600', {
              env: [{ name: 'PROBE_TOKEN', value: 'expected' }],
              livenessProbe: { exec: { command: ['/bin/sh', '-c', 'test "$PROBE_TOKEN" = expected'] }, periodSeconds: 1, failureThreshold: 1 },
            }),
          ],
        },
      },
    });
    const restarted = await waitForPod(
      ns,
      'flaky',
      (p) => {
        const main = p.status?.containerStatuses?.find((c) => c.name === 'main');
        return main?.restartCount === 1 && main.state?.running ? p : undefined;
      },
      'the main container to be restarted once and run again',
      60_000,
    );
    const main = restarted.status!.containerStatuses!.find((c) => c.name === 'main')!;
    const steady = restarted.status!.containerStatuses!.find((c) => c.name === 'steady')!;
    expect(main.lastState?.terminated?.exitCode).toBeGreaterThan(128);
    expect([steady.restartCount, steady.state?.running !== undefined]).toEqual([0, true]);
    const ev = eventText(await events(ns, 'flaky'));
    expect(ev).toContainEqual(expect.stringMatching(/^Warning Unhealthy x\d+: Liveness probe failed: $/));
    expect(ev).toContainEqual('Normal Killing x1: Container main failed liveness probe, will be restarted');
    expect(ev).toContainEqual(expect.stringMatching(/^Warning BackOff x1: Back-off restarting failed container main in pod flaky_/));

    expect(await kubectl('logs', '-n', ns, 'flaky', '-c', 'main')).toBe('second run\n');
    expect(await kubectl('logs', '-n', ns, 'flaky', '-c', 'main', '--previous')).toBe('first run\n');
    expect(await kubectlError('logs', '-n', ns, 'flaky', '-c', 'steady', '--previous')).toMatch(/previous terminated container "steady" in pod "flaky" not found/);
  });
});

describe('simulated kubelet: init containers', () => {
  it('runs init containers in order, each to completion, before the containers; reports them as Init:N/M would show', async () => {
    const ns = await createNamespace('init');
    const nodeName = await node('init');
    const work = [{ name: 'work', mountPath: '/work' }];
    await core().createNamespacedPod({
      namespace: ns,
      body: {
        metadata: { name: 'ordered' },
        spec: {
          nodeName,
          restartPolicy: 'Never',
          volumes: [{ name: 'work', emptyDir: {} }],
          initContainers: [shell('first', 'sleep 2; echo first >> /work/order', { volumeMounts: work }), shell('second', 'echo second >> /work/order', { volumeMounts: work })],
          containers: [shell('main', 'echo main >> /work/order; cat /work/order', { volumeMounts: work })],
        },
      },
    });
    const initializing = await waitForPod(ns, 'ordered', (p) => (p.status?.initContainerStatuses?.[0]?.state?.running ? p : undefined), 'the first init container to run');
    expect([initializing.status?.phase, condition(initializing, 'Initialized'), condition(initializing, 'Ready')]).toEqual(['Pending', 'False', 'False']);
    expect(initializing.status?.initContainerStatuses?.[1]?.state?.waiting?.reason).toBe('PodInitializing');
    expect(initializing.status?.containerStatuses?.[0]?.state?.waiting?.reason).toBe('PodInitializing');
    expect(await kubectl('get', 'pod', '-n', ns, 'ordered', '--no-headers')).toMatch(/\bInit:0\/2\b/);

    const done = await waitForPod(ns, 'ordered', (p) => p.status?.phase === 'Succeeded' && p, 'the pod to succeed', 30_000);
    expect(condition(done, 'Initialized')).toBe('True');
    expect(done.status?.initContainerStatuses?.map((s) => [s.name, s.state?.terminated?.exitCode, s.ready])).toEqual([
      ['first', 0, true],
      ['second', 0, true],
    ]);
    expect(await kubectl('logs', '-n', ns, 'ordered', '-c', 'main')).toBe('first\nsecond\nmain\n');
  });

  it('a failed init container fails the pod under restartPolicy Never (the containers never start) and is retried otherwise', async () => {
    const ns = await createNamespace('initfail');
    const nodeName = await node('initfail');
    const spec = (restartPolicy: string): k8s.V1PodSpec => ({
      nodeName,
      restartPolicy,
      terminationGracePeriodSeconds: 1,
      initContainers: [shell('setup', 'echo cannot set up; exit 3')],
      containers: [shell('main', 'echo must not run; sleep 600')],
    });
    await core().createNamespacedPod({ namespace: ns, body: { metadata: { name: 'never' }, spec: spec('Never') } });
    await core().createNamespacedPod({ namespace: ns, body: { metadata: { name: 'always' }, spec: spec('Always') } });
    const failed = await waitForPod(ns, 'never', (p) => p.status?.phase === 'Failed' && p, 'the pod to fail');
    expect(failed.status?.initContainerStatuses?.[0]?.state?.terminated?.exitCode).toBe(3);
    expect(failed.status?.containerStatuses?.[0]?.state?.waiting?.reason).toBe('PodInitializing');
    expect(await kubectl('logs', '-n', ns, 'never', '-c', 'setup')).toBe('cannot set up\n');

    const retried = await waitForPod(ns, 'always', (p) => ((p.status?.initContainerStatuses?.[0]?.restartCount ?? 0) >= 1 ? p : undefined), 'the init container to be retried');
    expect(retried.status?.phase).toBe('Pending');
    expect(retried.status?.initContainerStatuses?.[0]?.lastState?.terminated?.exitCode ?? retried.status?.initContainerStatuses?.[0]?.state?.terminated?.exitCode).toBe(3);
    expect(await kubectl('get', 'pod', '-n', ns, 'always', '--no-headers')).toMatch(/\bInit:(CrashLoopBackOff|Error|0\/1)\b/);
  });
});

describe('simulated kubelet: kubectl logs and describe', () => {
  it('kubectl logs returns a container output (tail, timestamps, follow) and kubectl describe pod shows the kubelet Events', async () => {
    const ns = await createNamespace('logs');
    const nodeName = await node('logs');
    await core().createNamespacedPod({
      namespace: ns,
      body: { metadata: { name: 'talker' }, spec: { nodeName, restartPolicy: 'Never', containers: [shell('main', 'echo hello; sleep 0.2; echo world >&2; sleep 0.2; echo bye')] } },
    });
    await core().createNamespacedPod({
      namespace: ns,
      body: { metadata: { name: 'streamer' }, spec: { nodeName, restartPolicy: 'Never', containers: [shell('main', 'for i in 1 2 3 4 5 6; do echo line $i; sleep 1.5; done')] } },
    });
    await waitForPod(ns, 'talker', (p) => p.status?.phase === 'Succeeded', 'talker to finish');
    // stdout and stderr are read from two pipes, as a container runtime does: each stream keeps its
    // order, the order between them is not defined. So the log is checked per stream, and the
    // options against the log as it was written.
    const all = await kubectl('logs', '-n', ns, 'talker');
    const lines = all.split('\n').filter(Boolean);
    expect([...lines].sort()).toEqual(['bye', 'hello', 'world']);
    expect(lines.indexOf('hello')).toBeLessThan(lines.indexOf('bye'));
    expect(await kubectl('logs', '-n', ns, 'talker', '--tail=1')).toBe(`${lines.at(-1)}\n`);
    expect(await kubectl('logs', '-n', ns, 'talker', '--limit-bytes=5')).toBe(all.slice(0, 5));
    expect((await kubectl('logs', '-n', ns, 'talker', '--timestamps')).split('\n')[0]).toMatch(new RegExp(`^\\d{4}-\\d\\d-\\d\\dT\\d\\d:\\d\\d:\\d\\d\\.\\d+Z ${lines[0]}$`));

    await waitForPod(ns, 'streamer', (p) => p.status?.phase === 'Running', 'streamer to run');
    // Follows until the container exits: every line, though most are written after the call starts.
    expect(await kubectl('logs', '-n', ns, 'streamer', '-f')).toBe('line 1\nline 2\nline 3\nline 4\nline 5\nline 6\n');

    const describe = await kubectl('describe', 'pod', '-n', ns, 'talker');
    expect(describe).toMatch(/^Events:/m);
    // kubectl shows the container's field path before the message (spec.containers{main}: ...).
    for (const line of [/Normal\s+Pulling\s+.*kubelet\s+.*Pulling image "sandbox-shell"/, /Normal\s+Pulled\s+.*kubelet\s+.*Successfully pulled image "sandbox-shell"/, /Normal\s+Created\s+.*kubelet\s+.*Created container: main/, /Normal\s+Started\s+.*kubelet\s+.*Started container main/]) {
      expect(describe).toMatch(line);
    }
    const started = (await events(ns, 'talker')).find((e) => e.reason === 'Started')!;
    expect([started.source?.component, started.source?.host, started.reportingComponent, started.involvedObject.fieldPath]).toEqual(['kubelet', nodeName, 'kubelet', 'spec.containers{main}']);
  });
});

describe('simulated kubelet: pod side of node bring-up', () => {
  it('a node with cni-delay keeps pods ContainerCreating with FailedCreatePodSandBox Events, then starts them; host-network pods do not wait', async () => {
    const ns = await createNamespace('cni');
    const nodeName = await node('cni', { [BRING_UP.cniDelay]: '8s' });
    const created = (await core().readNode({ name: nodeName })).metadata!.creationTimestamp!;
    const sleeper = (name: string, hostNetwork = false): k8s.V1Pod => ({
      metadata: { name },
      spec: { nodeName, hostNetwork, terminationGracePeriodSeconds: 1, containers: [shell('main', 'exec sleep 600')] },
    });
    await core().createNamespacedPod({ namespace: ns, body: sleeper('app') });
    await core().createNamespacedPod({ namespace: ns, body: sleeper('agent', true) });

    const failure = await waitForEvent(ns, 'app', 'FailedCreatePodSandBox', /^Failed to create pod sandbox: rpc error: code = Unknown desc = failed to setup network for sandbox "[0-9a-f]{64}": plugin type="aws-cni"/);
    expect([failure.type, failure.source?.component]).toEqual(['Warning', 'kubelet']);
    const waiting = (await readPod(ns, 'app'))!;
    expect([waiting.status?.phase, waiting.status?.containerStatuses?.[0]?.state?.waiting?.reason, condition(waiting, 'PodReadyToStartContainers')]).toEqual(['Pending', 'ContainerCreating', 'False']);
    const agent = await waitForPod(ns, 'agent', (p) => p.status?.phase === 'Running' && p, 'the host-network pod to run before the CNI is ready');
    // startedAt and creationTimestamp are whole seconds; the CNI is ready 8 s after the creation second.
    expect(new Date(agent.status!.containerStatuses![0]!.state!.running!.startedAt!).getTime()).toBeLessThan(new Date(created).getTime() + 8000);

    const app = await waitForPod(ns, 'app', (p) => p.status?.phase === 'Running' && p, 'the pod to start once the CNI is ready', 30_000);
    expect(new Date(app.status!.containerStatuses![0]!.state!.running!.startedAt!).getTime()).toBeGreaterThanOrEqual(new Date(created).getTime() + 8000);
    expect(condition(app, 'PodReadyToStartContainers')).toBe('True');
  });

  it('a node with image-pull-delay takes that long for the first pull of an image only; the next pod finds it cached', async () => {
    const ns = await createNamespace('pull');
    const nodeName = await node('pull', { [BRING_UP.imagePullDelay]: '5s' });
    const image = 'sandbox-shell:pull-test';
    const sleeper = (name: string): k8s.V1Pod => ({ metadata: { name }, spec: { nodeName, terminationGracePeriodSeconds: 1, containers: [{ ...shell('main', 'exec sleep 600'), image }] } });
    // Measured here, from before the create to the first read that shows the pod Running (the API
    // keeps startedAt in whole seconds).
    const runningAfter = async (name: string, t0: number) => {
      await waitForPod(ns, name, (p) => p.status?.phase === 'Running', `${name} to run`, 30_000);
      return Date.now() - t0;
    };

    const t0 = Date.now();
    await core().createNamespacedPod({ namespace: ns, body: sleeper('first') });
    await waitForEvent(ns, 'first', 'Pulling', new RegExp(`^Pulling image "${image}"$`));
    const pulling = (await readPod(ns, 'first'))!;
    expect([pulling.status?.phase, pulling.status?.containerStatuses?.[0]?.state?.waiting?.reason]).toEqual(['Pending', 'ContainerCreating']);
    expect(await runningAfter('first', t0)).toBeGreaterThanOrEqual(5000);
    await waitForEvent(ns, 'first', 'Pulled', new RegExp(`^Successfully pulled image "${image}" in 5(\\.\\d+)?s \\(.* including waiting\\)\\. Image size: \\d+ bytes\\.$`));

    // The second pod is not timed (an upper bound is a wall-clock budget a loaded machine breaks):
    // the kubelet's own record says it did not pull.
    await core().createNamespacedPod({ namespace: ns, body: sleeper('second') });
    await waitForPod(ns, 'second', (p) => p.status?.phase === 'Running', 'second to run', 30_000);
    await waitForEvent(ns, 'second', 'Pulled', new RegExp(`^Container image "${image}" already present on machine$`));
    expect((await events(ns, 'second')).some((e) => e.reason === 'Pulling')).toBe(false);
  });
});
