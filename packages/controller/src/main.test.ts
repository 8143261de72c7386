import { mkdtempSync, writeFileSync } from 'node:fs';
import { createServer, type AddressInfo } from 'node:net';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { describe, expect, it } from 'vitest';
import { runController } from './main.js';

function capture() {
  const err: string[] = [];
  const out: string[] = [];
  return { io: { stderr: (l: string) => err.push(l), stdout: (l: string) => out.push(l), signal: new AbortController().signal }, err, out };
}

function file(name: string, text: string): string {
  const dir = mkdtempSync(join(tmpdir(), 'knr-main-'));
  const path = join(dir, name);
  writeFileSync(path, text);
  return path;
}

/** A kubeconfig pointing at a loopback port nothing listens on. */
async function unreachable(): Promise<{ kubeconfig: string; server: string }> {
  const probe = createServer();
  await new Promise<void>((resolve) => probe.listen(0, '127.0.0.1', resolve));
  const { port } = probe.address() as AddressInfo;
  await new Promise((resolve) => probe.close(resolve));
  const server = `https://127.0.0.1:${port}`;
  const kubeconfig = file(
    'kubeconfig',
    `apiVersion: v1
kind: Config
clusters: [{ name: c, cluster: { server: "${server}" } }]
users: [{ name: u, user: { token: t } }]
contexts: [{ name: x, context: { cluster: c, user: u } }]
current-context: x
`,
  );
  return { kubeconfig, server };
}

describe('runController', () => {
  it('prints usage for --help and exits 0', async () => {
    const { io, out } = capture();
    expect(await runController(['--help'], {}, io)).toBe(0);
    expect(out.join('\n')).toContain('Usage: kube-node-ready controller');
  });

  it('exits 2 naming the field for an invalid config file, without a stack trace', async () => {
    const { io, err } = capture();
    const config = file('config.yaml', 'reconciliation:\n  maxRetries: abc\nworker:\n  bogus: 1\n');
    expect(await runController(['--config', config], {}, io)).toBe(2);
    const text = err.join('\n');
    expect(text).toMatch(/^error: invalid .*config\.yaml:/);
    expect(text).toContain('reconciliation.maxRetries: expected an integer between 0 and 1000, got "abc"');
    expect(text).toContain('worker.bogus: unknown key');
    expect(text).not.toMatch(/\n\s+at /);
  });

  it('exits 2 for an unknown flag or a bad flag value', async () => {
    const a = capture();
    expect(await runController(['--frobnicate'], {}, a.io)).toBe(2);
    expect(a.err[0]).toMatch(/^error: .*--frobnicate.*\(see --help\)$/);
    const b = capture();
    expect(await runController(['--log-level', 'loud'], {}, b.io)).toBe(2);
    expect(b.err[0]).toContain('logging.level: expected one of');
  });

  it('exits 2 for a missing config file', async () => {
    const { io, err } = capture();
    expect(await runController(['--config', '/nonexistent.yaml'], {}, io)).toBe(2);
    expect(err[0]).toMatch(/^error: cannot read config file \/nonexistent.yaml/);
  });

  it('exits 3 naming the server when the API server is unreachable at start-up', async () => {
    const { io, err } = capture();
    const { kubeconfig, server } = await unreachable();
    const code = await runController(['--kubeconfig', kubeconfig, '--log-level', 'silent'], {}, io);
    expect(code).toBe(3);
    expect(err[0]).toBe(`error: cannot reach the Kubernetes API server at ${server}: fetch failed: connect ECONNREFUSED ${server.slice('https://'.length)}`);
  }, 20_000);
});
