import Fastify, { type FastifyInstance, type FastifyReply } from 'fastify';
import type { Registry } from 'prom-client';

/**
 * The controller's HTTP surface. buildServer() only builds; the composition root listens.
 *   GET /metrics  Prometheus text format from the injected registry
 *   GET /healthz  liveness: the process works (its loops are not stuck); 500 otherwise
 *   GET /readyz   readiness: caches synced (followers too, so a rollout can proceed); 503 otherwise
 */
export interface Probe {
  ok: boolean;
  /** Why not, for the response body and logs. */
  reason?: string;
}

export interface ServerDeps {
  registry: Registry;
  liveness: () => Probe;
  readiness: () => Probe;
  /** Which routes this instance serves (health can get its own address). Default: all. */
  serve?: { metrics?: boolean; health?: boolean };
}

export function buildServer(deps: ServerDeps): FastifyInstance {
  // No logger, so no request logs (fastify 5.12 deprecates disableRequestLogging, which warned on every start).
  const server = Fastify({ logger: false, forceCloseConnections: true });
  const serve = { metrics: true, health: true, ...deps.serve };

  if (serve.metrics) {
    server.get('/metrics', async (_request, reply) => {
      const body = await deps.registry.metrics();
      return reply.type(deps.registry.contentType).send(body);
    });
  }

  if (serve.health) {
    server.get('/healthz', async (_request, reply) => probe(reply, deps.liveness(), 500));
    server.get('/readyz', async (_request, reply) => probe(reply, deps.readiness(), 503));
  }

  return server;
}

function probe(reply: FastifyReply, result: Probe, failureCode: number): FastifyReply {
  return reply
    .code(result.ok ? 200 : failureCode)
    .type('text/plain; charset=utf-8')
    .send(result.ok ? 'ok\n' : `not ok: ${result.reason ?? 'unknown'}\n`);
}

/** "0.0.0.0:8080" / ":8080" / "[::1]:8080" -> listen options. */
export function parseBindAddress(address: string): { host: string; port: number } {
  const m = /^(.*):(\d+)$/.exec(address);
  if (!m) throw new Error(`invalid bind address ${JSON.stringify(address)}`);
  const host = (m[1] ?? '').replace(/^\[(.*)\]$/, '$1') || '0.0.0.0';
  return { host, port: Number(m[2]) };
}
