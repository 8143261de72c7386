import http from 'node:http';
import https from 'node:https';
import { performance } from 'node:perf_hooks';
import type { TLSSocket } from 'node:tls';
import { formatDuration } from '@kube-node-ready/core';
import { formatHostPort } from '../config.js';
import { DeadlineExceeded, describeAbort, settleOnce } from './deadline.js';
import { classifyConnectError } from './tcp-connect.js';
import { isTlsError, tlsReason } from './tls-errors.js';

export interface HttpAnswer {
  status: number;
  /** The address that answered (`10.0.0.5:443`). */
  address: string;
  /** The `Location` of a redirect, which is not followed. */
  location?: string;
  connectMs: number;
  /** https only. */
  tlsMs?: number;
  protocol?: string;
  /** From the start to the status line and headers. */
  responseMs: number;
}

export type HttpProbeErrorKind = 'connect' | 'tls' | 'timeout' | 'protocol';

export class HttpProbeError extends Error {
  override name = 'HttpProbeError';
  constructor(
    readonly kind: HttpProbeErrorKind,
    message: string,
  ) {
    super(message);
  }
}

export interface HttpProbeOptions {
  /** PEM certificates trusted instead of Node.js's built-in CA list (https only). */
  ca?: string;
  /** Named in TLS errors: which certificates the server's was checked against. */
  trusted: string;
}

/**
 * One `GET url` from this pod, straight to the URL's host (its name resolved by the system
 * resolver): no proxy (HTTP_PROXY and the like are ignored: the agent is the probe's own), no
 * redirect followed, no connection kept. It resolves as soon as the status line and headers
 * arrive; the body is never read, the connection is closed instead. A timeout says how far the
 * exchange got and how long it had been waiting.
 */
export function httpProbe(url: URL, options: HttpProbeOptions, signal: AbortSignal): Promise<HttpAnswer> {
  const secure = url.protocol === 'https:';
  const hostname = url.hostname.replace(/^\[(.*)\]$/, '$1');
  const dialled = formatHostPort({ host: hostname, port: Number(url.port || (secure ? 443 : 80)) });
  const started = performance.now();
  const since = () => Math.round(performance.now() - started);
  let address: string | undefined;
  let connectMs: number | undefined;
  let tlsMs: number | undefined;
  let protocol: string | undefined;

  const timeout = () => {
    const reason: unknown = signal.reason;
    const limit = reason instanceof DeadlineExceeded ? `${reason.what} ${formatDuration(reason.ms)}` : describeAbort(signal);
    const stage =
      address === undefined
        ? `no connection to ${dialled}`
        : secure && tlsMs === undefined
          ? `connected to ${address} in ${formatDuration(connectMs ?? 0)}, but the TLS handshake did not finish`
          : `connected to ${address}, request sent, no answer (status line and headers)`;
    return new HttpProbeError('timeout', `timeout after ${formatDuration(since())} (${limit}): ${stage}`);
  };

  return settleOnce(signal, timeout, ({ resolve, reject }) => {
    const request = secure ? https.request : http.request;
    const req = request(url, {
      method: 'GET',
      // A fresh agent of our own: the global agent may be set up from HTTP_PROXY (NODE_USE_ENV_PROXY).
      agent: false,
      headers: { 'User-Agent': 'kube-node-ready-worker', Accept: '*/*', Connection: 'close' },
      ...(secure && options.ca !== undefined ? { ca: options.ca } : {}),
    });
    req.on('socket', (socket) => {
      socket.once('connect', () => {
        connectMs = since();
        address = socket.remoteAddress !== undefined && socket.remotePort !== undefined ? formatHostPort({ host: socket.remoteAddress, port: socket.remotePort }) : dialled;
      });
      if (secure) {
        socket.once('secureConnect', () => {
          tlsMs = since() - (connectMs ?? 0);
          protocol = (socket as TLSSocket).getProtocol() ?? undefined;
        });
      }
    });
    req.on('response', (res) => {
      // The status is all the check needs: the body is not read, and the connection is closed.
      res.on('error', () => {});
      const location = res.headers.location;
      resolve({
        status: res.statusCode ?? 0,
        address: address ?? dialled,
        ...(location !== undefined ? { location } : {}),
        connectMs: connectMs ?? 0,
        ...(tlsMs !== undefined ? { tlsMs } : {}),
        ...(protocol !== undefined ? { protocol } : {}),
        responseMs: since(),
      });
    });
    req.on('error', (err) => reject(classify(err, hostname, address ?? dialled, address !== undefined, options.trusted)));
    req.end();
    return () => req.destroy();
  });
}

function classify(err: Error, hostname: string, address: string, connected: boolean, trusted: string): HttpProbeError {
  const code = (err as NodeJS.ErrnoException).code ?? '';
  if (isTlsError(code, err)) return new HttpProbeError('tls', `TLS error from ${address}: ${tlsReason(code, err)}; trusted: ${trusted}`);
  if (!connected) {
    const failed = classifyConnectError(err);
    if (failed.kind === 'resolve') return new HttpProbeError('connect', `cannot resolve ${hostname}${code ? ` (${code})` : ''}`);
    return new HttpProbeError('connect', `could not connect to ${dialledAddress(err) ?? address}: ${withCode(failed.message, code)}`);
  }
  if (code.startsWith('HPE_')) return new HttpProbeError('protocol', `${address} answered, but not with HTTP (${code})`);
  if (code === 'ECONNRESET') {
    const what = err.message === 'socket hang up' ? 'closed the connection without an answer' : 'reset the connection before an answer';
    return new HttpProbeError('protocol', `connected to ${address}, which ${what} (${code})`);
  }
  return new HttpProbeError('protocol', `connected to ${address}, then: ${code ? `${code}: ` : ''}${err.message}`);
}

/** The address a failed connect dialled (a host name's resolved IP); with several, the first one tried. */
function dialledAddress(err: Error): string | undefined {
  const first = (err instanceof AggregateError && err.errors[0] instanceof Error ? err.errors[0] : err) as NodeJS.ErrnoException & { address?: unknown; port?: unknown };
  return typeof first.address === 'string' && typeof first.port === 'number' ? formatHostPort({ host: first.address, port: first.port }) : undefined;
}

function withCode(message: string, code: string): string {
  return code && !message.includes(code) ? `${message} (${code})` : message;
}
