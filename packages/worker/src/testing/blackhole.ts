import { spawn } from 'node:child_process';
import net from 'node:net';
import type { HostPort } from '../config.js';

/**
 * A loopback TCP port that never completes a connection: a listener with backlog 1 (Node turns 0
 * into 511) in a child process whose event loop is blocked (so it never accepts), its accept queue
 * filled first. The kernel then drops further SYNs, like a blackholed address, without leaving
 * 127.0.0.1.
 */
export async function startBlackhole(): Promise<{ target: HostPort; close(): void }> {
  const script = `
    const net = require('node:net');
    const server = net.createServer();
    server.listen({ port: 0, host: '127.0.0.1', backlog: 1 }, () => {
      process.stdout.write(String(server.address().port) + '\\n', () => {
        Atomics.wait(new Int32Array(new SharedArrayBuffer(4)), 0, 0);
      });
    });`;
  const child = spawn(process.execPath, ['-e', script], { stdio: ['ignore', 'pipe', 'inherit'] });
  const port = await new Promise<number>((resolve, reject) => {
    child.once('error', reject);
    child.stdout.once('data', (chunk: Buffer) => resolve(Number(chunk.toString().trim())));
  });
  const fillers: net.Socket[] = [];
  // Fill the accept queue until a connection attempt no longer completes.
  for (let i = 0; i < 8; i++) {
    const socket = net.connect({ host: '127.0.0.1', port });
    socket.on('error', () => {});
    fillers.push(socket);
    const connected = await new Promise<boolean>((resolve) => {
      const timer = setTimeout(() => resolve(false), 300);
      socket.once('connect', () => {
        clearTimeout(timer);
        resolve(true);
      });
    });
    if (!connected) break;
  }
  return {
    target: { host: '127.0.0.1', port },
    close: () => {
      for (const s of fillers) s.destroy();
      child.kill('SIGKILL');
    },
  };
}

/** A loopback port with nothing listening (connection refused). */
export async function closedPort(): Promise<HostPort> {
  const server = net.createServer();
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  const { port } = server.address() as net.AddressInfo;
  await new Promise<void>((resolve) => server.close(() => resolve()));
  return { host: '127.0.0.1', port };
}
