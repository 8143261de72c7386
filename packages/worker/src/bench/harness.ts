// Worker bench: a healthy run of every check against loopback stand-ins (HTTPS API server, DNS
// servers), started as its own process like a pod would start it. Reports wall time (process spawn
// to exit, which includes Node start-up and module loading) and peak RSS over several runs.
//   node packages/worker/src/bench/run.mjs [--runs N]
import { spawn } from 'node:child_process';
import { mkdtempSync, readFileSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { performance } from 'node:perf_hooks';
import { formatHostPort } from '../config.js';
import { startDnsServer, zone } from '../testing/dns-server.js';
import { aService, aSlice } from '../testing/fake-api.js';
import { startTestCluster } from '../testing/harness.js';

const [entry, runsText, nodeFlagsText] = process.argv.slice(2);
// Node.js flags for the worker process (run.mjs --node-flags), split on spaces.
const nodeFlags = (nodeFlagsText ?? '').split(' ').filter(Boolean);
if (!entry) throw new Error('usage: harness ENTRY [RUNS] [NODE_FLAGS]');
const runs = Number(runsText ?? 10);

const cluster = await startTestCluster();
const { state, port } = cluster.api;
state.services.set('default/kubernetes', aService('default', 'kubernetes', { clusterIP: '127.0.0.1', port }));
state.slices.set('default/kubernetes', [aSlice('kubernetes', [{ address: '127.0.0.1', ready: true }], { name: 'https', port })]);
state.services.set('kube-system/kube-dns', aService('kube-system', 'kube-dns', { clusterIP: '10.96.0.10', port: 53, portName: 'dns', protocol: 'UDP' }));
const records = { 'kubernetes.default.svc.cluster.local': ['127.0.0.1'], 'kube-dns.kube-system.svc.cluster.local': ['10.96.0.10'] };
const clusterDns = await startDnsServer(zone(records));
const dnsPod = await startDnsServer(zone(records), { host: '127.0.0.2', tcp: false });
state.slices.set('kube-system/kube-dns', [aSlice('kube-dns', [{ address: '127.0.0.2', ready: true }], { name: 'dns', port: dnsPod.server.port, protocol: 'UDP' })]);
const dir = mkdtempSync(join(tmpdir(), 'knr-bench-'));

interface Sample {
  wallMs: number;
  uptimeMs: number;
  maxRssKiB: number;
  checksMs: number;
}

async function once(i: number): Promise<Sample> {
  const terminationLog = join(dir, `termination-${i}`);
  const args = [entry as string, '--dns-server', formatHostPort(clusterDns.server), '--termination-log', terminationLog, '--log-level', 'warn', '--timeout', '10s'];
  const started = performance.now();
  const child = spawn(process.execPath, [...nodeFlags, ...args], { env: { ...cluster.env, NODE_NAME: 'bench-node' }, stdio: ['ignore', 'ignore', 'pipe'] });
  let stderr = '';
  child.stderr.on('data', (c: Buffer) => (stderr += c.toString()));
  const killer = setTimeout(() => child.kill('SIGKILL'), 15_000);
  const code = await new Promise<number | null>((resolve) => child.on('exit', (c) => resolve(c)));
  clearTimeout(killer);
  const wallMs = performance.now() - started;
  if (code !== 0) throw new Error(`run ${i}: exit code ${code}\n${stderr}\n${readFileSync(terminationLog, 'utf8')}`);
  const line = stderr.split('\n').find((l) => l.includes('"bench"'));
  if (!line) throw new Error(`run ${i}: no bench line\n${stderr}`);
  const { bench } = JSON.parse(line) as { bench: { maxRssKiB: number; uptimeMs: number } };
  const summary = JSON.parse(readFileSync(terminationLog, 'utf8')) as { durationMs: number };
  return { wallMs, uptimeMs: bench.uptimeMs, maxRssKiB: bench.maxRssKiB, checksMs: summary.durationMs };
}

try {
  const samples: Sample[] = [];
  for (let i = 0; i < runs; i++) samples.push(await once(i));
  const median = (values: number[]) => {
    const sorted = [...values].sort((a, b) => a - b);
    return sorted[Math.floor(sorted.length / 2)] as number;
  };
  const result = {
    runs,
    nodeFlags,
    wallMsMedian: Math.round(median(samples.map((s) => s.wallMs))),
    wallMsMax: Math.round(Math.max(...samples.map((s) => s.wallMs))),
    checksMsMedian: median(samples.map((s) => s.checksMs)),
    peakRssMiBMax: +(Math.max(...samples.map((s) => s.maxRssKiB)) / 1024).toFixed(1),
  };
  console.log(JSON.stringify({ workerBench: result }));
} finally {
  await Promise.all([clusterDns.close(), dnsPod.close(), cluster.close()]);
  rmSync(dir, { recursive: true, force: true });
}
