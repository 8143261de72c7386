// A real OCI registry on loopback for tests: the CNCF Distribution registry (`registry`, built from
// the Go module proxy by packages/sandbox/go/build.sh), storing on disk in a directory of its own.
import { spawn, type ChildProcess } from 'node:child_process';
import { mkdirSync, rmSync, writeFileSync } from 'node:fs';
import { createServer } from 'node:net';
import { join } from 'node:path';

export interface Registry {
  /** host:port, for image references (127.0.0.1:PORT/repo:tag). */
  address: string;
  stop(): Promise<void>;
}

/** A free TCP port on 127.0.0.1 (the kernel's pick, released before returning). */
export async function freeLoopbackPort(): Promise<number> {
  return new Promise((resolve, reject) => {
    const s = createServer();
    s.once('error', reject);
    s.listen(0, '127.0.0.1', () => {
      const { port } = s.address() as { port: number };
      s.close(() => resolve(port));
    });
  });
}

/**
 * Starts `registryBin` with its storage in `dir`, on `address` (default: a free loopback port);
 * resolves once /v2/ answers.
 */
export async function startRegistry(registryBin: string, dir: string, address?: string): Promise<Registry> {
  rmSync(dir, { recursive: true, force: true });
  mkdirSync(join(dir, 'data'), { recursive: true });
  address ??= `127.0.0.1:${await freeLoopbackPort()}`;
  // Its debug server and metrics stay off; nothing listens beyond this one address.
  writeFileSync(
    join(dir, 'config.yml'),
    [
      'version: 0.1',
      'log: { level: warn, formatter: text }',
      `storage: { filesystem: { rootdirectory: ${join(dir, 'data')} }, delete: { enabled: true } }`,
      `http: { addr: "${address}" }`,
      '',
    ].join('\n'),
  );
  const proc: ChildProcess = spawn(registryBin, ['serve', join(dir, 'config.yml')], { stdio: ['ignore', 'ignore', 'pipe'], env: { PATH: process.env.PATH ?? '/usr/bin:/bin', OTEL_TRACES_EXPORTER: 'none' } });
  let log = '';
  proc.stderr!.on('data', (b: Buffer) => {
    log = (log + b.toString()).slice(-20_000);
  });
  const deadline = Date.now() + 30_000;
  for (;;) {
    const ok = await fetch(`http://${address}/v2/`).then((r) => r.ok, () => false);
    if (ok) break;
    if (proc.exitCode !== null || Date.now() > deadline) {
      proc.kill('SIGKILL');
      throw new Error(`the registry did not start on ${address}: ${log.split('\n').slice(-10).join('\n')}`);
    }
    await new Promise((r) => setTimeout(r, 100));
  }
  return {
    address,
    stop: () =>
      new Promise<void>((resolve) => {
        if (proc.exitCode !== null) return resolve();
        proc.once('exit', () => resolve());
        proc.kill('SIGTERM');
      }).then(() => rmSync(dir, { recursive: true, force: true })),
  };
}
