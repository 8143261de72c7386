import { readFileSync } from 'node:fs';
import { STATUS_CODES } from 'node:http';
import https from 'node:https';
import { isIP } from 'node:net';
import { join } from 'node:path';
import { performance } from 'node:perf_hooks';
import tls from 'node:tls';
import { errorMessage } from '@kube-node-ready/core';
import type * as z from 'zod/mini';
import { formatHostPort, type HostPort } from '../config.js';
import { describeAbort, settleOnce } from '../net/deadline.js';
import { isTlsError, tlsReason } from '../net/tls-errors.js';
import { statusSchema } from './objects.js';

/**
 * A minimal client of the Kubernetes API for the worker: GET with the pod's service-account token,
 * TLS verified against the service-account CA. (@kubernetes/client-node is deliberately not used:
 * the worker must start fast and stay small.)
 */

export type ApiErrorKind = 'setup' | 'tls' | 'http' | 'timeout' | 'network' | 'decode';

export class ApiError extends Error {
  override name = 'ApiError';
  constructor(
    readonly kind: ApiErrorKind,
    message: string,
    readonly status?: number,
  ) {
    super(message);
  }
}

export interface ServiceAccount {
  token: string;
  ca: Buffer;
}

/** Reads token and ca.crt as the kubelet mounts them. Throws ApiError('setup'). */
export function readServiceAccount(dir: string): ServiceAccount {
  const read = (file: string) => {
    try {
      return readFileSync(join(dir, file));
    } catch (err) {
      throw new ApiError(
        'setup',
        `cannot read the service-account ${file} at ${join(dir, file)}: ${errorMessage(err)} (is automountServiceAccountToken disabled?)`,
      );
    }
  };
  const token = read('token').toString('utf8').trim();
  if (token === '') throw new ApiError('setup', `the service-account token at ${join(dir, 'token')} is empty`);
  return { token, ca: read('ca.crt') };
}

/** Largest response body we read (the worker only reads a few small objects). */
const MAX_BODY_BYTES = 8 * 1024 * 1024;

export interface ApiResponse<T> {
  body: T;
  latencyMs: number;
}

export class KubeApiClient {
  private readonly agent: https.Agent;

  /**
   * `identity`: the host name the server certificate must be valid for, when it is not `server`
   * (an API server endpoint dialled directly must still hold a certificate for the Service address).
   */
  constructor(
    readonly server: HostPort,
    private readonly account: ServiceAccount,
    private readonly identity: string = server.host,
  ) {
    // Keep-alive: the checks' few requests share connections. close() destroys them.
    this.agent = new https.Agent({ keepAlive: true, ca: account.ca, maxSockets: 4 });
  }

  /** The same credentials, dialling `server` directly; the certificate must still be valid for this client's host. */
  via(server: HostPort): KubeApiClient {
    return new KubeApiClient(server, this.account, this.identity);
  }

  /** A bare TLS handshake, verified against the service-account CA. */
  tlsHandshake(signal: AbortSignal): Promise<{ latencyMs: number; protocol: string }> {
    return settleOnce(signal, () => this.timeout(signal, 'TLS handshake'), ({ resolve, reject }) => {
      const started = performance.now();
      const socket = tls.connect({ host: this.server.host, port: this.server.port, ca: this.account.ca, ...this.serverName() });
      socket.once('secureConnect', () => resolve({ latencyMs: Math.round(performance.now() - started), protocol: socket.getProtocol() ?? 'unknown' }));
      socket.on('error', (err) => reject(this.transportError(err)));
      return () => socket.destroy();
    });
  }

  /** GET `path`, validated with `schema`. Non-2xx answers reject with ApiError('http') carrying the Status message. */
  async get<T>(path: string, schema: z.ZodMiniType<T>, signal: AbortSignal): Promise<ApiResponse<T>> {
    const started = performance.now();
    const { status, text } = await this.request(path, signal);
    const latencyMs = Math.round(performance.now() - started);
    if (status < 200 || status > 299) throw httpError(status, text);
    let json: unknown;
    try {
      json = JSON.parse(text);
    } catch {
      throw new ApiError('decode', `GET ${path}: the answer is not JSON (${status})`);
    }
    const parsed = schema.safeParse(json);
    if (!parsed.success) {
      const issue = parsed.error.issues[0];
      throw new ApiError('decode', `GET ${path}: unexpected answer: ${issue?.path.join('.') ?? ''} ${issue?.message ?? ''}`.trim());
    }
    return { body: parsed.data, latencyMs };
  }

  close(): void {
    this.agent.destroy();
  }

  private request(path: string, signal: AbortSignal): Promise<{ status: number; text: string }> {
    return settleOnce(signal, () => this.timeout(signal, `GET ${path}`), ({ resolve, reject }) => {
      const req = https.request({
        host: this.server.host,
        port: this.server.port,
        path,
        method: 'GET',
        agent: this.agent,
        headers: { Authorization: `Bearer ${this.account.token}`, Accept: 'application/json', 'User-Agent': 'kube-node-ready-worker' },
        ...this.serverName(),
      });
      let complete = false;
      req.on('response', (res) => {
        const chunks: Buffer[] = [];
        let size = 0;
        res.on('data', (chunk: Buffer) => {
          size += chunk.length;
          if (size > MAX_BODY_BYTES) reject(new ApiError('decode', `GET ${path}: answer larger than ${MAX_BODY_BYTES} bytes`));
          else chunks.push(chunk);
        });
        res.on('end', () => {
          complete = true;
          resolve({ status: res.statusCode ?? 0, text: Buffer.concat(chunks).toString('utf8') });
        });
        res.on('error', (err) => reject(this.transportError(err)));
      });
      req.on('error', (err) => reject(this.transportError(err)));
      req.end();
      // A finished exchange leaves its connection to the keep-alive agent; anything else is torn down.
      return () => {
        if (!complete) req.destroy();
      };
    });
  }

  /** Certificates are issued for the API server's IP: no SNI for an IP literal (Node warns otherwise). */
  private serverName(): { servername?: string; checkServerIdentity?: typeof tls.checkServerIdentity } {
    const identity = this.identity;
    const name = isIP(identity) ? {} : { servername: identity };
    if (identity === this.server.host) return name;
    return { ...name, checkServerIdentity: (_host, cert) => tls.checkServerIdentity(identity, cert) };
  }

  private timeout(signal: AbortSignal, what: string): ApiError {
    return new ApiError('timeout', `${what}: timeout: no answer from ${formatHostPort(this.server)} within ${describeAbort(signal)}`);
  }

  private transportError(err: Error): ApiError {
    const code = (err as NodeJS.ErrnoException).code ?? '';
    if (isTlsError(code, err)) {
      return new ApiError('tls', `TLS error: ${tlsReason(code, err)}; the server certificate of ${formatHostPort(this.server)} is not valid for the service-account CA (ca.crt)`);
    }
    if (code === 'ECONNREFUSED') return new ApiError('network', `connection refused by ${formatHostPort(this.server)}`);
    return new ApiError('network', `cannot reach ${formatHostPort(this.server)}: ${code ? `${code} ` : ''}${err.message}`.trim());
  }
}

/** "403 Forbidden: services "kubernetes" is forbidden: User ... cannot get ...". */
function httpError(status: number, text: string): ApiError {
  let message: string | undefined;
  try {
    const parsed = statusSchema.safeParse(JSON.parse(text));
    if (parsed.success) message = parsed.data.message;
  } catch {
    // Not a Status body: keep the start of the text.
  }
  message ??= text.trim().slice(0, 200);
  const head = `${status} ${STATUS_CODES[status] ?? 'Error'}`;
  const hint =
    status === 401
      ? ' (the service-account token was rejected: expired, revoked, or issued by another cluster)'
      : status === 403
        ? " (the worker's ServiceAccount needs get on services and list on endpointslices.discovery.k8s.io)"
        : '';
  return new ApiError('http', `${head}${message ? `: ${message}` : ''}${hint}`, status);
}
