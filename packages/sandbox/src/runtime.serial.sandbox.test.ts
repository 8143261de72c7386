// The container runtime of the simulated kubelet: a network namespace per pod and a memory cgroup
// per container. OOM kills load the machine and a pod network fault would hit every pod, so it
// runs in the serial project, on a sandbox of its own.
import { existsSync, readFileSync } from 'node:fs';
import { join } from 'node:path';
import { afterAll, describe, expect, it } from 'vitest';
import { addNode, core, createNamespace, deleteNode, readPod, sandbox, waitFor } from '../../../test/sandbox.js';
import { k8s } from './kube.js';
import { NETNS_DIR, POD_MTU_ANNOTATION, podIndex, podNetnsPrefix } from './runtime/pod-network.js';
import { execInSandbox } from './sandbox.js';

const nodes: string[] = [];
afterAll(async () => {
  for (const n of nodes) await deleteNode(n);
});

const SERVER = `require('node:http').createServer((req, res) => res.end(process.env.POD_NAME + ' ' + process.env.POD_IP)).listen(Number(process.env.PORT), '0.0.0.0');`;

function serverPod(name: string, node: string, extra: Partial<k8s.V1PodSpec> = {}, port = 8080): k8s.V1Pod {
  return {
    metadata: { name, labels: { app: name } },
    spec: {
      nodeName: node,
      restartPolicy: 'Never',
      activeDeadlineSeconds: 600,
      containers: [
        {
          name: 'main',
          image: 'sandbox-node',
          args: ['-e', SERVER],
          env: [
            { name: 'PORT', value: String(port) },
            { name: 'POD_NAME', valueFrom: { fieldRef: { fieldPath: 'metadata.name' } } },
            { name: 'POD_IP', valueFrom: { fieldRef: { fieldPath: 'status.podIP' } } },
          ],
          // A server well within its limit runs normally: the limit alone is no OOM kill.
          resources: { limits: { memory: '256Mi' } },
        },
      ],
      ...extra,
    },
  };
}

async function runningPod(ns: string, name: string): Promise<k8s.V1Pod> {
  return waitFor(async () => {
    const p = await readPod(ns, name);
    return p?.status?.phase === 'Running' && p.status.podIP ? p : undefined;
  }, `pod ${ns}/${name} to run with a pod IP`, 60_000, 200);
}

/** One HTTP GET from the sandbox's network namespace (where the kubelet, the service proxy and probes live). */
async function httpGetFromNode(url: string, timeoutMs = 2000): Promise<string> {
  const script = `let done = false; const end = (s) => { if (!done) { done = true; console.log(s); process.exit(0); } };
    const r = require('node:http').get(${JSON.stringify(url)}, (res) => { let b = ''; res.on('data', (d) => (b += d)); res.on('end', () => end(b)); });
    r.setTimeout(${timeoutMs}, () => end('timeout')); r.on('error', (e) => end('error ' + e.code));`;
  return (await execInSandbox(sandbox().layout, [process.execPath, '-e', script])).stdout.trim();
}

/** What a pod network leaves behind for a pod IP: its namespace, the veth in the sandbox namespace. */
async function networkLeftovers(ip: string): Promise<string[]> {
  const { layout } = sandbox();
  const n = podIndex(layout, ip);
  const left: string[] = [];
  if (existsSync(join(NETNS_DIR, `${podNetnsPrefix(layout.slot)}${n}`))) left.push(`netns ${podNetnsPrefix(layout.slot)}${n}`);
  const links = await execInSandbox(layout, ['ip', '-o', 'link', 'show']);
  if (new RegExp(`\\bknr${layout.slot}p${n}[@:]`).test(links.stdout)) left.push(`veth knr${layout.slot}p${n}`);
  return left;
}

/** The pod's cgroup directories under the roots the sandbox recorded (cgroups.json in its directory). */
function podCgroups(uid: string): string[] {
  const { roots } = JSON.parse(readFileSync(join(sandbox().layout.dir, 'cgroups.json'), 'utf8')) as { roots: string[] };
  return roots.map((r) => join(r, `pod${uid}`)).filter((d) => existsSync(d));
}

function containerState(p: k8s.V1Pod | undefined): string {
  const c = p?.status?.containerStatuses?.[0];
  return JSON.stringify({ phase: p?.status?.phase, podIP: p?.status?.podIP, restartCount: c?.restartCount, state: c?.state, lastState: c?.lastState });
}

describe.sequential('container runtime: pod network', () => {
  const seenIps: string[] = [];
  let ns: string;
  let node: string;

  it('two pods on one node both listen on port 8080, each on its own pod IP', async () => {
    ns = await createNamespace('podnet');
    node = await addNode({ prefix: 'podnet' });
    nodes.push(node);
    await core().createNamespacedPod({ namespace: ns, body: serverPod('web-a', node) });
    await core().createNamespacedPod({ namespace: ns, body: serverPod('web-b', node) });
    const a = await runningPod(ns, 'web-a');
    const b = await runningPod(ns, 'web-b');
    seenIps.push(a.status!.podIP!, b.status!.podIP!);
    expect(a.status!.podIP).not.toBe(b.status!.podIP);
    for (const p of [a, b]) {
      const answer = await waitFor(async () => {
        const r = await httpGetFromNode(`http://${p.status!.podIP}:8080/`);
        return r.startsWith('web-') ? r : undefined;
      }, `${p.metadata!.name} to answer on ${p.status!.podIP}:8080`, 20_000, 200);
      expect(answer).toBe(`${p.metadata!.name} ${p.status!.podIP}`);
    }
    // Each has a namespace and a veth pair of its own (what the clean-up test below sees go).
    const { slot } = sandbox().layout;
    const n = podIndex(sandbox().layout, a.status!.podIP!);
    expect(await networkLeftovers(a.status!.podIP!)).toEqual([`netns ${podNetnsPrefix(slot)}${n}`, `veth knr${slot}p${n}`]);
  });

  it('a pod reaches the apiserver, the cluster DNS, a ClusterIP Service and another pod; an unallocated pod IP fails at once', async () => {
    const L = sandbox().layout;
    const a = (await readPod(ns, 'web-a'))!;
    const b = (await readPod(ns, 'web-b'))!;
    const svc = await core().createNamespacedService({ namespace: ns, body: { metadata: { name: 'web' }, spec: { ports: [{ name: 'http', port: 80, targetPort: 8080 as unknown as k8s.IntOrString }] } } });
    await sandbox()
      .kc.makeApiClient(k8s.DiscoveryV1Api)
      .createNamespacedEndpointSlice({
        namespace: ns,
        body: {
          metadata: { name: 'web-1', labels: { 'kubernetes.io/service-name': 'web', 'endpointslice.kubernetes.io/managed-by': 'test.kube-node-ready.io' } },
          addressType: 'IPv4',
          endpoints: [{ addresses: [a.status!.podIP!], conditions: { ready: true } }],
          ports: [{ name: 'http', port: 8080, protocol: 'TCP' }],
        },
      });
    const unallocated = '10.247.255.254';
    const client = `
      const fs = require('node:fs'); const https = require('node:https'); const http = require('node:http'); const net = require('node:net'); const dns = require('node:dns');
      const ca = fs.readFileSync(process.env.KNR_SERVICEACCOUNT_DIR + '/ca.crt');
      const get = (mod, url, opts = {}) => new Promise((resolve) => {
        const r = mod.get(url, { ...opts, timeout: 3000 }, (res) => { let b = ''; res.on('data', (d) => (b += d)); res.on('end', () => resolve(b.slice(0, 200))); });
        r.on('timeout', () => { r.destroy(); resolve('timeout'); }); r.on('error', (e) => resolve('error ' + e.code));
      });
      const connect = (host, port) => new Promise((resolve) => {
        const t0 = Date.now(); const s = net.connect({ host, port }); const end = (r) => { s.destroy(); resolve({ r, ms: Date.now() - t0 }); };
        s.setTimeout(5000, () => end('timeout')); s.on('connect', () => end('connected')); s.on('error', (e) => end(e.code));
      });
      (async () => {
        const nameserver = /nameserver\\s+(\\S+)/.exec(fs.readFileSync(process.env.KNR_RESOLV_CONF, 'utf8'))[1];
        const resolver = new dns.promises.Resolver({ timeout: 2000, tries: 1 }); resolver.setServers([nameserver]);
        const out = {
          addresses: Object.values(require('node:os').networkInterfaces()).flat().filter((i) => i.family === 'IPv4').map((i) => i.address).sort(),
          apiServerService: await get(https, 'https://' + process.env.KUBERNETES_SERVICE_HOST + ':443/version', { ca }),
          apiServerDirect: await get(https, 'https://${L.advertiseAddress}:${L.apiPort}/version', { ca }),
          dns: await resolver.resolve4('kubernetes.default.svc.${L.clusterDomain}').catch((e) => 'error ' + e.code),
          service: await get(http, 'http://${svc.spec!.clusterIP}:80/'),
          pod: await get(http, 'http://${b.status!.podIP}:8080/'),
          unallocated: await connect('${unallocated}', 8080),
        };
        fs.writeFileSync(process.env.KNR_TERMINATION_LOG, JSON.stringify(out));
      })();`;
    await core().createNamespacedPod({
      namespace: ns,
      body: { metadata: { name: 'client' }, spec: { nodeName: node, restartPolicy: 'Never', containers: [{ name: 'main', image: 'sandbox-node', args: ['-e', client] }] } },
    });
    const done = await waitFor(async () => {
      const p = await readPod(ns, 'client');
      return p?.status?.phase === 'Succeeded' || p?.status?.phase === 'Failed' ? p : undefined;
    }, 'the client pod to finish', 60_000, 200);
    const terminated = done.status?.containerStatuses?.[0]?.state?.terminated;
    expect(terminated?.exitCode, containerState(done)).toBe(0);
    seenIps.push(done.status!.podIP!);
    const out = JSON.parse(terminated?.message ?? '{}') as Record<string, unknown>;
    expect(out.addresses, 'the pod sees its own IP and its own loopback only').toEqual(['127.0.0.1', done.status!.podIP].sort());
    expect(String(out.apiServerService)).toContain('"gitVersion"');
    expect(String(out.apiServerDirect)).toContain('"gitVersion"');
    expect(out.dns).toEqual([L.kubernetesServiceIp]);
    expect(out.service).toBe(`web-a ${a.status!.podIP}`);
    expect(out.pod).toBe(`web-b ${b.status!.podIP}`);
    const unreached = out.unallocated as { r: string; ms: number };
    expect(unreached.r).toBe('EHOSTUNREACH');
    expect(unreached.ms).toBeLessThan(1000);
  });

  it('a hostNetwork pod runs in the node network: its pod IP is the node address', async () => {
    const port = 18189;
    await core().createNamespacedPod({ namespace: ns, body: serverPod('host-web', node, { hostNetwork: true }, port) });
    const p = await runningPod(ns, 'host-web');
    expect(p.status!.podIP).toBe(p.status!.hostIP);
    const answer = await waitFor(async () => {
      const r = await httpGetFromNode(`http://${p.status!.podIP}:${port}/`);
      return r.startsWith('host-web') ? r : undefined;
    }, `host-web to answer on ${p.status!.podIP}:${port}`, 20_000, 200);
    expect(answer).toBe(`host-web ${p.status!.podIP}`);
  });

  it('a container sees its own network devices under /sys (eth0 with the node pod-mtu), the rest of /sys and its cgroup unchanged', async () => {
    const mtuNode = await addNode({ prefix: 'mtu', annotations: { [POD_MTU_ANNOTATION]: '1400' } });
    nodes.push(mtuNode);
    const script = 'cat /sys/class/net/eth0/mtu; ls /sys/class/net | tr "\\n" " "; echo; test -d /sys/fs/cgroup && echo cgroup-fs';
    await core().createNamespacedPod({
      namespace: ns,
      body: { metadata: { name: 'sysfs' }, spec: { nodeName: mtuNode, restartPolicy: 'Never', containers: [{ name: 'main', image: 'sandbox-shell', command: ['/bin/sh', '-c', script], resources: { limits: { memory: '64Mi' } } }] } },
    });
    const done = await waitFor(async () => {
      const p = await readPod(ns, 'sysfs');
      return p?.status?.phase === 'Succeeded' || p?.status?.phase === 'Failed' ? p : undefined;
    }, 'the sysfs pod to finish', 60_000, 200);
    expect(done.status?.phase, containerState(done)).toBe('Succeeded');
    const out = readFileSync(join(sandbox().layout.dir, 'pods', done.metadata!.uid!, 'main.log'), 'utf8').trim().split('\n');
    expect(out[0]).toBe('1400');
    expect(out[1]!.trim().split(' ').sort()).toEqual(['eth0', 'lo']);
    expect(out[2]).toBe('cgroup-fs');
  });

  it('deleting the pods removes their network namespaces and veths', async () => {
    for (const name of ['web-a', 'web-b', 'client', 'host-web']) await core().deleteNamespacedPod({ name, namespace: ns, gracePeriodSeconds: 0 });
    const remaining = async () => (await Promise.all(seenIps.map((ip) => networkLeftovers(ip)))).flat();
    await waitFor(async () => (await remaining()).length === 0, `no pod network left for ${seenIps.join(', ')}`, 30_000, 200).catch(async (err: Error) => {
      throw new Error(`${err.message}\nleft: ${(await remaining()).join(', ')}`);
    });
    // The route to a released pod IP is gone with its veth: the address is unreachable again, at once.
    expect(await httpGetFromNode(`http://${seenIps[0]}:8080/`)).toBe('error EHOSTUNREACH');
  });
});

describe.sequential('container runtime: memory limits', () => {
  // Grows by 16 MiB every 50 ms, touching every page, until the kernel stops it; without a working
  // limit it stops at 1 GiB (and the test times out) instead of exhausting the machine.
  const HOG = `const a = []; setInterval(() => a.length < 64 && a.push(Buffer.alloc(16 << 20, 1)), 50);`;
  const hogPod = (name: string, node: string, restartPolicy: string): k8s.V1Pod => ({
    metadata: { name },
    spec: {
      nodeName: node,
      restartPolicy,
      containers: [{ name: 'hog', image: 'sandbox-node', args: ['-e', HOG], resources: { requests: { memory: '96Mi' }, limits: { memory: '96Mi' } } }],
    },
  });
  let ns: string;
  let node: string;
  const uids: string[] = [];

  it('a container allocating past its limit is OOMKilled with exit code 137; the pod fails under restartPolicy Never', async () => {
    ns = await createNamespace('oom');
    node = await addNode({ prefix: 'oom' });
    nodes.push(node);
    const created = await core().createNamespacedPod({ namespace: ns, body: hogPod('hog-never', node, 'Never') });
    uids.push(created.metadata!.uid!);
    const p = await waitFor(async () => {
      const pod = await readPod(ns, 'hog-never');
      return pod?.status?.phase === 'Failed' ? pod : undefined;
    }, 'hog-never to fail', 60_000, 200).catch(async (err: Error) => {
      throw new Error(`${err.message}\nlast: ${containerState(await readPod(ns, 'hog-never'))}`);
    });
    const terminated = p.status?.containerStatuses?.[0]?.state?.terminated;
    expect(terminated, containerState(p)).toMatchObject({ reason: 'OOMKilled', exitCode: 137 });
  });

  it('under restartPolicy Always the container restarts: restartCount grows, lastState says OOMKilled', async () => {
    const created = await core().createNamespacedPod({ namespace: ns, body: hogPod('hog-always', node, 'Always') });
    uids.push(created.metadata!.uid!);
    // While it runs, the container is in a cgroup of its own.
    await waitFor(async () => podCgroups(created.metadata!.uid!).length > 0, 'the container cgroup of hog-always', 30_000, 50);
    const p = await waitFor(async () => {
      const pod = await readPod(ns, 'hog-always');
      return (pod?.status?.containerStatuses?.[0]?.restartCount ?? 0) >= 2 ? pod : undefined;
    }, 'hog-always to be restarted twice', 90_000, 500).catch(async (err: Error) => {
      throw new Error(`${err.message}\nlast: ${containerState(await readPod(ns, 'hog-always'))}`);
    });
    const status = p.status!.containerStatuses![0]!;
    expect(status.lastState?.terminated, containerState(p)).toMatchObject({ reason: 'OOMKilled', exitCode: 137 });
    expect(p.status?.phase).toBe('Running');
  });

  it('deleting the pods removes their cgroups', async () => {
    for (const name of ['hog-never', 'hog-always']) await core().deleteNamespacedPod({ name, namespace: ns, gracePeriodSeconds: 0 });
    await waitFor(async () => uids.every((uid) => podCgroups(uid).length === 0), 'no cgroup left for the deleted pods', 30_000, 200).catch((err: Error) => {
      throw new Error(`${err.message}\nleft: ${uids.flatMap((uid) => podCgroups(uid)).join(', ')}`);
    });
  });
});
