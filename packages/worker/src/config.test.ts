import { mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { ConfigError } from '@kube-node-ready/core';
import { afterAll, describe, expect, it } from 'vitest';
import { loadWorkerConfig, parseHostPort, type WorkerConfig } from './config.js';
import { configOf } from './testing/harness.js';
import { makePki } from './testing/pki.js';

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
      enabled: ['dns', 'api', 'tcp', 'service', 'podnet', 'mtu', 'egress', 'http'],
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
      http: { targets: [] },
      checkTimeouts: { dns: 5_000, api: 5_000, tcp: 5_000, service: 5_000, podnet: 5_000, mtu: 5_000, egress: 5_000, http: 5_000 },
      slowAfter: { dns: 1_000, api: undefined, tcp: undefined, service: undefined, podnet: 1_000, mtu: undefined, egress: undefined, http: undefined },
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
      '--http-urls', 'https://registry.internal/v2/,http://10.0.0.5:8080/healthz',
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
      http: {
        targets: [
          { url: 'https://registry.internal/v2/', expectStatus: [{ from: 200, to: 399 }] },
          { url: 'http://10.0.0.5:8080/healthz', expectStatus: [{ from: 200, to: 399 }] },
        ],
      },
      checkTimeouts: { dns: 2_000, api: 2_000, tcp: 2_000, service: 2_000, podnet: 2_000, mtu: 2_000, egress: 2_000, http: 2_000 },
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
    expect(configOf(['--config', yamlFile('')]).enabled).toHaveLength(8);
    expect(configOf(['--config', yamlFile('worker:\n  timeout: 60s\n')]).enabled).toHaveLength(8);
  });

  it('lets flags win over the file', () => {
    const c = configOf(['--config', yamlFile(section), '--checks', 'api', '--timeout', '5s']);
    expect(c.enabled).toEqual(['api']);
    expect(c.timeout).toBe(5_000);
  });
});

describe('errors name the field and what is allowed', () => {
  it.each([
    [['--bogus'], /^--bogus: unknown flag; allowed flags: --config, --checks, .*--podnet-mode, .*--egress-port, --http-urls, --help, --version$/],
    [['--check-timeout', '5x'], /^--check-timeout: expected a duration greater than 0 like "500ms", "5s" or "1m", got "5x"$/],
    [['--timeout', '0'], /^--timeout: expected a duration greater than 0/],
    [['--checks', 'dns,dnx'], /^--checks: expected one of dns, api, tcp, service, podnet, mtu, egress, http, got "dnx"$/],
    [['--checks', ''], /^--checks: expected at least one of dns, api, tcp, service, podnet, mtu, egress, http$/],
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
    expect(configError(['--config', file])).toBe(`__proto__ (in ${file}): unknown key; allowed keys: enabled, timeout, checkTimeout, onSlow, clusterDomain, dnsService, terminationLog, logging, dns, api, tcp, service, podnet, mtu, egress, http`);
  });

  it('prefixes keys of a controller config with worker.checks', () => {
    const file = yamlFile('worker:\n  checks:\n    enabled: [dns, pings]\n');
    expect(configError(['--config', file])).toBe(`worker.checks.enabled[1] (in ${file}): expected one of dns, api, tcp, service, podnet, mtu, egress, http, got "pings"`);
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

describe('http targets', () => {
  const pki = makePki();
  const http = (targets: unknown[], extra: Record<string, unknown> = {}) => yamlFile(JSON.stringify({ http: { targets, ...extra } }));

  it('reads url, expectStatus, ca or caFile and timeout per target, and the check timeout and slowAfter', () => {
    const caPath = join(dir, 'ca.pem');
    writeFileSync(caPath, pki.ca);
    const c = configOf([
      '--config',
      http(
        [
          { url: 'https://registry.internal/v2/#frag', expectStatus: '200-499', ca: pki.ca, timeout: '2s' },
          { url: 'https://svc.team.svc.cluster.local:8443/healthz', expectStatus: [200, '204', '300-302'], caFile: caPath },
          { url: 'http://[fd00::5]:8080/', expectStatus: 401 },
          { url: 'http://10.0.0.5/', expectStatus: '200-299, 401' },
        ],
        { timeout: '3s', slowAfter: '1s' },
      ),
    ]);
    expect(c.http.targets).toEqual([
      { url: 'https://registry.internal/v2/', expectStatus: [{ from: 200, to: 499 }], ca: pki.ca, caFrom: 'ca', timeout: 2_000 },
      {
        url: 'https://svc.team.svc.cluster.local:8443/healthz',
        expectStatus: [{ from: 200, to: 200 }, { from: 204, to: 204 }, { from: 300, to: 302 }],
        ca: pki.ca,
        caFrom: caPath,
      },
      { url: 'http://[fd00::5]:8080/', expectStatus: [{ from: 401, to: 401 }] },
      { url: 'http://10.0.0.5/', expectStatus: [{ from: 200, to: 299 }, { from: 401, to: 401 }] },
    ]);
    expect(c.checkTimeouts.http).toBe(3_000);
    expect(c.slowAfter.http).toBe(1_000);
  });

  it("names the node's address and name as $(HOST_IP) and $(NODE_NAME), from the pod's environment (a node-local agent's health endpoint)", () => {
    const file = http([{ url: 'http://$(HOST_IP):9099/readiness' }, { url: 'http://$(HOST_IP):8080/nodes/$(NODE_NAME)' }, { url: 'http://10.0.0.5/' }]);
    const c = loadWorkerConfig(['--config', file], { HOST_IP: '10.1.0.7', NODE_NAME: 'ip-10-1-0-7' });
    if (c.kind !== 'run') throw new Error(c.kind);
    expect(c.config.http.targets.map((t) => t.url)).toEqual(['http://10.1.0.7:9099/readiness', 'http://10.1.0.7:8080/nodes/ip-10-1-0-7', 'http://10.0.0.5/']);
    const v6 = loadWorkerConfig(['--config', http([{ url: 'http://$(HOST_IP):9099/readiness' }])], { HOST_IP: 'fd00::7' });
    if (v6.kind !== 'run') throw new Error(v6.kind);
    expect(v6.config.http.targets[0]?.url).toBe('http://[fd00::7]:9099/readiness');
    expect(configError(['--config', http([{ url: 'http://$(HOST_IP):9099/readiness' }])])).toMatch(/names \$\(HOST_IP\), but HOST_IP is not set/);
    expect(configError(['--config', http([{ url: 'http://$(OTHER):9099/' }])], { HOST_IP: '10.1.0.7' })).toMatch(/names \$\(OTHER\): only \$\(HOST_IP\) and \$\(NODE_NAME\) are known/);
  });

  it.each([
    [{ url: 'ftp://registry.internal/' }, 'http.targets[0].url', /expected an http:\/\/ or https:\/\/ URL without user:password@, such as "https:\/\/registry.internal\/v2\/", got "ftp:\/\/registry.internal\/"$/],
    [{ url: 'registry.internal/v2/' }, 'http.targets[0].url', /expected an http:\/\/ or https:\/\/ URL/],
    [{ url: 'https://user:secret@registry.internal/' }, 'http.targets[0].url', /without user:password@/],
    [{}, 'http.targets[0].url', /expected an http:\/\/ or https:\/\/ URL/],
    [{ url: 'https://r/', expectStatus: '600' }, 'http.targets[0].expectStatus', /expected HTTP status codes \(100-599\) and ranges such as "200-399"/],
    [{ url: 'https://r/', expectStatus: '399-200' }, 'http.targets[0].expectStatus', /expected HTTP status codes/],
    [{ url: 'https://r/', expectStatus: '2xx' }, 'http.targets[0].expectStatus', /expected HTTP status codes/],
    [{ url: 'https://r/', expectStatus: [] }, 'http.targets[0].expectStatus', /expected HTTP status codes/],
    [{ url: 'https://r/', ca: 'not a certificate' }, 'http.targets[0].ca', /: expected PEM certificates \("-----BEGIN CERTIFICATE-----" \.\.\.\)$/],
    [{ url: 'https://r/', ca: '-----BEGIN CERTIFICATE-----\nAAAA\n-----END CERTIFICATE-----\n' }, 'http.targets[0].ca', /: certificate 1 of 1 is not a valid PEM certificate/],
    [{ url: 'https://r/', caFile: '/nonexistent/ca.pem' }, 'http.targets[0].caFile', /: cannot read \/nonexistent\/ca\.pem: ENOENT/],
    [{ url: 'https://r/', caFile: '/' }, 'http.targets[0].caFile', /: cannot read \/: not a regular file$/],
    [{ url: 'https://r/', timeout: '0s' }, 'http.targets[0].timeout', /expected a duration greater than 0/],
    [{ url: 'https://r/', insecure: true }, 'http.targets[0].insecure', /: unknown key; allowed keys: url, expectStatus, ca, caFile, timeout$/],
  ])('%j: names %s', (target, key, message) => {
    const file = http([target]);
    const error = configError(['--config', file]);
    expect(error.startsWith(`${key} (in ${file})`), error).toBe(true);
    expect(error).toMatch(message);
  });

  it('refuses ca and caFile together', () => {
    const caPath = join(dir, 'ca-both.pem');
    writeFileSync(caPath, pki.ca);
    const file = http([{ url: 'https://r/', ca: pki.ca, caFile: caPath }]);
    expect(configError(['--config', file])).toBe(`http.targets[0].caFile (in ${file}): set ca (inline PEM) or caFile (a path), not both`);
  });

  it('refuses a caFile without a certificate, naming the file', () => {
    const caPath = join(dir, 'empty.pem');
    writeFileSync(caPath, 'nothing here\n');
    const file = http([{ url: 'https://r/', caFile: caPath }]);
    expect(configError(['--config', file])).toBe(`http.targets[0].caFile (in ${file}): ${caPath}: expected PEM certificates ("-----BEGIN CERTIFICATE-----" ...)`);
  });

  it('takes URLs from --http-urls, each with the default range, and names the flag for a bad one', () => {
    expect(configOf(['--http-urls', 'https://a.example/', '--http-urls', 'http://b.example:8080/x']).http.targets).toEqual([
      { url: 'https://a.example/', expectStatus: [{ from: 200, to: 399 }] },
      { url: 'http://b.example:8080/x', expectStatus: [{ from: 200, to: 399 }] },
    ]);
    expect(configError(['--http-urls', 'b.example'])).toMatch(/^--http-urls: expected an http:\/\/ or https:\/\/ URL .*, got "b\.example"$/);
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
