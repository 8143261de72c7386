// The apiserver's own request counters (apiserver_request_total on /metrics, read with the admin
// kubeconfig), keyed like the fault proxy's requestsByKind(): `<verb> <resource>[.<group>][/<sub>]`.
// They count every client (the simulated kubelet, the scheduler, the observer, the bench itself),
// so they cross-check the controller's own counts only for kinds no other client issues.
import { request } from 'node:https';
import type { RequestOptions } from 'node:https';
import type { k8s } from '@kube-node-ready/sandbox';

const VERBS: Record<string, string> = { GET: 'get', LIST: 'list', WATCH: 'watch', POST: 'create', PUT: 'update', PATCH: 'patch', DELETE: 'delete', DELETECOLLECTION: 'deletecollection', APPLY: 'apply', CONNECT: 'connect' };

export async function apiserverRequestCounts(kc: k8s.KubeConfig): Promise<Record<string, number>> {
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

export function diffCounts(after: Record<string, number>, before: Record<string, number>): Record<string, number> {
  const out: Record<string, number> = {};
  for (const [k, v] of Object.entries(after)) {
    const d = v - (before[k] ?? 0);
    if (d > 0) out[k] = d;
  }
  return Object.fromEntries(Object.entries(out).sort(([a], [b]) => a.localeCompare(b)));
}
