import { spawn, type ChildProcess } from 'node:child_process';
import { mkdirSync, openSync, readFileSync, renameSync, rmSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { stringify } from 'yaml';
import { k8s, loadKubeConfig } from './kube.js';
import { inNetns } from './netns.js';
import type { SandboxLayout } from './layout.js';
import { sleep } from './proc.js';

/**
 * A real Prometheus server (Debian's `prometheus` binary) in the sandbox's network namespace, so it
 * reaches pod IPs and the apiserver as an in-cluster Prometheus does. It listens on the sandbox's own
 * address (169.254.<100+slot>.2), the only one the host reaches, like the apiserver.
 *
 * What it scrapes is described the way the Prometheus Operator describes it: a ServiceMonitor
 * (as the chart renders it) becomes the scrape configuration the operator generates for it (the same
 * keep/relabel rules: `job` is the Service name, `namespace`, `pod`, `service`, `container`,
 * `endpoint`), and a PrometheusRule's groups are loaded as its rule file. Debian builds Prometheus
 * without kubernetes_sd, so the targets come from a file_sd file this module rewrites from the
 * EndpointSlices of the selected Services every second, each target carrying the
 * `__meta_kubernetes_*` labels kubernetes_sd's endpointslice role would give it: the relabelling
 * runs in Prometheus, unchanged. A static target covers a controller that runs outside any pod (the demo).
 */

/** The fields of a monitoring.coreos.com/v1 ServiceMonitor this translation honours. */
export interface ServiceMonitorLike {
  metadata: { name: string; namespace?: string };
  spec: {
    namespaceSelector?: { matchNames?: string[] };
    selector: { matchLabels?: Record<string, string> };
    endpoints: Array<{ port: string; path?: string; interval?: string; scrapeTimeout?: string; relabelings?: unknown[]; metricRelabelings?: unknown[] }>;
  };
}

export interface StaticTarget {
  /** host:port, as seen from the sandbox's network namespace. */
  address: string;
  labels: Record<string, string>;
  path?: string;
}

export interface PrometheusOptions {
  layout: SandboxLayout;
  /** Kubeconfig Prometheus' service discovery uses to watch EndpointSlices, Services and Pods. */
  kubeconfig: string;
  serviceMonitors?: ServiceMonitorLike[];
  staticTargets?: StaticTarget[];
  /** Rule groups (a PrometheusRule's `spec.groups`). */
  ruleGroups?: unknown[];
  /** Overrides the ServiceMonitor's interval (tests want seconds, not 30 s). Default 2s. */
  scrapeInterval?: string;
  /** Rule evaluation interval. Default 2s. */
  evaluationInterval?: string;
  /** Port on the sandbox address; default: a free one from 19090-19989. */
  port?: number;
  /** Working directory (config, rules, TSDB, log). Default <sandbox dir>/prometheus-<port>. */
  dir?: string;
}

export interface PromSample {
  metric: Record<string, string>;
  value: [number, string];
}

export interface PromAlert {
  labels: Record<string, string>;
  annotations: Record<string, string>;
  state: 'pending' | 'firing';
  activeAt: string;
  value: string;
}

export interface PrometheusServer {
  /** http://169.254.<100+slot>.2:<port> */
  url: string;
  dir: string;
  pid: number;
  /** Instant query; throws on a PromQL error. */
  query(expr: string): Promise<PromSample[]>;
  /** Pending and firing alerts (/api/v1/alerts). */
  alerts(): Promise<PromAlert[]>;
  /** Scrape targets and their health (/api/v1/targets, active ones). */
  targets(): Promise<Array<{ labels: Record<string, string>; health: string; lastError: string; scrapeUrl: string }>>;
  /** The last lines of Prometheus' own log. */
  logTail(lines?: number): string;
  stop(): Promise<void>;
}

/** The scrape configuration the Prometheus Operator generates for one ServiceMonitor endpoint (role endpointslice). */
export function serviceMonitorScrapeConfigs(sm: ServiceMonitorLike, targetsFile: string, interval?: string): Record<string, unknown>[] {
  const namespace = sm.metadata.namespace ?? 'default';
  const selectorRules = Object.entries(sm.spec.selector.matchLabels ?? {}).map(([k, v]) => {
    const name = sanitize(k);
    return {
      action: 'keep',
      source_labels: [`__meta_kubernetes_service_label_${name}`, `__meta_kubernetes_service_labelpresent_${name}`],
      regex: `(${escapeRegex(v)});true`,
    };
  });
  return sm.spec.endpoints.map((ep, i) => ({
    job_name: `serviceMonitor/${namespace}/${sm.metadata.name}/${i}`,
    honor_labels: false,
    file_sd_configs: [{ files: [targetsFile], refresh_interval: '1s' }],
    scrape_interval: interval ?? ep.interval ?? '30s',
    scrape_timeout: interval ? minDuration(interval, ep.scrapeTimeout ?? '10s') : (ep.scrapeTimeout ?? '10s'),
    metrics_path: ep.path ?? '/metrics',
    relabel_configs: [
      { source_labels: ['job'], target_label: '__tmp_prometheus_job_name' },
      ...selectorRules,
      { action: 'keep', source_labels: ['__meta_kubernetes_endpointslice_port_name'], regex: escapeRegex(ep.port) },
      { source_labels: ['__meta_kubernetes_endpointslice_address_target_kind', '__meta_kubernetes_endpointslice_address_target_name'], separator: ';', regex: 'Node;(.*)', replacement: '${1}', target_label: 'node' },
      { source_labels: ['__meta_kubernetes_endpointslice_address_target_kind', '__meta_kubernetes_endpointslice_address_target_name'], separator: ';', regex: 'Pod;(.*)', replacement: '${1}', target_label: 'pod' },
      { source_labels: ['__meta_kubernetes_namespace'], target_label: 'namespace' },
      { source_labels: ['__meta_kubernetes_service_name'], target_label: 'service' },
      { source_labels: ['__meta_kubernetes_pod_name'], target_label: 'pod' },
      { source_labels: ['__meta_kubernetes_pod_container_name'], target_label: 'container' },
      { action: 'drop', source_labels: ['__meta_kubernetes_pod_phase'], regex: '(Failed|Succeeded)' },
      { source_labels: ['__meta_kubernetes_service_name'], target_label: 'job', replacement: '${1}' },
      { target_label: 'endpoint', replacement: ep.port },
      ...(ep.relabelings ?? []).map(operatorRelabel),
    ],
    ...(ep.metricRelabelings ? { metric_relabel_configs: ep.metricRelabelings.map(operatorRelabel) } : {}),
  }));
}

/** A target group of Prometheus' file_sd format. */
interface TargetGroup {
  targets: string[];
  labels: Record<string, string>;
}

/**
 * The targets kubernetes_sd (role endpointslice) finds for a ServiceMonitor: one per address and port
 * of every EndpointSlice of a Service in the selected namespaces, with the pod's metadata. The
 * ServiceMonitor's own selector is applied by the relabelling, as in Prometheus.
 */
export async function discoverEndpointSlices(kc: k8s.KubeConfig, namespaces: string[]): Promise<TargetGroup[]> {
  const core = kc.makeApiClient(k8s.CoreV1Api);
  const discovery = kc.makeApiClient(k8s.DiscoveryV1Api);
  const groups: TargetGroup[] = [];
  for (const namespace of namespaces) {
    const [services, slices, pods] = await Promise.all([
      core.listNamespacedService({ namespace }),
      discovery.listNamespacedEndpointSlice({ namespace }),
      core.listNamespacedPod({ namespace }),
    ]);
    for (const slice of slices.items) {
      const serviceName = slice.metadata?.labels?.['kubernetes.io/service-name'];
      const service = services.items.find((sv) => sv.metadata?.name === serviceName);
      const base: Record<string, string> = {
        __meta_kubernetes_namespace: namespace,
        __meta_kubernetes_endpointslice_name: slice.metadata?.name ?? '',
        __meta_kubernetes_endpointslice_address_type: slice.addressType,
      };
      if (service) {
        base.__meta_kubernetes_service_name = service.metadata!.name!;
        for (const [k, v] of Object.entries(service.metadata?.labels ?? {})) {
          base[`__meta_kubernetes_service_label_${sanitize(k)}`] = v;
          base[`__meta_kubernetes_service_labelpresent_${sanitize(k)}`] = 'true';
        }
      }
      for (const endpoint of slice.endpoints ?? []) {
        const ref = endpoint.targetRef;
        const pod = ref?.kind === 'Pod' ? pods.items.find((p) => p.metadata?.name === ref.name) : undefined;
        for (const port of slice.ports ?? []) {
          const labels: Record<string, string> = {
            ...base,
            __meta_kubernetes_endpointslice_port: String(port.port ?? ''),
            __meta_kubernetes_endpointslice_port_name: port.name ?? '',
            __meta_kubernetes_endpointslice_port_protocol: port.protocol ?? 'TCP',
            __meta_kubernetes_endpointslice_endpoint_conditions_ready: String(endpoint.conditions?.ready ?? false),
            ...(ref ? { __meta_kubernetes_endpointslice_address_target_kind: ref.kind ?? '', __meta_kubernetes_endpointslice_address_target_name: ref.name ?? '' } : {}),
          };
          if (pod) {
            labels.__meta_kubernetes_pod_name = pod.metadata!.name!;
            labels.__meta_kubernetes_pod_ip = pod.status?.podIP ?? '';
            labels.__meta_kubernetes_pod_phase = pod.status?.phase ?? '';
            labels.__meta_kubernetes_pod_node_name = pod.spec?.nodeName ?? '';
            const container = pod.spec?.containers.find((c) => (c.ports ?? []).some((cp) => cp.containerPort === port.port));
            if (container) labels.__meta_kubernetes_pod_container_name = container.name;
          }
          for (const address of endpoint.addresses) groups.push({ targets: [`${address}:${port.port}`], labels });
        }
      }
    }
  }
  return groups;
}

/** Starts Prometheus in the sandbox namespace and returns once it is ready (/-/ready). */
export async function startPrometheus(opts: PrometheusOptions): Promise<PrometheusServer> {
  const { layout } = opts;
  const ports = opts.port ? [opts.port] : Array.from({ length: 6 }, () => 19090 + Math.floor(Math.random() * 900));
  let lastError = '';
  for (const port of ports) {
    const dir = opts.dir ?? join(layout.dir, `prometheus-${port}`);
    rmSync(dir, { recursive: true, force: true });
    mkdirSync(join(dir, 'data'), { recursive: true });
    const interval = opts.scrapeInterval ?? '2s';
    const config = {
      global: { scrape_interval: interval, evaluation_interval: opts.evaluationInterval ?? '2s' },
      rule_files: opts.ruleGroups?.length ? [join(dir, 'rules.yaml')] : [],
      scrape_configs: [
        ...(opts.serviceMonitors ?? []).flatMap((sm, i) => serviceMonitorScrapeConfigs(sm, join(dir, `targets-${i}.json`), interval)),
        ...(opts.staticTargets ?? []).map((t, i) => ({
          job_name: `static/${i}`,
          metrics_path: t.path ?? '/metrics',
          static_configs: [{ targets: [t.address], labels: t.labels }],
        })),
      ],
    };
    writeFileSync(join(dir, 'prometheus.yaml'), stringify(config));
    if (opts.ruleGroups?.length) writeFileSync(join(dir, 'rules.yaml'), stringify({ groups: opts.ruleGroups }));
    const discovery = startDiscovery(opts, dir);
    await discovery.once();
    const logFile = join(dir, 'prometheus.log');
    const logFd = openSync(logFile, 'a');
    const url = `http://${layout.apiHost}:${port}`;
    const argv = inNetns(layout, [
      'prometheus',
      `--config.file=${join(dir, 'prometheus.yaml')}`,
      `--storage.tsdb.path=${join(dir, 'data')}`,
      `--web.listen-address=${layout.apiHost}:${port}`,
      `--web.external-url=${url}/`,
      '--storage.tsdb.retention.time=1d',
      '--log.level=info',
    ]);
    const child: ChildProcess = spawn(argv[0]!, argv.slice(1), { detached: true, stdio: ['ignore', logFd, logFd] });
    child.unref();
    const tail = (n = 20) => {
      try {
        return readFileSync(logFile, 'utf8').trim().split('\n').slice(-n).join('\n');
      } catch {
        return '(no log)';
      }
    };
    const deadline = Date.now() + 60_000;
    let ready = false;
    while (Date.now() < deadline && child.exitCode === null) {
      ready = await fetch(`${url}/-/ready`).then((r) => r.ok, () => false);
      if (ready) break;
      await sleep(200);
    }
    if (!ready) {
      lastError = tail();
      child.kill('SIGKILL');
      discovery.stop();
      if (/address already in use/.test(lastError)) continue;
      throw new Error(`Prometheus did not become ready on ${url}; its log:\n${lastError}`);
    }
    const api = async <T>(path: string): Promise<T> => {
      const res = await fetch(`${url}${path}`);
      const body = (await res.json()) as { status: string; data: T; error?: string };
      if (body.status !== 'success') throw new Error(`Prometheus ${path}: ${body.error ?? res.status}`);
      return body.data;
    };
    return {
      url,
      dir,
      pid: child.pid!,
      query: async (expr) => (await api<{ result: PromSample[] }>(`/api/v1/query?query=${encodeURIComponent(expr)}`)).result,
      alerts: async () => (await api<{ alerts: PromAlert[] }>('/api/v1/alerts')).alerts,
      targets: async () => (await api<{ activeTargets: Array<{ labels: Record<string, string>; health: string; lastError: string; scrapeUrl: string }> }>('/api/v1/targets?state=active')).activeTargets,
      logTail: tail,
      stop: async () => {
        discovery.stop();
        if (child.exitCode !== null) return;
        child.kill('SIGTERM');
        for (let i = 0; i < 100 && child.exitCode === null; i++) await sleep(100);
        if (child.exitCode === null) child.kill('SIGKILL');
      },
    };
  }
  throw new Error(`no free port for Prometheus on ${layout.apiHost}; last log:\n${lastError}`);
}

/** Rewrites each ServiceMonitor's targets file every second (atomically: Prometheus watches the file). */
function startDiscovery(opts: PrometheusOptions, dir: string): { once: () => Promise<void>; stop: () => void } {
  const monitors = opts.serviceMonitors ?? [];
  const kc = loadKubeConfig(opts.kubeconfig);
  const last = new Map<number, string>();
  const once = async () => {
    for (const [i, sm] of monitors.entries()) {
      const namespaces = sm.spec.namespaceSelector?.matchNames ?? [sm.metadata.namespace ?? 'default'];
      const text = JSON.stringify(await discoverEndpointSlices(kc, namespaces), null, 1);
      if (last.get(i) === text) continue;
      const file = join(dir, `targets-${i}.json`);
      writeFileSync(`${file}.tmp`, text);
      renameSync(`${file}.tmp`, file);
      last.set(i, text);
    }
  };
  let stopped = false;
  const loop = async () => {
    while (!stopped) {
      await sleep(1000);
      if (!stopped) await once().catch(() => undefined); // the apiserver restarting: keep the last targets, as kubernetes_sd does
    }
  };
  if (monitors.length) void loop();
  return { once, stop: () => void (stopped = true) };
}

/** Prometheus label names: every character outside [a-zA-Z0-9_] becomes `_` (as the operator does for selector labels). */
function sanitize(name: string): string {
  return name.replace(/[^a-zA-Z0-9_]/g, '_');
}

function escapeRegex(s: string): string {
  return s.replace(/[.*+?^${}()|[\]\\]/g, '\\$&');
}

/** A ServiceMonitor relabeling (camelCase) as a Prometheus relabel_config (snake_case). */
function operatorRelabel(r: unknown): Record<string, unknown> {
  return Object.fromEntries(Object.entries(r as Record<string, unknown>).map(([k, v]) => [k.replace(/[A-Z]/g, (c) => `_${c.toLowerCase()}`), v]));
}

function seconds(d: string): number {
  let total = 0;
  for (const m of d.matchAll(/(\d+)(ms|s|m|h)/g)) total += Number(m[1]) * { ms: 0.001, s: 1, m: 60, h: 3600 }[m[2] as 'ms' | 's' | 'm' | 'h'];
  return total;
}

/** Prometheus refuses a scrape timeout longer than the interval. */
function minDuration(a: string, b: string): string {
  return seconds(a) <= seconds(b) ? a : b;
}
