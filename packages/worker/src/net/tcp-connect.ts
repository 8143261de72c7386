import net from 'node:net';
import { performance } from 'node:perf_hooks';
import type { HostPort } from '../config.js';
import { describeAbort, settleOnce } from './deadline.js';

export type TcpErrorKind = 'refused' | 'timeout' | 'unreachable' | 'resolve' | 'network';

export class TcpConnectError extends Error {
  override name = 'TcpConnectError';
  constructor(
    readonly kind: TcpErrorKind,
    message: string,
  ) {
    super(message);
  }
}

/** Opens a TCP connection to `target` and closes it again; resolves with the connect latency. */
export function tcpConnect(target: HostPort, signal: AbortSignal): Promise<{ latencyMs: number }> {
  const timeout = () => new TcpConnectError('timeout', `timeout: no connection within ${describeAbort(signal)}`);
  return settleOnce(signal, timeout, ({ resolve, reject }) => {
    const started = performance.now();
    const socket = net.connect({ host: target.host, port: target.port });
    socket.once('connect', () => resolve({ latencyMs: Math.round(performance.now() - started) }));
    socket.on('error', (err) => reject(classifyConnectError(err)));
    return () => socket.destroy();
  });
}

/** A connect error as the worker reports it (kind and words, no Node.js internals). */
export function classifyConnectError(err: Error): TcpConnectError {
  // With several addresses for a host name, Node tries each and reports an AggregateError.
  const first = err instanceof AggregateError && err.errors[0] instanceof Error ? err.errors[0] : err;
  const code = (first as NodeJS.ErrnoException).code ?? (err as NodeJS.ErrnoException).code;
  switch (code) {
    case 'ECONNREFUSED':
      return new TcpConnectError('refused', 'connection refused');
    case 'EHOSTUNREACH':
    case 'ENETUNREACH':
      return new TcpConnectError('unreachable', `${code === 'EHOSTUNREACH' ? 'host' : 'network'} unreachable (${code})`);
    case 'ENOTFOUND':
    case 'EAI_AGAIN':
      return new TcpConnectError('resolve', `cannot resolve the host name (${code})`);
    case 'ETIMEDOUT':
      return new TcpConnectError('timeout', 'timeout: the connection attempt timed out (ETIMEDOUT)');
    default:
      return new TcpConnectError('network', `${code ? `${code}: ` : ''}${first.message}`);
  }
}
