import { createServer, type Server } from 'node:http';
import type { Logger } from '@kube-node-ready/core';

/**
 * The port of every simulated node's CNI health endpoint, as Calico's Felix serves its readiness on
 * each node (`http://localhost:9099/readiness`, what node-readiness-controller's cni-readiness
 * example reporter checks).
 */
export const CNI_HEALTH_PORT = 9099;

/** What the endpoint needs of the kubelet: which node an address is, and whether its CNI is ready. */
export interface CniHealthSource {
  /** The simulated node whose InternalIP `address` is, if any. */
  nodeByIp(address: string): string | undefined;
  /** Whether the node's CNI is ready now (bring-up knob cni-delay past), undefined for an unknown node. */
  cniReady(node: string): boolean | undefined;
}

/**
 * `GET /readiness` on port 9099 of every node address (one listener in the sandbox namespace; the
 * node is the address the request came to): 200 once the node's CNI is ready, 503 before, 404 at an
 * address that is no node's. A hostNetwork pod reaches its own node's at `$(HOST_IP):9099`.
 */
export async function startCniHealthServer(source: CniHealthSource, log: Logger): Promise<Server> {
  const server = createServer((req, res) => {
    const address = (req.socket.localAddress ?? '').replace(/^::ffff:/, '');
    const node = source.nodeByIp(address);
    const ready = node === undefined ? undefined : source.cniReady(node);
    const reply = (status: number, text: string) => {
      res.writeHead(status, { 'content-type': 'text/plain' });
      res.end(`${text}\n`);
    };
    if (req.url !== '/readiness' && req.url !== '/liveness') return reply(404, `not found: ${req.url}`);
    if (ready === undefined) return reply(404, `no simulated node has the address ${address}`);
    return ready ? reply(200, `${node}: CNI ready`) : reply(503, `${node}: CNI not ready`);
  });
  server.keepAliveTimeout = 1000;
  await new Promise<void>((resolve, reject) => {
    server.once('error', reject);
    server.listen(CNI_HEALTH_PORT, '0.0.0.0', () => {
      server.off('error', reject);
      resolve();
    });
  });
  server.on('error', (err) => log.warn({ err: String(err) }, 'CNI health endpoint error'));
  return server;
}
