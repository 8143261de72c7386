// The image copies dist/image/ and nothing else: prove that directory runs on its own, outside the
// repository (no node_modules anywhere above it), as the controller and as a worker.
import { execFile, execFileSync } from 'node:child_process';
import { cpSync, existsSync, mkdtempSync, readFileSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { promisify } from 'node:util';
import dns2 from 'dns2';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { parseSummary } from '@kube-node-ready/core';
import { repoRoot } from '@kube-node-ready/sandbox';

const exec = promisify(execFile);
const root = repoRoot();
const app = mkdtempSync(join(tmpdir(), 'knr-image-'));
let server: ReturnType<typeof dns2.createUDPServer>;
let port = 0;

beforeAll(async () => {
  // `make test` bundles before the tests; a lone `vitest run` bundles here.
  if (!existsSync(join(root, 'dist', 'kube-node-ready.mjs'))) execFileSync(process.execPath, [join(root, 'scripts', 'bundle.mjs'), '--quiet'], { stdio: 'inherit' });
  execFileSync(process.execPath, [join(root, 'scripts', 'dist.mjs')], { stdio: 'ignore' });
  cpSync(join(root, 'dist', 'image'), app, { recursive: true });
  server = dns2.createUDPServer((req, send) => {
    const res = dns2.Packet.createResponseFromRequest(req);
    const q = req.questions[0]!;
    res.answers.push({ name: q.name, type: dns2.Packet.TYPE.A, class: dns2.Packet.CLASS.IN, ttl: 5, address: '10.96.0.1' } as dns2.Packet.Resource);
    void send(res);
  });
  await server.listen(0, '127.0.0.1');
  port = server.address().port;
}, 60_000);
afterAll(() => {
  server?.close();
  rmSync(app, { recursive: true, force: true });
});

const run = (args: string[]) =>
  exec(process.execPath, [join(app, 'kube-node-ready.mjs'), ...args], { cwd: app, env: { PATH: '/usr/bin:/bin' } }).then(
    (r) => ({ code: 0, ...r }),
    (e: { code: number; stdout: string; stderr: string }) => ({ code: e.code, stdout: e.stdout, stderr: e.stderr }),
  );

describe('dist/image runs on its own', () => {
  it('prints its version and commit, and the controller its usage', async () => {
    const version = await run(['--version']);
    expect(version.code).toBe(0);
    expect(version.stdout).toMatch(/^kube-node-ready \d+\.\d+\.\d+\S* \(commit ([0-9a-f]{7,}|unknown), node v24\./);
    const help = await run(['controller', '--help']);
    expect(help.code).toBe(0);
    expect(help.stdout).toMatch(/--config/);
  }, 30_000); // two process starts; on a busy 2-core machine each can take seconds

  it('runs a worker DNS check against a real DNS server and writes its summary', async () => {
    const termination = join(app, 'termination-log');
    const r = await run(['worker', '--checks', 'dns', '--dns-server', `127.0.0.1:${port}`, '--dns-names', 'kubernetes.default.svc.cluster.local', '--termination-log', termination]);
    expect(r.code).toBe(0);
    const parsed = parseSummary(readFileSync(termination, 'utf8'));
    expect(parsed.ok).toBe(true);
    if (parsed.ok) expect(parsed.summary.checks.map((c) => [c.name, c.ok])).toEqual([['dns', true]]);
  });

  it('has nothing to resolve outside the directory', async () => {
    const r = await run(['worker', '--checks', 'nope']);
    expect(r.code).toBe(2);
    expect(r.stderr + r.stdout).not.toMatch(/Cannot find (module|package)/);
  });
});
