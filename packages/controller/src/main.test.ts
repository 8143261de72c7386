import { mkdtempSync, writeFileSync } from 'node:fs';
import { createServer, type AddressInfo, type Socket } from 'node:net';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { VERSION } from '@kube-node-ready/core';
import { describe, expect, it } from 'vitest';
import { parseFlags, runController } from './main.js';

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

describe('runController --check-config', () => {
  it('exits 0 for a valid config file and prints the OK line and the effective settings', async () => {
    const { io, out, err } = capture();
    const config = file(
      'config.yaml',
      `worker:
  namespace: knr-system
  image: { repository: registry.example/knr, tag: "1.2.3" }
reconciliation:
  maxConcurrentVerifications: 7
nodeManagement:
  taints: [{ key: example.com/unverified, effect: NoExecute }, { key: node-ready/unverified, value: "true", effect: NoSchedule }]
  verifiedLabel: { key: example.com/verified, value: "yes" }
  deleteFailedNodes: true
  remediation: { dryRun: true }
`,
    );
    expect(await runController(['--config', config, '--check-config'], {}, io)).toBe(0);
    expect(err).toEqual([]);
    expect(out).toEqual([
      `configuration OK: ${config}`,
      '  verification taints:          example.com/unverified:NoExecute, node-ready/unverified=true:NoSchedule',
      '  verified label:               example.com/verified=yes',
      '  node selector:                (all nodes)',
      '  worker namespace:             knr-system',
      '  worker image:                 registry.example/knr:1.2.3',
      '  max concurrent verifications: 7',
      '  dryRun:                       false',
      '  remediation:                  enabled, dryRun: true',
    ]);
  });

  it('checks the defaults with the flags applied when there is no config file', async () => {
    const { io, out } = capture();
    expect(await runController(['--check-config', '--dry-run'], {}, io)).toBe(0);
    expect(out[0]).toBe('configuration OK: defaults');
    expect(out).toContain('  verification taints:          node-ready/unverified=true:NoSchedule');
    expect(out).toContain(`  worker image:                 ghcr.io/kube-node-ready/kube-node-ready:${VERSION}`);
    expect(out).toContain('  dryRun:                       true');
    expect(out).toContain('  remediation:                  disabled (nodeManagement.deleteFailedNodes: false)');
  });

  it('shows remediation in dry run when the controller-wide --dry-run implies it', async () => {
    const { io, out } = capture();
    const config = file('config.yaml', 'nodeManagement:\n  deleteFailedNodes: true\n');
    expect(await runController(['--config', config, '--check-config', '--dry-run'], {}, io)).toBe(0);
    expect(out).toContain('  remediation:                  enabled, dryRun: true (implied by dryRun)');
  });

  it('exits 2 naming the field for an invalid config file, and prints no OK line', async () => {
    const { io, out, err } = capture();
    const config = file('config.yaml', 'reconciliation:\n  maxConcurrentVerifications: 0\n');
    expect(await runController(['--config', config, '--check-config'], {}, io)).toBe(2);
    expect(err.join('\n')).toMatch(/^error: invalid .*config\.yaml: reconciliation\.maxConcurrentVerifications: /);
    expect(out).toEqual([]);
  });

  it('does not load the kubeconfig: a missing one fails a start, not the check', async () => {
    const start = capture();
    expect(await runController(['--kubeconfig', '/nonexistent/kubeconfig'], {}, start.io)).toBe(2);
    expect(start.err[0]).toMatch(/^error: cannot load the kubeconfig: /);
    const check = capture();
    expect(await runController(['--kubeconfig', '/nonexistent/kubeconfig', '--check-config'], { KUBECONFIG: '/nonexistent/kubeconfig' }, check.io)).toBe(0);
    expect(check.err).toEqual([]);
    expect(check.out[0]).toBe('configuration OK: defaults');
  });

  it('does not connect to the API server the kubeconfig names', async () => {
    // A listener that counts connections and drops them, so a start fails fast (exit 3).
    const sockets: Socket[] = [];
    const server = createServer((socket) => {
      sockets.push(socket);
      socket.destroy();
    });
    await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
    try {
      const { port } = server.address() as AddressInfo;
      const kubeconfig = file(
        'kubeconfig',
        `apiVersion: v1
kind: Config
clusters: [{ name: c, cluster: { server: "https://127.0.0.1:${port}" } }]
users: [{ name: u, user: { token: t } }]
contexts: [{ name: x, context: { cluster: c, user: u } }]
current-context: x
`,
      );
      const check = capture();
      expect(await runController(['--kubeconfig', kubeconfig, '--check-config'], {}, check.io)).toBe(0);
      expect(sockets).toHaveLength(0);
      // The same command line without --check-config does connect.
      const start = capture();
      expect(await runController(['--kubeconfig', kubeconfig, '--log-level', 'silent'], {}, start.io)).toBe(3);
      expect(sockets.length).toBeGreaterThan(0);
    } finally {
      await new Promise((resolve) => server.close(resolve));
    }
  }, 20_000);

  it('is a controller flag: the agent rejects it', () => {
    expect(parseFlags(['--check-config']).checkConfig).toBe(true);
    expect(() => parseFlags(['--check-config'], 'agent')).toThrow('--check-config is a controller flag');
  });
});
