// The apiserver's own request counters (apiserver_request_total on /metrics, read with the admin
// kubeconfig), keyed like the fault proxy's requestsByKind(): `<verb> <resource>[.<group>][/<sub>]`.
// They count every client (the simulated kubelet, the scheduler, the observer, the bench itself),
// so they cross-check the controller's own counts only for kinds no other client issues. Also its
// priority and fairness counters per priority level (apiserver_flowcontrol_*).
import { request } from 'node:https';
import type { RequestOptions } from 'node:https';
import type { k8s } from '@kube-node-ready/sandbox';

const VERBS: Record<string, string> = { GET: 'get', LIST: 'list', WATCH: 'watch', POST: 'create', PUT: 'update', PATCH: 'patch', DELETE: 'delete', DELETECOLLECTION: 'deletecollection', APPLY: 'apply', CONNECT: 'connect' };

export async function apiserverRequestCounts(kc: k8s.KubeConfig): Promise<Record<string, number>> {
  return requestCounts(await apiserverMetrics(kc));
}

/** Requests per kind and priority and fairness per level, from one read of the API server's metrics. */
export async function apiserverSnapshot(kc: k8s.KubeConfig): Promise<{ requests: Record<string, number>; apf: Record<string, ApfLevel> }> {
  const text = await apiserverMetrics(kc);
  return { requests: requestCounts(text), apf: apfLevels(text) };
}

function requestCounts(text: string): Record<string, number> {
  const counts: Record<string, number> = {};
  for (const line of text.split('\n')) {
    if (!line.startsWith('apiserver_request_total{')) continue;
    const labels = Object.fromEntries([...line.matchAll(/(\w+)="([^"]*)"/g)].map((m) => [m[1], m[2]]));
    if (!labels.resource) continue;
    const verb = VERBS[labels.verb ?? ''] ?? (labels.verb ?? '').toLowerCase();
    const kind = `${verb} ${labels.resource}${labels.group ? `.${labels.group}` : ''}${labels.subresource ? `/${labels.subresource}` : ''}`;
    counts[kind] = (counts[kind] ?? 0) + Number(line.slice(line.lastIndexOf(' ') + 1));
  }
  return counts;
}

/** Priority and fairness per priority level: requests dispatched, seconds they waited in its queues (summed), requests rejected. */
export interface ApfLevel {
  dispatched: number;
  waitSeconds: number;
  rejected: number;
}

function apfLevels(text: string): Record<string, ApfLevel> {
  const out: Record<string, ApfLevel> = {};
  const level = (name: string) => (out[name] ??= { dispatched: 0, waitSeconds: 0, rejected: 0 });
  for (const line of text.split('\n')) {
    const m = /^(apiserver_flowcontrol_dispatched_requests_total|apiserver_flowcontrol_request_wait_duration_seconds_sum|apiserver_flowcontrol_rejected_requests_total)\{(.*)\} (\S+)$/.exec(line);
    if (!m) continue;
    const pl = /priority_level="([^"]*)"/.exec(m[2]!)?.[1] ?? '?';
    const v = Number(m[3]);
    if (m[1] === 'apiserver_flowcontrol_dispatched_requests_total') level(pl).dispatched += v;
    else if (m[1] === 'apiserver_flowcontrol_rejected_requests_total') level(pl).rejected += v;
    else level(pl).waitSeconds += v;
  }
  return out;
}

export function diffApf(after: Record<string, ApfLevel>, before: Record<string, ApfLevel>): Record<string, ApfLevel> {
  const out: Record<string, ApfLevel> = {};
  for (const [k, a] of Object.entries(after)) {
    const b = before[k] ?? { dispatched: 0, waitSeconds: 0, rejected: 0 };
    const d = { dispatched: a.dispatched - b.dispatched, waitSeconds: Math.round((a.waitSeconds - b.waitSeconds) * 100) / 100, rejected: a.rejected - b.rejected };
    if (d.dispatched > 0 || d.rejected > 0) out[k] = d;
  }
  return out;
}

async function apiserverMetrics(kc: k8s.KubeConfig): Promise<string> {
  const server = new URL(kc.getCurrentCluster()!.server);
  const opts: RequestOptions = { host: server.hostname, port: server.port, path: '/metrics', method: 'GET' };
  await kc.applyToHTTPSOptions(opts);
  const text = await new Promise<string>((resolve, reject) => {
    const req = request(opts, (res) => {
      let body = '';
      res.setEncoding('utf8');
      res.on('data', (d: string) => (body += d));
      res.on('end', () => (res.statusCode === 200 ? resolve(body) : reject(new Error(`GET /metrics: ${res.statusCode}`))));
    });
    req.on('error', reject);
    req.setTimeout(20_000, () => req.destroy(new Error('GET /metrics: timeout')));
    req.end();
  });
  return text;
}

export function diffCounts(after: Record<string, number>, before: Record<string, number>): Record<string, number> {
  const out: Record<string, number> = {};
  for (const [k, v] of Object.entries(after)) {
    const d = v - (before[k] ?? 0);
    if (d > 0) out[k] = d;
  }
  return Object.fromEntries(Object.entries(out).sort(([a], [b]) => a.localeCompare(b)));
}
