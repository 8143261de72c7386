import { X509Certificate } from 'node:crypto';
import { readFileSync, statSync } from 'node:fs';
import { isIP } from 'node:net';
import { parseArgs, type ParseArgsOptionsConfig } from 'node:util';
import { ConfigError, cyclePath, errorMessage, MAX_DURATION_MS, parseDuration, type LogFormat, type LogLevel } from '@kube-node-ready/core';
import { parse as parseYaml } from 'yaml';
import * as z from 'zod/mini';

/**
 * The worker configuration: a YAML file (--config), then environment variables, then flags
 * (flags win), validated once by one schema. This module is the only reader of the environment.
 * docs/worker.md documents every option; config.test.ts pins every default.
 */

export const CHECK_NAMES = ['dns', 'api', 'tcp', 'service', 'podnet', 'mtu', 'egress', 'http'] as const;
export type CheckName = (typeof CHECK_NAMES)[number];

export interface HostPort {
  host: string;
  port: number;
}

export interface ServiceRef {
  namespace: string;
  name: string;
}

/** HTTP status codes from `from` to `to`, both included. */
export interface StatusRange {
  from: number;
  to: number;
}

/** One URL of the http check, as the check uses it. */
export interface HttpTarget {
  /** Normalised (`new URL(...).href`, no fragment). */
  url: string;
  /** The answers that pass. */
  expectStatus: StatusRange[];
  /** PEM certificates that alone are trusted for this URL; absent: Node.js's built-in CA list. */
  ca?: string;
  /** Where `ca` came from: `ca` (inline) or the `caFile` path. */
  caFrom?: string;
  /** This URL's own timeout; absent: the check's. */
  timeout?: number;
}

export const DEFAULTS = {
  serviceAccountDir: '/var/run/secrets/kubernetes.io/serviceaccount',
  resolvConf: '/etc/resolv.conf',
  terminationLog: '/dev/termination-log',
  dnsPort: 53,
  /** Where the pod's default route and interface MTU are read (the pod's own network namespace). */
  procNetRoute: '/proc/net/route',
  procNetIpv6Route: '/proc/net/ipv6_route',
  sysClassNet: '/sys/class/net',
  /** Interface indexes of this network namespace (sysfs can belong to another one, see net/pod-link.ts). */
  procNetIgmp: '/proc/net/igmp',
  /** 0 (the default): UDP datagrams that fit the path MTU are sent with don't-fragment. */
  noPmtuDisc: '/proc/sys/net/ipv4/ip_no_pmtu_disc',
} as const;

/** What a latency over a check's `slowAfter` does: a warning (logged, in the summary) or a failure. */
export const SLOW_ACTIONS = ['warn', 'fail'] as const;
export type SlowAction = (typeof SLOW_ACTIONS)[number];

const LOG_LEVELS = ['trace', 'debug', 'info', 'warn', 'error', 'fatal', 'silent'] as const satisfies readonly LogLevel[];
const LOG_FORMATS = ['json', 'pretty'] as const satisfies readonly LogFormat[];

// ---------------------------------------------------------------------------------------------
// Field types. Each says what it expects in its own error message.

const DNS_NAME = /^(?=.{1,253}\.?$)([A-Za-z0-9_]([-A-Za-z0-9_]{0,61}[A-Za-z0-9_])?)(\.[A-Za-z0-9_]([-A-Za-z0-9_]{0,61}[A-Za-z0-9_])?)*\.?$/;
const DNS1123_LABEL = /^[a-z0-9]([-a-z0-9]{0,61}[a-z0-9])?$/;

function text(expected: string) {
  return z.string({ error: `expected ${expected}` });
}

function parsed<T>(expected: string, parse: (input: string) => T | undefined) {
  return z.pipe(
    text(expected),
    z.transform((input: string, ctx) => {
      const value = parse(input.trim());
      if (value === undefined) {
        ctx.issues.push({ code: 'custom', message: `expected ${expected}`, input });
        return z.NEVER;
      }
      return value;
    }),
  );
}

const DURATION = 'a duration greater than 0 like "500ms", "5s" or "1m"';
const duration = () =>
  z.pipe(
    text(DURATION),
    z.transform((input: string, ctx) => {
      let ms: number | undefined;
      try {
        ms = parseDuration(input.trim());
      } catch {
        ms = undefined;
      }
      if (ms === undefined || ms <= 0) {
        ctx.issues.push({ code: 'custom', message: `expected ${DURATION}`, input });
        return z.NEVER;
      }
      if (ms > MAX_DURATION_MS) {
        ctx.issues.push({ code: 'custom', message: 'expected a duration of at most 596h (the longest timer Node.js can set)', input });
        return z.NEVER;
      }
      return ms;
    }),
  );

const dnsName = () =>
  parsed('a DNS name such as "kubernetes.default.svc.cluster.local"', (input) =>
    DNS_NAME.test(input) ? input.replace(/\.$/, '').toLowerCase() : undefined,
  );

const NAMESERVER = 'an IP address with an optional port: "10.96.0.10", "10.96.0.10:53", "[fd00::a]:53"';
const nameserver = () =>
  parsed(NAMESERVER, (input) => {
    const hp = parseHostPort(input, DEFAULTS.dnsPort);
    return hp && isIP(hp.host) ? hp : undefined;
  });

const TCP_TARGET = 'HOST:PORT such as "10.0.0.5:443", "db.example.com:5432" or "[fd00::5]:443"';
const tcpTarget = () =>
  parsed(TCP_TARGET, (input) => {
    const hp = parseHostPort(input, undefined);
    return hp && (isIP(hp.host) || DNS_NAME.test(hp.host)) ? hp : undefined;
  });

const SERVICE_REF = 'NAMESPACE/NAME such as "default/kubernetes"';
const serviceRef = () =>
  parsed(SERVICE_REF, (input): ServiceRef | undefined => {
    const [namespace, name, ...rest] = input.split('/');
    if (rest.length > 0 || !namespace || !name || !DNS1123_LABEL.test(namespace) || !DNS1123_LABEL.test(name)) return undefined;
    return { namespace, name };
  });

/** A whole number in [min, max]; YAML numbers and flag strings alike. */
const wholeNumber = (min: number, max: number) => {
  const expected = `a whole number from ${min} to ${max}`;
  return z.pipe(
    z.union([z.number({ error: `expected ${expected}` }), text(expected)]),
    z.transform((input: number | string, ctx) => {
      const n = typeof input === 'number' ? input : /^\s*\d+\s*$/.test(input) ? Number(input) : NaN;
      if (!Number.isInteger(n) || n < min || n > max) {
        ctx.issues.push({ code: 'custom', message: `expected ${expected}`, input });
        return z.NEVER;
      }
      return n;
    }),
  );
};

const HOST_PORT = 'an IP address and port such as "10.0.0.5:6443" or "[fd00::5]:6443"';
const ipPort = () =>
  parsed(HOST_PORT, (input) => {
    const hp = parseHostPort(input, undefined);
    return hp && isIP(hp.host) ? hp : undefined;
  });

const HTTP_URL = 'an http:// or https:// URL without user:password@, such as "https://registry.internal/v2/"';
const httpUrl = () =>
  parsed(HTTP_URL, (input) => {
    let url: URL;
    try {
      url = new URL(input);
    } catch {
      return undefined;
    }
    if ((url.protocol !== 'http:' && url.protocol !== 'https:') || url.username !== '' || url.password !== '') return undefined;
    url.hash = '';
    return url.href;
  });

const STATUS = 'HTTP status codes (100-599) and ranges such as "200-399", "200-299,401" or [200, 401]';
/** "200-399", "200-299, 401", 401, or a list of codes and ranges: the ranges, as written. */
const statusRanges = () =>
  z.pipe(
    z.union([z.number({ error: `expected ${STATUS}` }), text(STATUS), list(z.union([z.number({ error: `expected ${STATUS}` }), text(STATUS)]))]),
    z.transform((input: number | string | Array<number | string>, ctx) => {
      const items = (Array.isArray(input) ? input : [input]).flatMap((item) => (typeof item === 'number' ? [String(item)] : item.split(',')));
      const ranges = items.map((item) => parseStatusRange(item.trim()));
      if (ranges.length === 0 || ranges.some((r) => r === undefined)) {
        ctx.issues.push({ code: 'custom', message: `expected ${STATUS}`, input });
        return z.NEVER;
      }
      return ranges as StatusRange[];
    }),
  );

function parseStatusRange(item: string): StatusRange | undefined {
  const m = /^(\d{3})(?:\s*-\s*(\d{3}))?$/.exec(item);
  if (!m) return undefined;
  const from = Number(m[1]);
  const to = m[2] === undefined ? from : Number(m[2]);
  return from >= 100 && to <= 599 && from <= to ? { from, to } : undefined;
}

/** "200-299, 401". */
export function formatStatusRanges(ranges: readonly StatusRange[]): string {
  return ranges.map((r) => (r.from === r.to ? String(r.from) : `${r.from}-${r.to}`)).join(', ');
}

/** Largest CA bundle read from a file: a bundle of every public CA is about 250 KB. */
const MAX_CA_FILE_BYTES = 1024 * 1024;
const PEM = 'PEM certificates ("-----BEGIN CERTIFICATE-----" ...)';

/** Why `text` is not a usable bundle of PEM certificates, or undefined when it is. */
function pemProblem(text: string): string | undefined {
  const blocks = text.match(/-----BEGIN CERTIFICATE-----[\s\S]*?-----END CERTIFICATE-----/g) ?? [];
  if (blocks.length === 0) return `expected ${PEM}`;
  for (const [i, block] of blocks.entries()) {
    try {
      new X509Certificate(block);
    } catch (err) {
      return `certificate ${i + 1} of ${blocks.length} is not a valid PEM certificate (${errorMessage(err)})`;
    }
  }
  return undefined;
}

const caBundle = () =>
  z.pipe(
    text(PEM),
    z.transform((input: string, ctx) => {
      const problem = pemProblem(input);
      if (problem === undefined) return input;
      ctx.issues.push({ code: 'custom', message: problem, input: undefined });
      return z.NEVER;
    }),
  );

/** A CA bundle file, read (once) at start-up. */
const caFile = () =>
  z.pipe(
    text('the path of a file holding PEM certificates').check(z.minLength(1, { error: 'expected the path of a file holding PEM certificates' })),
    z.transform((path: string, ctx) => {
      let content: string | undefined;
      let problem: string | undefined;
      try {
        const stat = statSync(path);
        if (!stat.isFile()) problem = `cannot read ${path}: not a regular file`;
        else if (stat.size > MAX_CA_FILE_BYTES) problem = `${path} is larger than ${MAX_CA_FILE_BYTES} bytes: not a CA bundle`;
        else content = readFileSync(path, 'utf8');
      } catch (err) {
        problem = `cannot read ${path}: ${errorMessage(err)}`;
      }
      if (content !== undefined) {
        const pem = pemProblem(content);
        if (pem !== undefined) problem = `${path}: ${pem}`;
      }
      if (problem === undefined) return { path, pem: content as string };
      ctx.issues.push({ code: 'custom', message: problem, input: undefined });
      return z.NEVER;
    }),
  );

function oneOf<T extends readonly [string, ...string[]]>(values: T) {
  return z.enum(values, { error: `expected one of ${values.join(', ')}` });
}

function list<T extends z.ZodMiniType>(item: T) {
  return z.array(item, { error: 'expected a list' });
}

/** Parses "host", "host:port", "[v6]", "[v6]:port" or a bare IPv6 literal. */
export function parseHostPort(input: string, defaultPort: number | undefined): HostPort | undefined {
  let host: string;
  let portText: string | undefined;
  const bracketed = /^\[([^\]]+)\](?::(\d+))?$/.exec(input);
  if (bracketed) {
    host = bracketed[1] as string;
    portText = bracketed[2];
    if (isIP(host) !== 6) return undefined;
  } else if (isIP(input) === 6) {
    host = input;
  } else {
    const parts = input.split(':');
    if (parts.length > 2) return undefined;
    host = parts[0] as string;
    portText = parts[1];
  }
  if (host === '') return undefined;
  const port = portText === undefined ? defaultPort : Number(portText);
  if (port === undefined || !Number.isInteger(port) || port < 1 || port > 65535) return undefined;
  if (portText !== undefined && !/^\d+$/.test(portText)) return undefined;
  return { host, port };
}

export function formatHostPort({ host, port }: HostPort): string {
  return isIP(host) === 6 ? `[${host}]:${port}` : `${host}:${port}`;
}

export function formatServiceRef(ref: ServiceRef): string {
  return `${ref.namespace}/${ref.name}`;
}

// ---------------------------------------------------------------------------------------------
// The schema of the worker section (docs/worker.md, "Configuration file"). zod/mini keeps the
// worker's start-up memory low (docs/worker.md, "Start-up cost").

const checkTimeout = () => z.optional(duration());
const slowAfter = () => z.optional(duration());

const httpTargetFields = z.strictObject({
  url: httpUrl(),
  expectStatus: z.prefault(statusRanges(), '200-399'),
  /** Inline PEM; with ca or caFile, only these certificates are trusted for this URL. */
  ca: z.optional(caBundle()),
  caFile: z.optional(caFile()),
  timeout: z.optional(duration()),
});

const httpTarget = () =>
  z.pipe(
    httpTargetFields,
    z.transform((t: z.output<typeof httpTargetFields>, ctx): HttpTarget => {
      if (t.ca !== undefined && t.caFile !== undefined) {
        ctx.issues.push({ code: 'custom', message: 'set ca (inline PEM) or caFile (a path), not both', input: undefined, path: ['caFile'] });
        return z.NEVER;
      }
      const ca = t.caFile !== undefined ? { ca: t.caFile.pem, caFrom: t.caFile.path } : t.ca !== undefined ? { ca: t.ca, caFrom: 'ca' } : {};
      return { url: t.url, expectStatus: t.expectStatus, ...ca, ...(t.timeout !== undefined ? { timeout: t.timeout } : {}) };
    }),
  );

const sections = {
  logging: z.strictObject({
    format: z._default(oneOf(LOG_FORMATS), 'json'),
    level: z._default(oneOf(LOG_LEVELS), 'info'),
  }),
  dns: z.strictObject({
    /** Empty: the nameservers of resolv.conf. */
    servers: z._default(list(nameserver()), []),
    /** Absent: kubernetes.default.svc.<clusterDomain>. */
    names: z.optional(list(dnsName())),
    externalNames: z._default(list(dnsName()), []),
    timeout: checkTimeout(),
    slowAfter: z.prefault(duration(), '1s'),
  }),
  api: z.strictObject({
    /** API server addresses to use when the `kubernetes` Service does not connect (kube-proxy broken). */
    endpoints: z._default(list(ipPort()), []),
    timeout: checkTimeout(),
    slowAfter: slowAfter(),
  }),
  tcp: z.strictObject({
    targets: z._default(list(tcpTarget()), []),
    timeout: checkTimeout(),
    slowAfter: slowAfter(),
  }),
  service: z.strictObject({
    services: z.prefault(list(serviceRef()), ['default/kubernetes']),
    timeout: checkTimeout(),
  }),
  podnet: z.strictObject({
    mode: z._default(oneOf(['any', 'all'] as const), 'any'),
    timeout: checkTimeout(),
    slowAfter: z.prefault(duration(), '1s'),
  }),
  mtu: z.strictObject({
    /** Absent: the MTU of the pod's default-route interface. */
    mtu: z.optional(wholeNumber(576, 65535)),
    /** A name whose answer is larger than 1500 bytes; absent: large answers are not tested. */
    largeName: z.optional(dnsName()),
    timeout: checkTimeout(),
  }),
  egress: z.strictObject({
    port: z._default(wholeNumber(1, 65535), 443),
    tls: z._default(z.boolean({ error: 'expected true or false' }), true),
    timeout: checkTimeout(),
    slowAfter: slowAfter(),
  }),
  http: z.strictObject({
    /** URLs reached from this pod; none (the default): the check contacts nothing and passes. */
    targets: z._default(list(httpTarget()), []),
    timeout: checkTimeout(),
    slowAfter: slowAfter(),
  }),
};

const rootSchema = z.strictObject(
  {
    enabled: z._default(list(oneOf(CHECK_NAMES)).check(z.minLength(1, { error: `expected at least one of ${CHECK_NAMES.join(', ')}` })), [
      ...CHECK_NAMES,
    ]),
    timeout: z.prefault(duration(), '30s'),
    checkTimeout: z.prefault(duration(), '5s'),
    onSlow: z._default(oneOf(SLOW_ACTIONS), 'warn'),
    clusterDomain: z.prefault(dnsName(), 'cluster.local'),
    dnsService: z.prefault(serviceRef(), 'kube-system/kube-dns'),
    terminationLog: z._default(text('a file path').check(z.minLength(1, { error: 'expected a file path' })), DEFAULTS.terminationLog),
    logging: z.prefault(sections.logging, {}),
    dns: z.prefault(sections.dns, {}),
    api: z.prefault(sections.api, {}),
    tcp: z.prefault(sections.tcp, {}),
    service: z.prefault(sections.service, {}),
    podnet: z.prefault(sections.podnet, {}),
    mtu: z.prefault(sections.mtu, {}),
    egress: z.prefault(sections.egress, {}),
    http: z.prefault(sections.http, {}),
  },
  { error: 'expected a mapping' },
);

/** Allowed keys per mapping, for "unknown key" messages (list items as `[]`). */
const KEYS: Record<string, string[]> = {
  '': Object.keys(rootSchema.shape),
  ...Object.fromEntries(Object.entries(sections).map(([name, schema]) => [name, Object.keys(schema.shape)])),
  'http.targets.[]': Object.keys(httpTargetFields.shape),
};

/**
 * The worker section, with defaults. Input: what the YAML file (or `worker.checks` of the
 * controller's file) holds; output: resolved settings (durations in ms, addresses parsed, the
 * default DNS name filled in, one timeout per check).
 */
export const workerConfigSchema = z.pipe(
  rootSchema,
  z.transform((c: z.output<typeof rootSchema>) => {
    const { dns, api, tcp, service, podnet, mtu, egress, http, ...rest } = c;
    return {
      ...rest,
      enabled: [...new Set(c.enabled)],
      dns: { servers: dns.servers, names: dns.names ?? [`kubernetes.default.svc.${c.clusterDomain}`], externalNames: dns.externalNames },
      api: { endpoints: api.endpoints },
      tcp: { targets: tcp.targets },
      service: { services: uniqueRefs([...service.services, c.dnsService]) },
      podnet: { mode: podnet.mode },
      mtu: { ...(mtu.mtu !== undefined ? { mtu: mtu.mtu } : {}), ...(mtu.largeName !== undefined ? { largeName: mtu.largeName } : {}) },
      egress: { port: egress.port, tls: egress.tls },
      http: { targets: http.targets },
      checkTimeouts: {
        dns: dns.timeout ?? c.checkTimeout,
        api: api.timeout ?? c.checkTimeout,
        tcp: tcp.timeout ?? c.checkTimeout,
        service: service.timeout ?? c.checkTimeout,
        podnet: podnet.timeout ?? c.checkTimeout,
        mtu: mtu.timeout ?? c.checkTimeout,
        egress: egress.timeout ?? c.checkTimeout,
        http: http.timeout ?? c.checkTimeout,
      } satisfies Record<CheckName, number>,
      /** Latency over which a measured step is slow (warning or failure by onSlow); absent: not judged. */
      slowAfter: {
        dns: dns.slowAfter,
        api: api.slowAfter,
        tcp: tcp.slowAfter,
        service: undefined,
        podnet: podnet.slowAfter,
        mtu: undefined,
        egress: egress.slowAfter,
        http: http.slowAfter,
      } satisfies Record<CheckName, number | undefined>,
    };
  }),
);

export type WorkerSettings = z.output<typeof workerConfigSchema>;
export type WorkerSettingsInput = z.input<typeof workerConfigSchema>;

function uniqueRefs(refs: ServiceRef[]): ServiceRef[] {
  const seen = new Map(refs.map((r) => [formatServiceRef(r), r]));
  return [...seen.values()];
}

// ---------------------------------------------------------------------------------------------
// The pod's environment: what the kubelet (or the sandbox standing in for it) provides.

export interface PodEnvironment {
  /** Holds token and ca.crt. */
  serviceAccountDir: string;
  resolvConf: string;
  /** KUBERNETES_SERVICE_HOST/PORT; absent outside a cluster. */
  apiServer?: HostPort;
  nodeName?: string;
  podName?: string;
  podNamespace?: string;
}

export interface WorkerConfig extends WorkerSettings {
  pod: PodEnvironment;
  /** The file the settings came from, if any (for logs). */
  configFile?: string;
}

export type CommandLine =
  | { kind: 'run'; config: WorkerConfig }
  | { kind: 'help' }
  | { kind: 'version' };

// ---------------------------------------------------------------------------------------------
// Flags. Each maps to one key of the worker section; list flags take comma-separated values and
// may be repeated.

interface FlagSpec {
  path: string[];
  list?: boolean;
  /** Each value of the list becomes a mapping with this one key (`--http-urls U` is `[{url: U}]`). */
  itemKey?: string;
}

export const FLAGS: Record<string, FlagSpec> = {
  checks: { path: ['enabled'], list: true },
  'dns-server': { path: ['dns', 'servers'], list: true },
  'dns-names': { path: ['dns', 'names'], list: true },
  'external-dns-names': { path: ['dns', 'externalNames'], list: true },
  'tcp-targets': { path: ['tcp', 'targets'], list: true },
  'check-timeout': { path: ['checkTimeout'] },
  timeout: { path: ['timeout'] },
  'termination-log': { path: ['terminationLog'] },
  'log-format': { path: ['logging', 'format'] },
  'log-level': { path: ['logging', 'level'] },
  'cluster-domain': { path: ['clusterDomain'] },
  service: { path: ['service', 'services'], list: true },
  'dns-service': { path: ['dnsService'] },
  'podnet-mode': { path: ['podnet', 'mode'] },
  'on-slow': { path: ['onSlow'] },
  'dns-slow-after': { path: ['dns', 'slowAfter'] },
  'api-endpoints': { path: ['api', 'endpoints'], list: true },
  mtu: { path: ['mtu', 'mtu'] },
  'large-dns-name': { path: ['mtu', 'largeName'] },
  'egress-port': { path: ['egress', 'port'] },
  'http-urls': { path: ['http', 'targets'], list: true, itemKey: 'url' },
};

const ENV_OVERRIDES: Record<string, string[]> = {
  KNR_TERMINATION_LOG: ['terminationLog'],
};

/**
 * Parses `kube-node-ready worker` arguments and the environment into a configuration.
 * Throws ConfigError naming the flag, variable or key that is wrong and what it allows.
 */
export function loadWorkerConfig(argv: readonly string[], env: NodeJS.ProcessEnv): CommandLine {
  const flags = parseFlags(argv);
  if (flags.help) return { kind: 'help' };
  if (flags.version) return { kind: 'version' };

  const layers = new Layers();
  if (flags.config !== undefined) {
    const { section, prefix } = readConfigFile(flags.config);
    layers.add(section, (path) => `${formatPath([...prefix, ...path])} (in ${flags.config})`);
  }
  for (const [name, path] of Object.entries(ENV_OVERRIDES)) {
    const value = nonEmpty(env[name]);
    if (value !== undefined) layers.add(nest(path, value), () => name);
  }
  for (const [name, value] of Object.entries(flags.values)) {
    const spec = FLAGS[name] as FlagSpec;
    const key = spec.itemKey;
    layers.add(nest(spec.path, key !== undefined && Array.isArray(value) ? value.map((v) => ({ [key]: v })) : value), () => `--${name}`);
  }

  const result = workerConfigSchema.safeParse(expandNodeRefs(layers.merged, env), { reportInput: true });
  if (!result.success) throw new ConfigError(formatIssues(result.error.issues, layers));
  return {
    kind: 'run',
    config: { ...result.data, pod: podEnvironment(env), ...(flags.config !== undefined ? { configFile: flags.config } : {}) },
  };
}

/** What `$(NAME)` in an http target's URL may name: the node's address and name, from the pod's environment. */
const NODE_REFS = ['HOST_IP', 'NODE_NAME'] as const;

/**
 * `$(HOST_IP)` and `$(NODE_NAME)` in http.targets[].url replaced by the values the worker pod has
 * (status.hostIP and spec.nodeName, through the downward API), as Kubernetes expands them in a
 * container's arguments: a node-local agent's health endpoint, such as a CNI agent's, is
 * `http://$(HOST_IP):9099/readiness` on every node. Any other `$(...)` is refused.
 */
function expandNodeRefs(merged: unknown, env: NodeJS.ProcessEnv): unknown {
  if (!isMapping(merged) || !isMapping(merged.http) || !Array.isArray(merged.http.targets)) return merged;
  const targets = merged.http.targets.map((t: unknown) => {
    if (!isMapping(t) || typeof t.url !== 'string' || !t.url.includes('$(')) return t;
    let url = t.url;
    for (const name of NODE_REFS) {
      if (!url.includes(`$(${name})`)) continue;
      const value = nonEmpty(env[name]);
      if (value === undefined) throw new ConfigError(`the URL ${t.url} names $(${name}), but ${name} is not set (the worker pod sets it from the downward API)`, 'http.targets[].url');
      url = url.split(`$(${name})`).join(value.includes(':') ? `[${value}]` : value);
    }
    const unknown = /\$\(([^)]*)\)/.exec(url);
    if (unknown) throw new ConfigError(`the URL ${t.url} names $(${unknown[1]}): only ${NODE_REFS.map((n) => `$(${n})`).join(' and ')} are known`, 'http.targets[].url');
    return { ...t, url };
  });
  return { ...merged, http: { ...merged.http, targets } };
}

function parseFlags(argv: readonly string[]): {
  help: boolean;
  version: boolean;
  config?: string;
  values: Record<string, string | string[]>;
} {
  const options = {
    help: { type: 'boolean', short: 'h' },
    version: { type: 'boolean' },
    config: { type: 'string' },
    ...Object.fromEntries(Object.entries(FLAGS).map(([name, spec]) => [name, { type: 'string', multiple: spec.list === true }])),
  } as const satisfies ParseArgsOptionsConfig;
  let values: Record<string, string | boolean | (string | boolean)[] | undefined>;
  try {
    ({ values } = parseArgs({ args: [...argv], options, strict: true, allowPositionals: false }));
  } catch (err) {
    throw flagError(err);
  }
  const out: Record<string, string | string[]> = {};
  for (const [name, spec] of Object.entries(FLAGS)) {
    const value = values[name];
    if (value === undefined) continue;
    if (spec.list) {
      out[name] = (value as string[]).flatMap((v) => v.split(',')).map((v) => v.trim()).filter((v) => v !== '');
    } else {
      out[name] = value as string;
    }
  }
  return {
    help: values.help === true,
    version: values.version === true,
    ...(typeof values.config === 'string' ? { config: values.config } : {}),
    values: out,
  };
}

function flagError(err: unknown): ConfigError {
  const message = errorMessage(err);
  const code = (err as { code?: string }).code;
  const flag = /'(-[^' ]+)/.exec(message)?.[1];
  const allowed = `allowed flags: ${['--config', ...Object.keys(FLAGS).map((f) => `--${f}`), '--help', '--version'].join(', ')}`;
  switch (code) {
    case 'ERR_PARSE_ARGS_UNKNOWN_OPTION':
      return new ConfigError(`unknown flag; ${allowed}`, flag);
    case 'ERR_PARSE_ARGS_UNEXPECTED_POSITIONAL':
      return new ConfigError(`unexpected argument ${/'([^']*)'/.exec(message)?.[1] ?? ''}; every option is a --flag (see --help)`.trim());
    case 'ERR_PARSE_ARGS_INVALID_OPTION_VALUE':
      return new ConfigError(`needs a value (write --flag VALUE or --flag=VALUE)`, flag);
    default:
      return new ConfigError(`${message} (see --help)`);
  }
}

/** The worker section of a config file: the file itself, or `worker.checks` of a controller config. */
function readConfigFile(path: string): { section: unknown; prefix: string[] } {
  let content: string;
  try {
    content = readFileSync(path, 'utf8');
  } catch (err) {
    throw new ConfigError(`cannot read ${path}: ${errorMessage(err)}`, '--config');
  }
  let doc: unknown;
  try {
    // YAML 1.2 core types only, whatever the file declares: no Date, Set, Map or binary values
    // from tags (!!binary, !!omap, %YAML 1.1 timestamps), which would pass for mappings.
    doc = parseYaml(content, { schema: 'core', resolveKnownTags: false });
  } catch (err) {
    throw new ConfigError(`${path} is not valid YAML: ${errorMessage(err)}`, '--config');
  }
  if (doc === null || doc === undefined) return { section: {}, prefix: [] };
  if (!isMapping(doc)) throw new ConfigError(`${path} must hold a mapping (the worker section, or a controller config with worker.checks)`, '--config');
  const cycle = cyclePath(doc);
  if (cycle) {
    throw new ConfigError(
      `${path}: ${formatPath(cycle)} refers back to a mapping or list that contains it (an alias inside its own anchor); aliases must not form a cycle`,
      '--config',
    );
  }
  if (!('worker' in doc)) return { section: doc, prefix: [] };
  const worker = doc.worker;
  if (worker === null || worker === undefined) return { section: {}, prefix: ['worker', 'checks'] };
  if (!isMapping(worker)) throw new ConfigError(`expected a mapping (in ${path})`, 'worker');
  const checks = worker.checks ?? {};
  if (!isMapping(checks)) throw new ConfigError(`expected a mapping with the worker settings (in ${path})`, 'worker.checks');
  return { section: checks, prefix: ['worker', 'checks'] };
}

function podEnvironment(env: NodeJS.ProcessEnv): PodEnvironment {
  const pod: PodEnvironment = {
    serviceAccountDir: nonEmpty(env.KNR_SERVICEACCOUNT_DIR) ?? DEFAULTS.serviceAccountDir,
    resolvConf: nonEmpty(env.KNR_RESOLV_CONF) ?? DEFAULTS.resolvConf,
  };
  const host = nonEmpty(env.KUBERNETES_SERVICE_HOST);
  if (host !== undefined) {
    const portText = nonEmpty(env.KUBERNETES_SERVICE_PORT) ?? '443';
    const port = Number(portText);
    if (!/^\d+$/.test(portText) || port < 1 || port > 65535) {
      throw new ConfigError(`expected a port number 1-65535, got ${JSON.stringify(portText)}`, 'KUBERNETES_SERVICE_PORT');
    }
    pod.apiServer = { host: host.replace(/^\[(.*)\]$/, '$1'), port };
  }
  const nodeName = nonEmpty(env.NODE_NAME);
  const podName = nonEmpty(env.POD_NAME);
  const podNamespace = nonEmpty(env.POD_NAMESPACE);
  if (nodeName !== undefined) pod.nodeName = nodeName;
  if (podName !== undefined) pod.podName = podName;
  if (podNamespace !== undefined) pod.podNamespace = podNamespace;
  return pod;
}

// ---------------------------------------------------------------------------------------------
// Layers and error messages that name where a bad value came from.

type Labeler = (path: readonly PropertyKey[]) => string;

class Layers {
  merged: Record<string, unknown> = {};
  /** Innermost source per path prefix ("dns.servers" -> --dns-server), later layers win. */
  private readonly sources: Array<{ prefix: string[]; label: Labeler }> = [];

  add(section: unknown, label: Labeler): void {
    this.merged = merge(this.merged, section) as Record<string, unknown>;
    for (const prefix of leafPaths(section)) this.sources.unshift({ prefix, label });
  }

  labelFor(path: readonly PropertyKey[]): string {
    const keys = path.map(String);
    // The layer that set this value, or the mapping under which an unknown key sits.
    const source = this.sources.find((s) => s.prefix.every((part, i) => i >= keys.length || keys[i] === part));
    return source ? source.label(path) : formatPath(path) || '(top level)';
  }
}

function formatIssues(issues: readonly z.core.$ZodIssue[], layers: Layers): string {
  const lines = issues.flatMap((issue) => {
    if (issue.code === 'unrecognized_keys') {
      const allowed = KEYS[issue.path.map((p) => (typeof p === 'number' ? '[]' : String(p))).join('.')] ?? [];
      return issue.keys.map((key) => `${layers.labelFor([...issue.path, key])}: unknown key; allowed keys: ${allowed.join(', ')}`);
    }
    const input = issue.input;
    const got = input === undefined || typeof input === 'object' ? '' : `, got ${JSON.stringify(input)}`;
    return [`${layers.labelFor(issue.path)}: ${issue.message}${got}`];
  });
  return lines.length === 1 ? (lines[0] as string) : `invalid configuration:\n${lines.map((l) => `  - ${l}`).join('\n')}`;
}

/** ["dns", "servers", 1] -> "dns.servers[1]". */
function formatPath(path: readonly PropertyKey[]): string {
  return path.reduce<string>((out, p) => (typeof p === 'number' ? `${out}[${p}]` : out ? `${out}.${showKey(String(p))}` : showKey(String(p))), '');
}

/**
 * A key as messages write it: a plain key as it is, any other quoted and cut short, so that an
 * odd key (empty, with dots, newlines or a megabyte long) cannot break a message into lines.
 */
function showKey(key: string): string {
  if (key.length > 60) {
    const cut = key.slice(0, 59);
    return JSON.stringify(`${/[\ud800-\udbff]$/.test(cut) ? cut.slice(0, -1) : cut}…`);
  }
  return /^[A-Za-z0-9_-]+$/.test(key) ? key : JSON.stringify(key);
}

/** Paths of the values a layer sets: lists, scalars and empty mappings are leaves (they replace, never merge). */
function leafPaths(value: unknown, prefix: string[] = []): string[][] {
  if (!isMapping(value) || Object.keys(value).length === 0) return [prefix];
  return Object.entries(value).flatMap(([k, v]) => leafPaths(v, [...prefix, k]));
}

function merge(base: unknown, override: unknown): unknown {
  if (!isMapping(override) || !isMapping(base)) return override;
  const out: Record<string, unknown> = { ...base };
  for (const [key, value] of Object.entries(override)) {
    // defineProperty: a "__proto__" key stays an ordinary (and so unknown, rejected) key.
    Object.defineProperty(out, key, { value: Object.hasOwn(out, key) ? merge(out[key], value) : value, enumerable: true, writable: true, configurable: true });
  }
  return out;
}

function nest(path: readonly string[], value: unknown): Record<string, unknown> {
  return path.reduceRight<unknown>((inner, key) => ({ [key]: inner }), value) as Record<string, unknown>;
}

function isMapping(value: unknown): value is Record<string, unknown> {
  return typeof value === 'object' && value !== null && !Array.isArray(value);
}

function nonEmpty(value: string | undefined): string | undefined {
  return value === undefined || value.trim() === '' ? undefined : value.trim();
}

/**
 * Where the termination message goes when the configuration itself is unusable (best effort:
 * the --termination-log flag as written, else KNR_TERMINATION_LOG, else the default).
 */
export function fallbackTerminationLog(argv: readonly string[], env: NodeJS.ProcessEnv): string {
  for (const [i, arg] of argv.entries()) {
    if (arg.startsWith('--termination-log=')) return arg.slice('--termination-log='.length);
    if (arg === '--termination-log' && argv[i + 1] !== undefined) return argv[i + 1] as string;
  }
  return nonEmpty(env.KNR_TERMINATION_LOG) ?? DEFAULTS.terminationLog;
}
