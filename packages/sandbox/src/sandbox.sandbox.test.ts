import { execFile } from 'node:child_process';
import { afterAll, describe, expect, it } from 'vitest';
import { addNode, core, createNamespace, deleteNode, readPod, sandbox, waitFor } from '../../../test/sandbox.js';
import { execInSandbox } from './sandbox.js';
import type { k8s } from './kube.js';

const TAINT = { key: 'test.kube-node-ready.io/gate', value: 'true', effect: 'NoSchedule' };
const nodes: string[] = [];
afterAll(async () => {
  for (const n of nodes) await deleteNode(n);
});

function shellPod(name: string, script: string, extra: Partial<k8s.V1PodSpec> = {}): k8s.V1Pod {
  return {
    metadata: { name },
    spec: {
      restartPolicy: 'Never',
      containers: [
        {
          name: 'main',
          image: 'sandbox-shell',
          command: ['/bin/sh', '-c', script],
          env: [
            { name: 'MY_NODE', valueFrom: { fieldRef: { fieldPath: 'spec.nodeName' } } },
            { name: 'MY_NAMESPACE', valueFrom: { fieldRef: { fieldPath: 'metadata.namespace' } } },
            { name: 'MY_POD', valueFrom: { fieldRef: { fieldPath: 'metadata.name' } } },
            { name: 'MY_IP', valueFrom: { fieldRef: { fieldPath: 'status.podIP' } } },
          ],
        },
      ],
      ...extra,
    },
  };
}

const terminated = (pod: k8s.V1Pod | undefined) => pod?.status?.containerStatuses?.[0]?.state?.terminated;

describe('sandbox: scheduler and simulated kubelet', () => {
  it('binds a pod to a tainted node only when it tolerates the taint', async () => {
    const ns = await createNamespace('sched');
    const node = await addNode({ prefix: 'tainted', taints: [TAINT], labels: { 'test.kube-node-ready.io/pool': ns } });
    nodes.push(node);
    const pin = { nodeSelector: { 'test.kube-node-ready.io/pool': ns } };

    await core().createNamespacedPod({ namespace: ns, body: shellPod('intolerant', 'exit 0', pin) });
    await core().createNamespacedPod({
      namespace: ns,
      body: shellPod('tolerant', 'exit 0', { ...pin, tolerations: [{ key: TAINT.key, operator: 'Exists', effect: 'NoSchedule' }] }),
    });

    const tolerant = await waitFor(async () => {
      const p = await readPod(ns, 'tolerant');
      return p?.status?.phase === 'Succeeded' ? p : undefined;
    }, 'the tolerating pod to run to completion');
    expect(tolerant.spec?.nodeName).toBe(node);

    const intolerant = await waitFor(async () => {
      const p = await readPod(ns, 'intolerant');
      const c = p?.status?.conditions?.find((x) => x.type === 'PodScheduled');
      return c?.status === 'False' ? p : undefined;
    }, 'the scheduler to report the intolerant pod unschedulable');
    expect(intolerant.spec?.nodeName).toBeUndefined();
    expect(intolerant.status?.conditions?.find((x) => x.type === 'PodScheduled')?.message).toMatch(/untolerated taint/);
  });

  it('runs the container as a process with the env, token and termination message a kubelet gives', async () => {
    const ns = await createNamespace('exec');
    const node = await addNode({ prefix: 'exec' });
    nodes.push(node);
    const script = [
      'echo "node=$MY_NODE ns=$MY_NAMESPACE pod=$MY_POD ip=$MY_IP" > "$KNR_TERMINATION_LOG"',
      'echo "api=$KUBERNETES_SERVICE_HOST:$KUBERNETES_SERVICE_PORT" >> "$KNR_TERMINATION_LOG"',
      'test -s "$KNR_SERVICEACCOUNT_DIR/token" && echo token=yes >> "$KNR_TERMINATION_LOG"',
      'grep -q "BEGIN CERTIFICATE" "$KNR_SERVICEACCOUNT_DIR/ca.crt" && echo ca=yes >> "$KNR_TERMINATION_LOG"',
      'echo "sa-ns=$(cat $KNR_SERVICEACCOUNT_DIR/namespace)" >> "$KNR_TERMINATION_LOG"',
      'exit 7',
    ].join('\n');
    await core().createNamespacedPod({ namespace: ns, body: shellPod('env', script, { nodeName: node }) });
    const pod = await waitFor(async () => {
      const p = await readPod(ns, 'env');
      return p?.status?.phase === 'Failed' ? p : undefined;
    }, 'the pod to fail with exit 7');
    const t = terminated(pod)!;
    expect(t.exitCode).toBe(7);
    expect(t.reason).toBe('Error');
    expect(t.startedAt).toBeDefined();
    expect(t.finishedAt).toBeDefined();
    expect(pod.status?.podIP).toMatch(/^10\.24[4-7]\./);
    expect(t.message).toContain(`node=${node} ns=${ns} pod=env ip=${pod.status?.podIP}`);
    expect(t.message).toContain(`api=${sandbox().layout.kubernetesServiceIp}:443`);
    expect(t.message).toContain('token=yes');
    expect(t.message).toContain('ca=yes');
    expect(t.message).toContain(`sa-ns=${ns}`);
  });

  it('reports garbage as the termination message on a termination-message=garbage node, keeping the exit code', async () => {
    const ns = await createNamespace('garbage');
    const node = await addNode({ prefix: 'garbage', faults: { terminationMessage: 'garbage' } });
    nodes.push(node);
    await core().createNamespacedPod({ namespace: ns, body: shellPod('noisy', 'echo \'{"ok":true}\' > "$KNR_TERMINATION_LOG"; exit 3', { nodeName: node }) });
    const pod = await waitFor(async () => {
      const p = await readPod(ns, 'noisy');
      return p?.status?.phase === 'Failed' ? p : undefined;
    }, 'the pod to fail');
    const t = pod.status?.containerStatuses?.[0]?.state?.terminated;
    expect(t?.exitCode).toBe(3);
    expect(t?.message).toBeTruthy();
    expect(t?.message).not.toBe('{"ok":true}\n');
    expect(Buffer.byteLength(t?.message ?? '')).toBeLessThanOrEqual(4096);
  });

  it('keeps a pod on a never-start node Pending in ContainerCreating', async () => {
    const ns = await createNamespace('never');
    const node = await addNode({ prefix: 'never', faults: { neverStart: true } });
    nodes.push(node);
    await core().createNamespacedPod({ namespace: ns, body: shellPod('stuck', 'exit 0', { nodeName: node }) });
    const pod = await waitFor(async () => {
      const p = await readPod(ns, 'stuck');
      return p?.status?.containerStatuses?.[0]?.state?.waiting ? p : undefined;
    }, 'the kubelet to report ContainerCreating');
    expect(pod.status?.phase).toBe('Pending');
    expect(pod.status?.containerStatuses?.[0]?.state?.waiting?.reason).toBe('ContainerCreating');
    await new Promise((r) => setTimeout(r, 1500));
    const later = await readPod(ns, 'stuck');
    expect(later?.status?.phase).toBe('Pending');
    expect(later?.status?.containerStatuses?.[0]?.state?.running).toBeUndefined();
  });

  it('stops the containers of a pod someone else marked Failed (an eviction) and never reports it Running again', async () => {
    const ns = await createNamespace('evicted');
    const node = await addNode({ prefix: 'evicted' });
    nodes.push(node);
    await core().createNamespacedPod({ namespace: ns, body: shellPod('victim', 'exec sleep 302', { nodeName: node }) });
    await waitFor(async () => (await readPod(ns, 'victim'))?.status?.phase === 'Running', 'the pod to run');
    const pid = await waitFor(async () => findPid('sleep 302'), 'the sleep process');
    await core().patchNamespacedPodStatus({
      name: 'victim',
      namespace: ns,
      body: [
        { op: 'replace', path: '/status/phase', value: 'Failed' },
        { op: 'add', path: '/status/reason', value: 'Evicted' },
      ],
    });
    await waitFor(async () => !processAlive(pid), 'the process to be killed', 15_000);
    await new Promise((r) => setTimeout(r, 1000)); // a status report after the kill would land now
    const pod = await readPod(ns, 'victim');
    expect(pod?.status?.phase).toBe('Failed');
    expect(pod?.status?.reason).toBe('Evicted');
  });

  it('kills the process when its pod is deleted', async () => {
    const ns = await createNamespace('kill');
    const node = await addNode({ prefix: 'kill' });
    nodes.push(node);
    await core().createNamespacedPod({
      namespace: ns,
      body: shellPod('sleeper', 'echo $$ > "$KNR_TERMINATION_LOG.pid"; exec sleep 301', { nodeName: node }),
    });
    const pod = await waitFor(async () => {
      const p = await readPod(ns, 'sleeper');
      return p?.status?.phase === 'Running' ? p : undefined;
    }, 'the pod to run');
    const pid = await waitFor(async () => findPid(`sleep 301`), 'the sleep process');
    expect(processAlive(pid)).toBe(true);
    await core().deleteNamespacedPod({ name: 'sleeper', namespace: ns });
    await waitFor(async () => !processAlive(pid), 'the process to be killed', 15_000);
    await waitFor(async () => (await readPod(ns, 'sleeper')) === undefined, 'the kubelet to confirm the deletion');
    expect(pod.spec?.nodeName).toBe(node);
  });

  it('honours activeDeadlineSeconds', async () => {
    const ns = await createNamespace('deadline');
    const node = await addNode({ prefix: 'deadline' });
    nodes.push(node);
    await core().createNamespacedPod({ namespace: ns, body: shellPod('slow', 'exec sleep 60', { nodeName: node, activeDeadlineSeconds: 1 }) });
    const pod = await waitFor(async () => {
      const p = await readPod(ns, 'slow');
      return p?.status?.phase === 'Failed' ? p : undefined;
    }, 'the deadline to fail the pod', 15_000);
    expect(pod.status?.reason).toBe('DeadlineExceeded');
  });

  it('a service-account token authenticates through the kubernetes Service and gets 403 where RBAC says no', async () => {
    const ns = await createNamespace('rbac');
    const node = await addNode({ prefix: 'rbac' });
    nodes.push(node);
    const script = `
      const https = require('node:https'); const fs = require('node:fs');
      const dir = process.env.KNR_SERVICEACCOUNT_DIR;
      const get = (path) => new Promise((res) => https.get({ host: process.env.KUBERNETES_SERVICE_HOST, port: process.env.KUBERNETES_SERVICE_PORT, path,
        ca: fs.readFileSync(dir + '/ca.crt'), headers: { authorization: 'Bearer ' + fs.readFileSync(dir + '/token', 'utf8') } },
        (r) => { let b = ''; r.on('data', (d) => b += d); r.on('end', () => res(r.statusCode + ' ' + b)); }).on('error', (e) => res('ERR ' + e.message)));
      (async () => {
        const version = await get('/version');
        const nodes = await get('/api/v1/nodes');
        fs.writeFileSync(process.env.KNR_TERMINATION_LOG, JSON.stringify({ version: version.slice(0, 3), nodes: nodes.slice(0, 300) }));
      })();`;
    await core().createNamespacedPod({
      namespace: ns,
      body: { metadata: { name: 'client' }, spec: { nodeName: node, restartPolicy: 'Never', containers: [{ name: 'main', image: 'sandbox-node', args: ['-e', script] }] } },
    });
    const pod = await waitFor(async () => {
      const p = await readPod(ns, 'client');
      return p?.status?.phase === 'Succeeded' || p?.status?.phase === 'Failed' ? p : undefined;
    }, 'the client pod to finish');
    const result = JSON.parse(terminated(pod)?.message ?? '{}') as { version: string; nodes: string };
    expect(result.version).toBe('200');
    expect(result.nodes).toMatch(/^403 /);
    expect(result.nodes).toContain(`system:serviceaccount:${ns}:default`);
  });
});

describe('sandbox: cluster DNS', () => {
  const resolve = async (name: string, server: string) => {
    const script = `const { Resolver } = require('node:dns').promises; const r = new Resolver({ timeout: 3000, tries: 1 }); r.setServers(['${server}']);
      r.resolve4('${name}').then((a) => console.log(JSON.stringify(a)), (e) => console.log(JSON.stringify(e.code)));`;
    const out = await execInSandbox(sandbox().layout, [process.execPath, '-e', script]);
    return JSON.parse(out.stdout.trim() || 'null') as string[] | string;
  };

  it('answers from the Services in the API, through the ClusterIP and each DNS pod', async () => {
    const ns = await createNamespace('dns');
    const svc = await core().createNamespacedService({ namespace: ns, body: { metadata: { name: 'web' }, spec: { ports: [{ port: 80 }] } } });
    const ip = svc.spec!.clusterIP!;
    const name = `web.${ns}.svc.cluster.local`;
    const L = sandbox().layout;
    for (const server of [L.clusterDnsIp, ...L.dnsPodIps]) {
      expect(await waitFor(async () => {
        const a = await resolve(name, server);
        return Array.isArray(a) && a[0] === ip ? a : undefined;
      }, `${server} to answer ${name}`)).toEqual([ip]);
    }
    expect(await resolve(`nothing.${ns}.svc.cluster.local`, L.clusterDnsIp)).toBe('ENOTFOUND');
    expect(await resolve('example.com', L.clusterDnsIp)).toBe('ENOTFOUND');
    await core().deleteNamespacedService({ name: 'web', namespace: ns });
    await waitFor(async () => (await resolve(name, L.clusterDnsIp)) === 'ENOTFOUND', 'the record to disappear');
  });

  it('fault servers: lying, blackhole and dead', async () => {
    const L = sandbox().layout;
    const name = 'kubernetes.default.svc.cluster.local';
    expect(await resolve(name, L.lyingDnsIp)).toEqual([L.lyingAnswer]);
    expect(await resolve(name, L.blackholeDnsIp)).toBe('ETIMEOUT');
    expect(await resolve(name, L.deadDnsIp)).toMatch(/ECONNREFUSED|ETIMEOUT/);
  });
});

function findPid(pattern: string): Promise<number | undefined> {
  return new Promise((resolve) => {
    execFile('pgrep', ['-f', pattern], (_err, stdout) => {
      const pid = Number(stdout.trim().split('\n')[0]);
      resolve(pid > 0 ? pid : undefined);
    });
  });
}

function processAlive(pid: number): boolean {
  try {
    process.kill(pid, 0);
    return true;
  } catch {
    return false;
  }
}
