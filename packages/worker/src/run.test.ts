import { existsSync, mkdtempSync, readFileSync, rmSync } from 'node:fs';
import http from 'node:http';
import type { AddressInfo } from 'node:net';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { Writable } from 'node:stream';
import { ExitCode, parseSummary, silentLogger, type WorkerSummary } from '@kube-node-ready/core';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { formatHostPort } from './config.js';
import { runWorker } from './index.js';
import { CHECKS, runChecks } from './run.js';
import { closedPort, startBlackhole } from './testing/blackhole.js';
import { startDnsServer, zone, type TestDnsServer } from './testing/dns-server.js';
import { aService, aSlice } from './testing/fake-api.js';
import { configOf, startTestCluster, type TestCluster } from './testing/harness.js';

const dir = mkdtempSync(join(tmpdir(), 'knr-run-'));
afterAll(() => rmSync(dir, { recursive: true, force: true }));
let runs = 0;

interface Run {
  code: number;
  stdout: string;
  stderr: string;
  logs: Array<Record<string, unknown>>;
  summary: WorkerSummary | undefined;
  terminationLog: string;
}

async function worker(argv: string[], env: NodeJS.ProcessEnv): Promise<Run> {
  const terminationLog = join(dir, `termination-${runs++}`);
  let stdout = '';
  let stderr = '';
  let logText = '';
  const logDestination = new Writable({
    write(chunk: Buffer, _enc, cb) {
      logText += chunk.toString();
      cb();
    },
  });
  const code = await runWorker(['--termination-log', terminationLog, ...argv], env, {
    stdout: (t) => void (stdout += t),
    stderr: (t) => void (stderr += t),
    logDestination,
  });
  const parsed = existsSync(terminationLog) ? parseSummary(readFileSync(terminationLog, 'utf8')) : undefined;
  return {
    code,
    stdout,
    stderr,
    logs: logText.split('\n').filter(Boolean).map((l) => JSON.parse(l) as Record<string, unknown>),
    summary: parsed?.ok ? parsed.summary : undefined,
    terminationLog,
  };
}

describe('runWorker end to end (fake API server and DNS servers on loopback)', () => {
  let cluster: TestCluster;
  let clusterDns: TestDnsServer;
  let dnsPod: TestDnsServer;
  let args: string[];

  beforeAll(async () => {
    cluster = await startTestCluster();
    const { state, port } = cluster.api;
    // The kubernetes Service "ClusterIP" and its endpoint are the fake API server itself.
    state.services.set('default/kubernetes', aService('default', 'kubernetes', { clusterIP: '127.0.0.1', port }));
    state.slices.set('default/kubernetes', [aSlice('kubernetes', [{ address: '127.0.0.1', ready: true }], { name: 'https', port })]);
    const records = { 'kubernetes.default.svc.cluster.local': ['127.0.0.1'], 'kube-dns.kube-system.svc.cluster.local': ['10.96.0.10'] };
    clusterDns = await startDnsServer(zone(records));
    dnsPod = await startDnsServer(zone(records), { host: '127.0.0.2', tcp: false });
    state.services.set('kube-system/kube-dns', aService('kube-system', 'kube-dns', { clusterIP: '10.96.0.10', port: 53, portName: 'dns', protocol: 'UDP' }));
    state.slices.set('kube-system/kube-dns', [
      aSlice('kube-dns', [{ address: '127.0.0.2', ready: true, nodeName: 'node-b' }], { name: 'dns', port: dnsPod.server.port, protocol: 'UDP' }),
    ]);
    // --mtu: the machine's own default-route interface is not the pod's. Deadlines a loaded machine
    // keeps for answers on loopback (it may run the sandbox suite beside these tests).
    args = ['--dns-server', formatHostPort(clusterDns.server), '--check-timeout', '5s', '--timeout', '15s', '--mtu', '1500'];
  });
  afterAll(async () => {
    await Promise.all([clusterDns.close(), dnsPod.close(), cluster.close()]);
  });

  it('passes every check: exit 0, one log line per check plus a summary line, termination message written', async () => {
    const run = await worker(args, cluster.env);
    expect(run.stderr).toBe('');
    expect(run.summary?.checks.filter((c) => !c.ok)).toEqual([]);
    expect(run.code).toBe(ExitCode.OK);
    expect(run.summary).toMatchObject({ v: 1, ok: true, node: 'node-a', durationMs: expect.any(Number) });
    expect(run.summary?.checks.map((c) => c.name)).toEqual(['dns', 'api', 'tcp', 'service', 'podnet', 'mtu', 'egress', 'http']);
    expect(run.summary?.warnings).toBeUndefined();

    const checkLines = run.logs.filter((l) => typeof l.check === 'string');
    // Checks run concurrently: lines come in completion order.
    expect(checkLines.map((l) => `${String(l.check)} ${String(l.ok)} ${String(l.msg)}`).sort()).toEqual([
      'api true check api passed',
      'dns true check dns passed',
      'egress true check egress passed',
      'http true check http passed',
      'mtu true check mtu passed',
      'podnet true check podnet passed',
      'service true check service passed',
      'tcp true check tcp passed',
    ]);
    expect(checkLines.every((l) => l.component === 'worker' && l.node === 'node-a' && l.level === 'info')).toBe(true);
    const summaries = run.logs.filter((l) => l.msg === 'verification passed');
    expect(summaries).toHaveLength(1);
    expect(run.logs).toHaveLength(9);
  });

  it('a failing check: exit 1 and the summary names the check and its error', async () => {
    const dead = await closedPort();
    const run = await worker([...args, '--tcp-targets', formatHostPort(dead)], cluster.env);
    expect(run.code).toBe(ExitCode.CHECK_FAILED);
    expect(run.summary?.ok).toBe(false);
    expect(run.summary?.checks.filter((c) => !c.ok)).toEqual([
      { name: 'tcp', ok: false, durationMs: expect.any(Number), error: `target ${formatHostPort(dead)}: connection refused`, target: formatHostPort(dead) },
    ]);
    expect(run.logs.find((l) => l.check === 'tcp')).toMatchObject({ level: 'error', ok: false });
    expect(run.logs.at(-1)).toMatchObject({ msg: 'verification failed', failed: ['tcp'], exitCode: 1 });
  });

  it('the API answering 503: the summary carries httpStatus on the checks that read it (the controller blames the API, not the node)', async () => {
    cluster.api.state.failing.set('/api/v1/namespaces/default/services/kubernetes', 503);
    try {
      const run = await worker([...args, '--checks', 'api,service'], cluster.env);
      expect(run.code).toBe(ExitCode.CHECK_FAILED);
      const failed = run.summary?.checks.filter((c) => !c.ok).map((c) => ({ name: c.name, httpStatus: c.httpStatus }));
      expect(failed).toEqual([
        { name: 'api', httpStatus: 503 },
        { name: 'service', httpStatus: 503 },
      ]);
    } finally {
      cluster.api.state.failing.clear();
    }
  });

  it('the overall deadline bounds the run even when the check timeout is longer', async () => {
    const hole = await startBlackhole();
    try {
      const started = Date.now();
      const run = await worker(['--checks', 'tcp', '--tcp-targets', formatHostPort(hole.target), '--check-timeout', '10s', '--timeout', '400ms'], cluster.env);
      expect(Date.now() - started).toBeLessThan(2000);
      expect(run.code).toBe(ExitCode.CHECK_FAILED);
      expect(run.summary?.checks[0]?.error).toBe(`target ${formatHostPort(hole.target)}: timeout: no connection within 400ms (overall --timeout)`);
    } finally {
      hole.close();
    }
  });

  it('leaves no socket or timer behind', async () => {
    const settle = () => new Promise((r) => setTimeout(r, 150));
    const count = () => {
      const counts: Record<string, number> = {};
      for (const r of process.getActiveResourcesInfo()) counts[r] = (counts[r] ?? 0) + 1;
      return counts;
    };
    await settle();
    // An HTTP target whose body never ends: the http check closes the connection after the headers.
    const endless = http.createServer((_req, res) => {
      res.writeHead(200);
      const pump = () => {
        while (!res.destroyed && res.write(Buffer.alloc(16 * 1024)));
        if (!res.destroyed) res.once('drain', pump);
      };
      pump();
    });
    await new Promise<void>((resolve) => endless.listen(0, '127.0.0.1', resolve));
    const endlessPort = (endless.address() as AddressInfo).port;
    await settle();
    const before = count();
    const run = await worker([...args, '--tcp-targets', `127.0.0.1:${cluster.api.port}`, '--http-urls', `http://127.0.0.1:${endlessPort}/`], cluster.env);
    expect(run.code, JSON.stringify(run.summary?.checks.filter((c) => !c.ok))).toBe(ExitCode.OK);
    await new Promise((resolve) => endless.close(resolve));
    await settle();
    // Nothing new: a resource of another test that ended meanwhile (a child process) is not the
    // worker's.
    const after = count();
    const added = Object.entries(after).filter(([kind, n]) => n > (before[kind] ?? 0));
    expect(added, `before ${JSON.stringify(before)}, after ${JSON.stringify(after)}`).toEqual([]);
  });

  it('reads nothing from the API when only checks that do not need it run (dns, egress, http)', async () => {
    const run = await worker(['--checks', 'dns,egress,http', '--log-level', 'debug', ...args], cluster.env);
    expect(run.code).toBe(ExitCode.OK);
    expect(run.logs.find((l) => l.msg === 'starting checks')).toMatchObject({ usesApi: false });
    const withApi = await worker(['--checks', 'http,tcp', '--log-level', 'debug', ...args], cluster.env);
    expect(withApi.logs.find((l) => l.msg === 'starting checks')).toMatchObject({ usesApi: true });
  });

  it('does not create the default /dev/termination-log outside a pod', async () => {
    if (existsSync('/dev/termination-log')) return; // running inside a pod: nothing to prove here
    const code = await runWorker(['--checks', 'dns', ...args], {}, { logDestination: new Writable({ write: (_c, _e, cb) => cb() }) });
    expect(code).toBe(ExitCode.OK);
    expect(existsSync('/dev/termination-log')).toBe(false);
  });
});

describe('runWorker exit codes', () => {
  it.each([
    [['--bogus'], '--bogus: unknown flag'],
    [['--check-timeout', 'soon'], '--check-timeout: expected a duration greater than 0'],
    [['--checks', 'dns,ping'], '--checks: expected one of dns, api, tcp, service, podnet, mtu, egress, http, got "ping"'],
  ])('configuration error %j: exit 2, message on stderr naming the field, summary with the error', async (argv, message) => {
    const run = await worker(argv, {});
    expect(run.code).toBe(ExitCode.CONFIG_ERROR);
    expect(run.stderr).toContain(`error: ${message}`);
    expect(run.stdout).toBe('');
    expect(run.summary).toMatchObject({ ok: false, checks: [], error: expect.stringContaining(`configuration error: ${message}`) });
  });

  it('--help and --version: exit 0 on stdout', async () => {
    const help = await worker(['--help'], {});
    expect(help.code).toBe(ExitCode.OK);
    expect(help.stdout).toContain('Usage: kube-node-ready worker');
    for (const flag of ['--checks', '--dns-server', '--dns-names', '--external-dns-names', '--tcp-targets', '--check-timeout', '--timeout', '--termination-log', '--log-format', '--log-level', '--cluster-domain', '--service', '--dns-service', '--podnet-mode']) {
      expect(help.stdout).toContain(flag);
    }
    const version = await worker(['--version'], {});
    expect(version.stdout).toMatch(/^kube-node-ready \S+ \(commit \S+, node v\d+/);
  });

  it('a check that throws is an internal error: exit 3, the other checks still report', async () => {
    const dns = await startDnsServer(zone({ 'kubernetes.default.svc.cluster.local': ['10.96.0.1'] }));
    try {
      const config = configOf(['--checks', 'dns,api', '--dns-server', formatHostPort(dns.server)], {});
      const registry = { ...CHECKS, api: () => Promise.reject(new Error('boom')) };
      const { exitCode, summary } = await runChecks(config, silentLogger(), registry);
      expect(exitCode).toBe(ExitCode.INTERNAL_ERROR);
      expect(summary.checks).toEqual([
        { name: 'dns', ok: true, durationMs: expect.any(Number) },
        { name: 'api', ok: false, durationMs: expect.any(Number), error: 'internal error: boom' },
      ]);
    } finally {
      await dns.close();
    }
  });

  it('a check that ignores its deadline is cut off with a timeout after a short grace', async () => {
    const config = configOf(['--checks', 'api', '--check-timeout', '200ms'], {});
    const registry = { ...CHECKS, api: () => new Promise<never>(() => {}) };
    const started = Date.now();
    const { exitCode, summary } = await runChecks(config, silentLogger(), registry);
    expect(Date.now() - started).toBeLessThan(1000);
    expect(exitCode).toBe(ExitCode.CHECK_FAILED);
    expect(summary.checks[0]?.error).toBe('timeout: the check did not finish within 200ms (api check timeout)');
  });
});
