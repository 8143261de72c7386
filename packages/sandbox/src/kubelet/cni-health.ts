import { spawn, type ChildProcess } from 'node:child_process';
import type { Logger } from '@kube-node-ready/core';

/**
 * The port of every simulated node's CNI health endpoint, as Calico's Felix serves its readiness on
 * each node (`http://localhost:9099/readiness`, what node-readiness-controller's cni-readiness
 * example reporter checks).
 */
export const CNI_HEALTH_PORT = 9099;

/**
 * The endpoint's server: `GET /readiness` (and `/liveness`) on port 9099 of every node address
 * (one listener in the sandbox namespace; the node is the address the request came to), 200 once
 * the node's CNI is ready, 503 before, 404 at an address that is no node's. A process of its own,
 * as each node's agent answers for itself on a real cluster: the daemon's event loop, busy with a
 * burst of nodes, would otherwise delay every answer. It learns the nodes from JSON lines on stdin
 * and exits when stdin closes (the daemon is gone).
 */
const SERVER = `
const http = require('node:http');
const byIp = new Map();
require('node:readline').createInterface({ input: process.stdin }).on('line', (line) => {
  const m = JSON.parse(line);
  if (m.gone) { if (byIp.get(m.ip)?.node === m.node) byIp.delete(m.ip); } else byIp.set(m.ip, { node: m.node, at: m.cniReadyAt });
});
process.stdin.on('end', () => process.exit(0));
const server = http.createServer((req, res) => {
  const address = (req.socket.localAddress || '').replace(/^::ffff:/, '');
  const n = byIp.get(address);
  const reply = (status, text) => { res.writeHead(status, { 'content-type': 'text/plain' }); res.end(text + '\\n'); };
  if (req.url !== '/readiness' && req.url !== '/liveness') return reply(404, 'not found: ' + req.url);
  if (!n) return reply(404, 'no simulated node has the address ' + address);
  return Date.now() >= n.at ? reply(200, n.node + ': CNI ready') : reply(503, n.node + ': CNI not ready');
});
server.keepAliveTimeout = 1000;
server.listen(Number(process.argv[1]), '0.0.0.0');
`;

/** Every simulated node's CNI health endpoint (see SERVER), told of each node as the kubelet sees it. */
export class CniHealthEndpoint {
  private readonly child: ChildProcess;
  private readonly nodes = new Map<string, { ip: string; cniReadyAt: number }>();

  constructor(log: Logger) {
    this.child = spawn(process.execPath, ['-e', SERVER, String(CNI_HEALTH_PORT)], { stdio: ['pipe', 'ignore', 'pipe'] });
    this.child.stderr!.on('data', (d: Buffer) => log.warn({ stderr: d.toString().slice(0, 2000) }, 'CNI health endpoint'));
    this.child.stdin!.on('error', () => undefined);
    this.child.once('exit', (code, signal) => {
      if (signal !== 'SIGTERM') log.warn({ code, signal }, 'CNI health endpoint exited');
    });
  }

  /** The node's address and the moment its CNI is ready (epoch ms; 0: at once). */
  set(node: string, ip: string, cniReadyAt: number): void {
    const known = this.nodes.get(node);
    if (known?.ip === ip && known.cniReadyAt === cniReadyAt) return;
    if (known && known.ip !== ip) this.remove(node);
    this.nodes.set(node, { ip, cniReadyAt });
    this.child.stdin!.write(`${JSON.stringify({ node, ip, cniReadyAt })}\n`);
  }

  remove(node: string): void {
    const known = this.nodes.get(node);
    if (!known) return;
    this.nodes.delete(node);
    this.child.stdin!.write(`${JSON.stringify({ node, ip: known.ip, gone: true })}\n`);
  }

  stop(): void {
    this.child.kill('SIGTERM');
  }
}
