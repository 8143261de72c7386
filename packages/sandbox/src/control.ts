import { createServer, request, type Server } from 'node:http';
import { rmSync } from 'node:fs';
import { join } from 'node:path';

/**
 * Fault injection from tests: the daemon answers on a unix socket in the sandbox directory
 * (`control.sock`; no network involved). Actions:
 *   POST /restart/<etcd|kube-apiserver|kube-scheduler>   restart with the same flags, wait until healthy
 *   POST /stop/<component>, POST /start/<component>      take the component down / bring it back
 *   POST /compact                                        compact etcd at its current revision (watches get 410 Gone)
 *   GET  /stats                                          counters (processes, DNS queries)
 */
export type ControlHandler = (method: string, path: string) => Promise<unknown>;

export function startControlServer(dir: string, handler: ControlHandler): Server {
  const socket = join(dir, 'control.sock');
  rmSync(socket, { force: true });
  const server = createServer((req, res) => {
    handler(req.method ?? 'GET', req.url ?? '/').then(
      (body) => {
        res.writeHead(200, { 'content-type': 'application/json' });
        res.end(JSON.stringify(body ?? {}));
      },
      (err: unknown) => {
        res.writeHead(err instanceof NotFound ? 404 : 500, { 'content-type': 'application/json' });
        res.end(JSON.stringify({ error: err instanceof Error ? err.message : String(err) }));
      },
    );
  });
  server.listen(socket);
  return server;
}

export class NotFound extends Error {}

/** Calls the daemon's control socket; throws with the daemon's error message on failure. */
export function sandboxControl(dir: string, method: 'GET' | 'POST', path: string, timeoutMs = 120_000): Promise<unknown> {
  return new Promise((resolve, reject) => {
    const req = request({ socketPath: join(dir, 'control.sock'), method, path, timeout: timeoutMs }, (res) => {
      let body = '';
      res.on('data', (d: Buffer) => (body += d.toString()));
      res.on('end', () => {
        const parsed = body ? (JSON.parse(body) as { error?: string }) : {};
        if (res.statusCode === 200) resolve(parsed);
        else reject(new Error(`sandbox control ${method} ${path}: ${parsed.error ?? res.statusCode}`));
      });
    });
    req.on('timeout', () => req.destroy(new Error(`sandbox control ${method} ${path}: timed out`)));
    req.on('error', reject);
    req.end();
  });
}
