import { mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { ConfigError } from '@kube-node-ready/core';
import { afterAll, describe, expect, it } from 'vitest';
import { loadWorkerConfig, parseHostPort, type WorkerConfig } from './config.js';
import { configOf } from './testing/harness.js';

const dir = mkdtempSync(join(tmpdir(), 'knr-config-'));
afterAll(() => rmSync(dir, { recursive: true, force: true }));
let files = 0;
function yamlFile(content: string): string {
  const path = join(dir, `worker-${files++}.yaml`);
  writeFileSync(path, content);
  return path;
}

function configError(argv: string[], env: NodeJS.ProcessEnv = {}): string {
  try {
    loadWorkerConfig(argv, env);
  } catch (err) {
    expect(err).toBeInstanceOf(ConfigError);
    return (err as Error).message;
  }
  throw new Error('expected a ConfigError');
}

describe('defaults', () => {
  it('pins every default', () => {
    const expected: WorkerConfig = {
      enabled: ['dns', 'api', 'tcp', 'service', 'podnet', 'mtu', 'egress'],
      timeout: 30_000,
      checkTimeout: 5_000,
      onSlow: 'warn',
      clusterDomain: 'cluster.local',
      dnsService: { namespace: 'kube-system', name: 'kube-dns' },
      terminationLog: '/dev/termination-log',
      logging: { format: 'json', level: 'info' },
      dns: { servers: [], names: ['kubernetes.default.svc.cluster.local'], externalNames: [] },
      api: { endpoints: [] },
      tcp: { targets: [] },
      service: {
        services: [
          { namespace: 'default', name: 'kubernetes' },
          { namespace: 'kube-system', name: 'kube-dns' },
        ],
      },
      podnet: { mode: 'any' },
      mtu: {},
      egress: { port: 443, tls: true },
      checkTimeouts: { dns: 5_000, api: 5_000, tcp: 5_000, service: 5_000, podnet: 5_000, mtu: 5_000, egress: 5_000 },
      slowAfter: { dns: 1_000, api: undefined, tcp: undefined, service: undefined, podnet: 1_000, mtu: undefined, egress: undefined },
      pod: { serviceAccountDir: '/var/run/secrets/kubernetes.io/serviceaccount', resolvConf: '/etc/resolv.conf' },
    };
    expect(configOf([], {})).toEqual(expected);
  });

  it('follows --cluster-domain for the default DNS name', () => {
    expect(configOf(['--cluster-domain', 'corp.example']).dns.names).toEqual(['kubernetes.default.svc.corp.example']);
  });
});

describe('flags', () => {
  it('parses every flag', () => {
    const c = configOf([
      '--checks', 'dns,tcp',
      '--dns-server', '10.96.0.10',
      '--dns-server=[fd00::a]:5353,127.0.0.1:5353',
      '--dns-names', 'a.example,B.Example.',
      '--external-dns-names', 'registry.example.com',
      '--tcp-targets', 'db.example.com:5432,[fd00::5]:443',
      '--check-timeout', '2s',
      '--timeout', '1m30s',
      '--termination-log', '/tmp/term',
      '--log-format', 'pretty',
      '--log-level', 'debug',
      '--cluster-domain', 'corp.example',
      '--service', 'team/web',
      '--dns-service', 'kube-system/coredns',
      '--podnet-mode', 'all',
      '--on-slow', 'fail',
      '--dns-slow-after', '250ms',
      '--api-endpoints', '10.0.0.5:6443,[fd00::5]:6443',
      '--mtu', '1450',
      '--large-dns-name', 'large.kube-node-ready.svc.cluster.local',
      '--egress-port', '8443',
    ]);
    expect(c).toMatchObject({
      enabled: ['dns', 'tcp'],
      timeout: 90_000,
      checkTimeout: 2_000,
      clusterDomain: 'corp.example',
      dnsService: { namespace: 'kube-system', name: 'coredns' },
      terminationLog: '/tmp/term',
      logging: { format: 'pretty', level: 'debug' },
      dns: {
        servers: [
          { host: '10.96.0.10', port: 53 },
          { host: 'fd00::a', port: 5353 },
          { host: '127.0.0.1', port: 5353 },
        ],
        names: ['a.example', 'b.example'],
        externalNames: ['registry.example.com'],
      },
      tcp: { targets: [{ host: 'db.example.com', port: 5432 }, { host: 'fd00::5', port: 443 }] },
      service: { services: [{ namespace: 'team', name: 'web' }, { namespace: 'kube-system', name: 'coredns' }] },
      podnet: { mode: 'all' },
      onSlow: 'fail',
      api: { endpoints: [{ host: '10.0.0.5', port: 6443 }, { host: 'fd00::5', port: 6443 }] },
      mtu: { mtu: 1450, largeName: 'large.kube-node-ready.svc.cluster.local' },
      egress: { port: 8443, tls: true },
      checkTimeouts: { dns: 2_000, api: 2_000, tcp: 2_000, service: 2_000, podnet: 2_000, mtu: 2_000, egress: 2_000 },
      slowAfter: { dns: 250, podnet: 1_000 },
    });
  });

  it('recognises --help, -h and --version', () => {
    expect(loadWorkerConfig(['--help'], {})).toEqual({ kind: 'help' });
    expect(loadWorkerConfig(['-h'], {})).toEqual({ kind: 'help' });
    expect(loadWorkerConfig(['--version'], {})).toEqual({ kind: 'version' });
  });
});

describe('environment', () => {
  it('reads the pod environment', () => {
    const c = configOf([], {
      KUBERNETES_SERVICE_HOST: 'fd00::1',
      KUBERNETES_SERVICE_PORT: '6443',
      KNR_SERVICEACCOUNT_DIR: '/sa',
      KNR_RESOLV_CONF: '/r.conf',
      NODE_NAME: 'node-a',
      POD_NAME: 'worker-x',
      POD_NAMESPACE: 'kube-system',
    });
    expect(c.pod).toEqual({
      serviceAccountDir: '/sa',
      resolvConf: '/r.conf',
      apiServer: { host: 'fd00::1', port: 6443 },
      nodeName: 'node-a',
      podName: 'worker-x',
      podNamespace: 'kube-system',
    });
  });

  it('KNR_TERMINATION_LOG overrides the file, and the flag overrides both', () => {
    const file = yamlFile('terminationLog: /from/file\n');
    expect(configOf(['--config', file], { KNR_TERMINATION_LOG: '/from/env' }).terminationLog).toBe('/from/env');
    expect(configOf(['--config', file, '--termination-log', '/from/flag'], { KNR_TERMINATION_LOG: '/from/env' }).terminationLog).toBe('/from/flag');
  });
});

describe('config file', () => {
  const section = `
enabled: [dns, podnet]
timeout: 20s
checkTimeout: 3s
clusterDomain: corp.example
dns:
  servers: ["10.96.0.10:53"]
  externalNames: [registry.example.com]
  timeout: 1s
podnet:
  mode: all
`;

  it('accepts the worker section alone', () => {
    const c = configOf(['--config', yamlFile(section)]);
    expect(c).toMatchObject({
      enabled: ['dns', 'podnet'],
      timeout: 20_000,
      clusterDomain: 'corp.example',
      dns: { servers: [{ host: '10.96.0.10', port: 53 }], names: ['kubernetes.default.svc.corp.example'], externalNames: ['registry.example.com'] },
      podnet: { mode: 'all' },
      checkTimeouts: { dns: 1_000, api: 3_000, tcp: 3_000, service: 3_000, podnet: 3_000 },
    });
  });

  it('accepts a controller config and reads worker.checks', () => {
    const indented = section.replace(/^/gm, '    ');
    const c = configOf(['--config', yamlFile(`reconciliation:\n  maxRetries: 3\nworker:\n  timeout: 60s\n  checks:\n${indented}`)]);
    expect(c.enabled).toEqual(['dns', 'podnet']);
    expect(c.timeout).toBe(20_000);
  });

  it('accepts an empty file and a controller config without worker.checks', () => {
    expect(configOf(['--config', yamlFile('')]).enabled).toHaveLength(7);
    expect(configOf(['--config', yamlFile('worker:\n  timeout: 60s\n')]).enabled).toHaveLength(7);
  });

  it('lets flags win over the file', () => {
    const c = configOf(['--config', yamlFile(section), '--checks', 'api', '--timeout', '5s']);
    expect(c.enabled).toEqual(['api']);
    expect(c.timeout).toBe(5_000);
  });
});

describe('errors name the field and what is allowed', () => {
  it.each([
    [['--bogus'], /^--bogus: unknown flag; allowed flags: --config, --checks, .*--podnet-mode, .*--egress-port, --help, --version$/],
    [['--check-timeout', '5x'], /^--check-timeout: expected a duration greater than 0 like "500ms", "5s" or "1m", got "5x"$/],
    [['--timeout', '0'], /^--timeout: expected a duration greater than 0/],
    [['--checks', 'dns,dnx'], /^--checks: expected one of dns, api, tcp, service, podnet, mtu, egress, got "dnx"$/],
    [['--checks', ''], /^--checks: expected at least one of dns, api, tcp, service, podnet, mtu, egress$/],
    [['--dns-server', 'dns.example'], /^--dns-server: expected an IP address with an optional port/],
    [['--dns-server', '10.0.0.1:99999'], /^--dns-server: expected an IP address/],
    [['--tcp-targets', '10.0.0.1'], /^--tcp-targets: expected HOST:PORT/],
    [['--service', 'kubernetes'], /^--service: expected NAMESPACE\/NAME such as "default\/kubernetes", got "kubernetes"$/],
    [['--podnet-mode', 'most'], /^--podnet-mode: expected one of any, all, got "most"$/],
    [['--log-format', 'xml'], /^--log-format: expected one of json, pretty, got "xml"$/],
    [['--on-slow', 'panic'], /^--on-slow: expected one of warn, fail, got "panic"$/],
    [['--mtu', '9x'], /^--mtu: expected a whole number from 576 to 65535, got "9x"$/],
    [['--mtu', '100'], /^--mtu: expected a whole number from 576 to 65535, got "100"$/],
    [['--egress-port', '0'], /^--egress-port: expected a whole number from 1 to 65535, got "0"$/],
    [['--api-endpoints', 'api.example:6443'], /^--api-endpoints: expected an IP address and port/],
    [['--timeout'], /^--timeout: needs a value/],
    [['extra'], /^unexpected argument extra/],
  ])('%j', (argv, message) => {
    expect(configError(argv)).toMatch(message);
  });

  it('names the key and the file for bad YAML values and unknown keys', () => {
    const file = yamlFile('checkTimeout: 5\ndns:\n  servers: [nope]\n  nameservers: []\n');
    const message = configError(['--config', file]);
    expect(message).toContain(`checkTimeout (in ${file}): expected a duration greater than 0 like "500ms", "5s" or "1m", got 5`);
    expect(message).toContain(`dns.servers[0] (in ${file}): expected an IP address with an optional port`);
    expect(message).toContain(`dns.nameservers (in ${file}): unknown key; allowed keys: servers, names, externalNames, timeout, slowAfter`);
  });

  it('rejects a __proto__ key like any unknown key', () => {
    const file = yamlFile('__proto__:\n  enabled: [dns]\n');
    expect(configError(['--config', file])).toBe(`__proto__ (in ${file}): unknown key; allowed keys: enabled, timeout, checkTimeout, onSlow, clusterDomain, dnsService, terminationLog, logging, dns, api, tcp, service, podnet, mtu, egress`);
  });

  it('prefixes keys of a controller config with worker.checks', () => {
    const file = yamlFile('worker:\n  checks:\n    enabled: [dns, pings]\n');
    expect(configError(['--config', file])).toBe(`worker.checks.enabled[1] (in ${file}): expected one of dns, api, tcp, service, podnet, mtu, egress, got "pings"`);
  });

  it('reports unreadable and malformed files', () => {
    expect(configError(['--config', join(dir, 'missing.yaml')])).toMatch(/^--config: cannot read .*missing\.yaml: ENOENT/);
    expect(configError(['--config', yamlFile('a: [')])).toMatch(/^--config: .* is not valid YAML/);
    expect(configError(['--config', yamlFile('- a\n- b\n')])).toMatch(/must hold a mapping/);
  });

  it('names a bad KUBERNETES_SERVICE_PORT', () => {
    expect(configError([], { KUBERNETES_SERVICE_HOST: '10.96.0.1', KUBERNETES_SERVICE_PORT: 'https' })).toBe(
      'KUBERNETES_SERVICE_PORT: expected a port number 1-65535, got "https"',
    );
  });
});

describe('parseHostPort', () => {
  it.each([
    ['10.0.0.1', 53, { host: '10.0.0.1', port: 53 }],
    ['10.0.0.1:5353', 53, { host: '10.0.0.1', port: 5353 }],
    ['fd00::a', 53, { host: 'fd00::a', port: 53 }],
    ['[fd00::a]:5353', 53, { host: 'fd00::a', port: 5353 }],
    ['[fd00::a]', 53, { host: 'fd00::a', port: 53 }],
    ['host.example:80', undefined, { host: 'host.example', port: 80 }],
    ['host.example', undefined, undefined],
    ['[10.0.0.1]:53', 53, undefined],
    ['10.0.0.1:0', 53, undefined],
    ['10.0.0.1:5x', 53, undefined],
    [':53', 53, undefined],
  ])('%s', (input, def, expected) => expect(parseHostPort(input, def)).toEqual(expected));
});
