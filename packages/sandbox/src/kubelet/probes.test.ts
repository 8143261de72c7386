import { spawn } from 'node:child_process';
import { createServer as createHttpServer, type Server } from 'node:http';
import { createServer as createTcpServer, type AddressInfo } from 'node:net';
import { afterEach, describe, expect, it, vi } from 'vitest';
import type { k8s } from '../kube.js';
import { ContainerProbes, initialProbeState, observe, probeTiming, resolvePort, runExecProcess, runProbe, type ProbeKind, type ProbeOutcome, type ProbeResult, type ProbeTarget } from './probes.js';

const timing = (o: Partial<k8s.V1Probe> = {}) => probeTiming({ successThreshold: 1, failureThreshold: 3, ...o });

/** Feeds attempts to a fresh worker; returns the acted-on result after each and whether it changed. */
function feed(kind: ProbeKind, t: ReturnType<typeof probeTiming>, attempts: ProbeResult[]) {
  let state = initialProbeState(kind);
  return attempts.map((a) => {
    const r = observe(kind, t, state, a);
    state = r.state;
    return `${state.result}${r.changed ? '!' : ''}${state.onHold ? ' hold' : ''}`;
  });
}

describe('probe thresholds (a kubelet probe worker)', () => {
  it.each<[string, ProbeKind, Partial<k8s.V1Probe>, ProbeResult[], string[]]>([
    ['readiness starts failed; one success makes it ready', 'readiness', {}, ['success'], ['success!']],
    ['readiness needs successThreshold successes in a row', 'readiness', { successThreshold: 2 }, ['success', 'failure', 'success', 'success'], ['failure', 'failure', 'failure', 'success!']],
    ['readiness turns unready after failureThreshold failures', 'readiness', { failureThreshold: 2 }, ['success', 'failure', 'failure', 'failure'], ['success!', 'success', 'failure!', 'failure']],
    ['liveness tolerates failureThreshold - 1 failures', 'liveness', { failureThreshold: 3 }, ['failure', 'failure', 'success', 'failure', 'failure'], ['success', 'success', 'success', 'success', 'success']],
    ['liveness fails after failureThreshold failures and holds', 'liveness', { failureThreshold: 2 }, ['failure', 'failure'], ['success', 'failure! hold']],
    ['startup unknown until it succeeds', 'startup', { failureThreshold: 5 }, ['failure', 'success'], ['unknown', 'success!']],
    ['startup fails after failureThreshold failures', 'startup', { failureThreshold: 1 }, ['failure'], ['failure! hold']],
  ])('%s', (_name, kind, probe, attempts, want) => {
    expect(feed(kind, timing(probe), attempts)).toEqual(want);
  });

  it('fills in the API server defaults', () => {
    expect(probeTiming({})).toEqual({ initialDelaySeconds: 0, periodSeconds: 10, timeoutSeconds: 1, successThreshold: 1, failureThreshold: 3 });
  });

  it('resolves a named port from the container ports', () => {
    const ports = [{ name: 'health', containerPort: 8081 }];
    expect(resolvePort('health', ports)).toBe(8081);
    expect(resolvePort(9000, ports)).toBe(9000);
    expect(() => resolvePort('metrics', ports)).toThrow(/couldn't find port: metrics/);
  });
});

describe('probe handlers against real loopback servers', () => {
  const servers: Array<{ close: () => void }> = [];
  afterEach(() => {
    for (const s of servers.splice(0)) s.close();
  });
  const listen = async (server: Server | ReturnType<typeof createTcpServer>): Promise<number> => {
    servers.push(server);
    await new Promise<void>((r) => server.listen(0, '127.0.0.1', r));
    return (server.address() as AddressInfo).port;
  };
  const exec = (command: string[], timeoutMs: number) => runExecProcess(() => spawn(command[0]!, command.slice(1), { stdio: ['ignore', 'pipe', 'pipe'], detached: true }), timeoutMs);
  const target = (ports: k8s.V1ContainerPort[] = []): ProbeTarget => ({ podIP: '127.0.0.1', ports, exec });

  it('httpGet: 2xx/3xx succeed, others fail with the status code; headers are sent; the pod IP is the default host', async () => {
    const seen: string[] = [];
    const port = await listen(
      createHttpServer((req, res) => {
        seen.push(`${req.url} ${req.headers['user-agent']} ${req.headers['x-probe'] ?? ''}`);
        res.statusCode = req.url === '/ok' ? 200 : req.url === '/moved' ? 302 : 503;
        res.end();
      }),
    );
    const probe = (path: string): k8s.V1Probe => ({ httpGet: { path, port: 'http' as unknown as k8s.IntOrString, httpHeaders: [{ name: 'X-Probe', value: 'yes' }] } });
    const t = target([{ name: 'http', containerPort: port }]);
    expect(await runProbe(probe('/ok'), t, 1000)).toEqual({ result: 'success', output: '' });
    expect(await runProbe(probe('/moved'), t, 1000)).toEqual({ result: 'success', output: '' });
    expect(await runProbe(probe('/sick'), t, 1000)).toEqual({ result: 'failure', output: 'HTTP probe failed with statuscode: 503' });
    expect(seen[0]).toBe('/ok kube-probe/1.36 yes');
  });

  it('httpGet: a refused connection and a server that does not answer in time fail with the words a kubelet uses', async () => {
    const closed = await listen(createTcpServer());
    servers.pop()!.close();
    const refused = await runProbe({ httpGet: { path: '/healthz', port: closed as unknown as k8s.IntOrString } }, target(), 1000);
    expect(refused).toEqual({ result: 'failure', output: `Get "http://127.0.0.1:${closed}/healthz": dial tcp 127.0.0.1:${closed}: connect: connection refused` });
    const silent = await listen(createHttpServer(() => undefined));
    const t0 = Date.now();
    const slow = await runProbe({ httpGet: { path: '/', port: silent as unknown as k8s.IntOrString } }, target(), 300);
    expect(slow.result).toBe('failure');
    expect(slow.output).toMatch(/context deadline exceeded \(Client.Timeout exceeded while awaiting headers\)$/);
    expect(Date.now() - t0).toBeLessThan(2000);
  });

  it('tcpSocket: connects or fails', async () => {
    const port = await listen(createTcpServer((s) => s.end()));
    expect(await runProbe({ tcpSocket: { port: port as unknown as k8s.IntOrString } }, target(), 1000)).toEqual({ result: 'success', output: '' });
    servers.pop()!.close();
    await new Promise((r) => setTimeout(r, 50));
    expect(await runProbe({ tcpSocket: { port: port as unknown as k8s.IntOrString } }, target(), 1000)).toEqual({ result: 'failure', output: `dial tcp 127.0.0.1:${port}: connect: connection refused` });
  });

  it('exec: exit 0 succeeds; otherwise fails with the output; a command past its timeout is killed', async () => {
    expect(await runProbe({ exec: { command: ['/bin/sh', '-c', 'exit 0'] } }, target(), 1000)).toEqual({ result: 'success', output: '' });
    expect(await runProbe({ exec: { command: ['/bin/sh', '-c', 'echo not yet; exit 1'] } }, target(), 1000)).toEqual({ result: 'failure', output: 'not yet\n' });
    const t0 = Date.now();
    expect(await runProbe({ exec: { command: ['/bin/sh', '-c', 'sleep 5'] } }, target(), 200)).toEqual({ result: 'failure', output: 'command "/bin/sh -c sleep 5" timed out' });
    expect(Date.now() - t0).toBeLessThan(2000);
  });
});

describe('ContainerProbes schedule', () => {
  afterEach(() => vi.useRealTimers());

  /** A container's probes driven by a scripted sequence of attempt results, on a fake clock. */
  function harness(spec: Partial<k8s.V1Container>, script: Partial<Record<ProbeKind, ProbeResult[]>>) {
    vi.useFakeTimers({ now: 0 });
    const calls: string[] = [];
    const events: string[] = [];
    const kindOf = (p: k8s.V1Probe): ProbeKind => (p === spec.livenessProbe ? 'liveness' : p === spec.readinessProbe ? 'readiness' : 'startup');
    const attempt = async (p: k8s.V1Probe): Promise<ProbeOutcome> => {
      const kind = kindOf(p);
      calls.push(`${Math.floor(Date.now() / 1000)}s ${kind}`);
      const result = script[kind]?.shift() ?? 'success';
      return { result, output: result === 'failure' ? 'boom' : '' };
    };
    const probes = new ContainerProbes(
      { name: 'main', ...spec },
      { podIP: '127.0.0.1', ports: [], exec: async () => ({ exitCode: 0, output: '', timedOut: false }) },
      {
        onReady: (r) => events.push(`${Math.floor(Date.now() / 1000)}s ready=${r}`),
        onStarted: () => events.push(`${Math.floor(Date.now() / 1000)}s started`),
        onUnhealthy: (k, o) => events.push(`${Math.floor(Date.now() / 1000)}s unhealthy ${k}: ${o}`),
        onFailed: (k) => events.push(`${Math.floor(Date.now() / 1000)}s failed ${k}`),
      },
      attempt,
    );
    probes.start(0);
    return { probes, calls, events, advance: (s: number) => vi.advanceTimersByTimeAsync(s * 1000) };
  }

  it('readiness: first attempt after initialDelaySeconds, then every periodSeconds; ready flips with the thresholds', async () => {
    const h = harness({ readinessProbe: { exec: { command: ['x'] }, initialDelaySeconds: 2, periodSeconds: 3, failureThreshold: 2 } }, { readiness: ['success', 'failure', 'failure'] });
    expect(h.probes.ready).toBe(false);
    await h.advance(10);
    h.probes.stop();
    expect(h.calls).toEqual(['2s readiness', '5s readiness', '8s readiness']);
    expect(h.events).toEqual(['2s ready=true', '5s unhealthy readiness: boom', '8s unhealthy readiness: boom', '8s ready=false']);
  });

  it('liveness: failureThreshold failures in a row ask for a restart once, then probing stops', async () => {
    const h = harness({ livenessProbe: { exec: { command: ['x'] }, periodSeconds: 1, failureThreshold: 2 } }, { liveness: ['failure', 'failure', 'failure'] });
    expect(h.probes.ready).toBe(true); // no readiness probe: ready once started
    await h.advance(5);
    h.probes.stop();
    expect(h.events).toEqual(['0s unhealthy liveness: boom', '1s unhealthy liveness: boom', '1s failed liveness']);
    expect(h.calls).toHaveLength(2);
  });

  it('startup: liveness and readiness wait for it; readiness is probed as soon as it passes', async () => {
    const h = harness(
      {
        startupProbe: { exec: { command: ['x'] }, periodSeconds: 2, failureThreshold: 10 },
        readinessProbe: { exec: { command: ['x'] }, periodSeconds: 10 },
        livenessProbe: { exec: { command: ['x'] }, periodSeconds: 10 },
      },
      { startup: ['failure', 'failure', 'success'] },
    );
    expect([h.probes.started, h.probes.ready]).toEqual([false, false]);
    await h.advance(5);
    h.probes.stop();
    expect(h.calls).toEqual(['0s startup', '2s startup', '4s startup', '4s readiness']);
    expect(h.events).toEqual(['0s unhealthy startup: boom', '2s unhealthy startup: boom', '4s started', '4s ready=true']);
    expect([h.probes.started, h.probes.ready]).toEqual([true, true]);
  });
});
