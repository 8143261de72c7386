import net from 'node:net';
import { performance } from 'node:perf_hooks';
import tls from 'node:tls';
import type { HostPort } from '../config.js';
import { describeAbort, settleOnce } from './deadline.js';
import { classifyConnectError, TcpConnectError } from './tcp-connect.js';

export interface TlsProbe {
  connectMs: number;
  handshakeMs: number;
  protocol: string;
  /** The certificate chains to a CA of the worker's trust store (system CAs); not required to pass. */
  authorized: boolean;
  /** OpenSSL's code for why it is not (UNABLE_TO_GET_ISSUER_CERT_LOCALLY, ...). */
  authorizationError?: string;
}

/**
 * A TCP connection to `target` and, on it, a TLS handshake naming `servername` (SNI). The
 * certificate is recorded, not required: the point is that the path carries the handshake, whose
 * server messages are several full-size packets. A connection that opens but whose handshake
 * stalls is reported as such.
 */
export function tlsProbe(target: HostPort, servername: string | undefined, signal: AbortSignal): Promise<TlsProbe> {
  let connectMs: number | undefined;
  const timeout = () =>
    new TcpConnectError(
      'timeout',
      connectMs === undefined
        ? `timeout: no connection within ${describeAbort(signal)}`
        : `timeout: connected, but the TLS handshake did not finish within ${describeAbort(signal)} (large packets from there may be dropped on the way)`,
    );
  return settleOnce(signal, timeout, ({ resolve, reject }) => {
    const started = performance.now();
    const socket = net.connect({ host: target.host, port: target.port });
    let secure: tls.TLSSocket | undefined;
    socket.on('error', (err) => reject(classifyConnectError(err)));
    socket.once('connect', () => {
      connectMs = Math.round(performance.now() - started);
      const handshakeStarted = performance.now();
      secure = tls.connect({ socket, rejectUnauthorized: false, ...(servername && net.isIP(servername) === 0 ? { servername } : {}) });
      secure.on('error', (err) => reject(new TcpConnectError('network', `connected, but the TLS handshake failed (${(err as NodeJS.ErrnoException).code ?? 'error'})`)));
      secure.once('secureConnect', () => {
        const s = secure as tls.TLSSocket;
        resolve({
          connectMs: connectMs ?? 0,
          handshakeMs: Math.round(performance.now() - handshakeStarted),
          protocol: s.getProtocol() ?? 'unknown',
          authorized: s.authorized,
          ...(s.authorizationError ? { authorizationError: String((s.authorizationError as NodeJS.ErrnoException).code ?? s.authorizationError) } : {}),
        });
      });
    });
    return () => {
      secure?.destroy();
      socket.destroy();
    };
  });
}
