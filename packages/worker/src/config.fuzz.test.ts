import { mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { isIP } from 'node:net';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { ConfigError } from '@kube-node-ready/core';
import { z } from 'zod';
import { afterAll, describe, expect, it, onTestFinished, vi } from 'vitest';
import { fuzz, isReplay } from '../../core/src/testing/fuzz.js';
import { configText, randomString, randomValue, schemaPaths, type ConfigShape, type SchemaLike } from '../../core/src/testing/yaml-inputs.js';
import { MAX_DURATION_MS } from '@kube-node-ready/core';
import { CHECK_NAMES, FLAGS, loadWorkerConfig, workerConfigSchema, type WorkerConfig } from './config.js';
import { configOf } from './testing/harness.js';

// A wall-clock budget far above Vitest's default 5 s: the fuzz loops are bounded by count and by
// CPU time (hangAfterCpuMs), so their wall time says only how loaded the machine is.
vi.setConfig({ testTimeout: 120_000 });

/**
 * Fuzz test of the worker's configuration (seeded: a failure names its seed, and
 * KNR_FUZZ_SEED=<seed> replays that case alone). Whatever the file (or the flags) hold,
 * loadWorkerConfig returns settings the checks can use or throws a ConfigError naming the key and
 * the file, the flag or the YAML problem; never another exception, never a hang (the loader is
 * synchronous: the hang guard is a watchdog thread counting CPU time).
 */

const dir = mkdtempSync(join(tmpdir(), 'knr-worker-config-fuzz-'));
afterAll(() => rmSync(dir, { recursive: true, force: true }));
const file = join(dir, 'worker.yaml');

/** The longest delay a Node.js timer takes; a longer one fires at once (TimeoutOverflowWarning). */
const MAX_TIMER_MS = 2 ** 31 - 1;

const schema = z.toJSONSchema(workerConfigSchema, { io: 'input', unrepresentable: 'any' }) as SchemaLike;
const DURATIONS = ['5s', '500ms', '1m', '2m30s', '100ms'];
const shape: ConfigShape = {
  schema,
  samples: {
    timeout: DURATIONS,
    checkTimeout: DURATIONS,
    clusterDomain: ['cluster.local', 'corp.example', 'Example.COM.'],
    dnsService: ['kube-system/kube-dns', 'kube-system/coredns'],
    terminationLog: ['/dev/termination-log', '/tmp/term'],
    'dns.servers[]': ['10.96.0.10', '127.0.0.1:5353', '[fd00::a]:53', 'fd00::a'],
    'dns.names[]': ['kubernetes.default.svc.cluster.local', 'a.example.'],
    'dns.externalNames[]': ['registry.example.com'],
    'dns.timeout': DURATIONS,
    'api.timeout': DURATIONS,
    'tcp.targets[]': ['10.0.0.5:443', 'db.example.com:5432', '[fd00::5]:443'],
    'tcp.timeout': DURATIONS,
    'service.services[]': ['default/kubernetes', 'team/web'],
    'service.timeout': DURATIONS,
    'podnet.timeout': DURATIONS,
    'http.targets[]': [
      { url: 'https://registry.internal/v2/', expectStatus: '200-499' },
      { url: 'http://10.0.0.5:8080/healthz', expectStatus: [200, '204-206'], timeout: '2s' },
      { url: 'https://[fd00::5]/' },
    ],
    'http.timeout': DURATIONS,
    'http.slowAfter': DURATIONS,
  },
};
const SCHEMA_PATHS = new Set(schemaPaths(schema));

const DNS_NAME = /^(?=.{1,253}$)[a-z0-9_]([-a-z0-9_]{0,61}[a-z0-9_])?(\.[a-z0-9_]([-a-z0-9_]{0,61}[a-z0-9_])?)*$/;
const DNS1123_LABEL = /^[a-z0-9]([-a-z0-9]{0,61}[a-z0-9])?$/;

function expectDuration(ms: unknown, what: string): void {
  expect(Number.isSafeInteger(ms) && (ms as number) > 0 && (ms as number) <= MAX_TIMER_MS, `${what}: ${String(ms)} ms is not a usable timer delay`).toBe(true);
}

function expectPort(port: number, what: string): void {
  expect(Number.isInteger(port) && port >= 1 && port <= 65535, `${what}: port ${port}`).toBe(true);
}

/** Settings the checks can use: every value parsed, within its range, nothing left as raw input. */
function expectUsable(config: WorkerConfig): void {
  expectDuration(config.timeout, 'timeout');
  expectDuration(config.checkTimeout, 'checkTimeout');
  for (const name of CHECK_NAMES) expectDuration(config.checkTimeouts[name], `checkTimeouts.${name}`);
  expect(config.enabled.length).toBeGreaterThan(0);
  expect(new Set(config.enabled).size).toBe(config.enabled.length);
  for (const name of config.enabled) expect(CHECK_NAMES).toContain(name);
  expect(config.clusterDomain).toMatch(DNS_NAME);
  expect(config.dnsService.namespace).toMatch(DNS1123_LABEL);
  expect(config.dnsService.name).toMatch(DNS1123_LABEL);
  expect(config.terminationLog.length).toBeGreaterThan(0);
  expect(['json', 'pretty']).toContain(config.logging.format);
  expect(['trace', 'debug', 'info', 'warn', 'error', 'fatal', 'silent']).toContain(config.logging.level);
  for (const server of config.dns.servers) {
    expect(isIP(server.host), `dns server ${server.host}`).toBeGreaterThan(0);
    expectPort(server.port, 'dns server');
  }
  for (const name of [...config.dns.names, ...config.dns.externalNames]) expect(name).toMatch(DNS_NAME);
  for (const target of config.tcp.targets) {
    expect(isIP(target.host) > 0 || DNS_NAME.test(target.host.toLowerCase()), `tcp target ${target.host}`).toBe(true);
    expectPort(target.port, 'tcp target');
  }
  for (const ref of config.service.services) {
    expect(ref.namespace).toMatch(DNS1123_LABEL);
    expect(ref.name).toMatch(DNS1123_LABEL);
  }
  expect(['any', 'all']).toContain(config.podnet.mode);
  for (const target of config.http.targets) {
    expect(['http:', 'https:']).toContain(new URL(target.url).protocol);
    expect(target.expectStatus.length).toBeGreaterThan(0);
    for (const r of target.expectStatus) expect(r.from >= 100 && r.from <= r.to && r.to <= 599, `expectStatus ${r.from}-${r.to}`).toBe(true);
    if (target.timeout !== undefined) expectDuration(target.timeout, 'http target timeout');
  }
}

/** "dns.servers[0]" -> "dns.servers[]"; keys of a controller config lose their worker.checks prefix. */
function schemaPath(label: string): string {
  return label.replace(/^worker\.checks\./, '').replace(/\[\d+\]/g, '[]');
}

/** Every line of a ConfigError names a key and the file, a flag, or the file's YAML problem. */
function expectNamedProblem(err: unknown, sources: readonly string[]): void {
  if (!(err instanceof ConfigError)) throw new Error(`expected a ConfigError, got ${err instanceof Error ? `${err.name}: ${err.message}` : String(err)}`, { cause: err });
  const { message } = err;
  expect(message).not.toMatch(/\n\s+at /);
  if (message.startsWith('--config: ') && message.includes(file)) return; // unreadable, not YAML, not a mapping, a cycle
  if (/^worker(\.checks)?: expected a mapping.* \(in /.test(message)) return;
  const lines = message.startsWith('invalid configuration:\n') ? message.split('\n').slice(1).map((l) => l.replace(/^ {2}- /, '')) : [message];
  for (const line of lines) {
    const inFile = line.indexOf(` (in ${file}): `);
    if (inFile > 0) {
      const label = line.slice(0, inFile);
      // Quoted keys (odd ones) are not schema keys: they are unknown keys, reported as such.
      const known = SCHEMA_PATHS.has(schemaPath(label)) || /: unknown key; allowed keys: /.test(line);
      expect(known, `names no key of the schema: ${line.slice(0, 200)}`).toBe(true);
      continue;
    }
    // A flag is named as given, or up to its first space, quote or "=" (parseArgs quotes it in its message).
    const label = line.slice(0, Math.max(0, line.indexOf(': ')));
    expect(label !== '' && sources.some((source) => source.startsWith(label)), `names no key, flag or file: ${line.slice(0, 200)}`).toBe(true);
  }
}

function indent(text: string, by: string): string {
  return text.replace(/^/gm, by);
}

describe('loadWorkerConfig on any file (fuzz)', () => {
  it('returns usable settings or throws a ConfigError naming the key and the file, or the YAML problem', () => {
    // The yaml package reports unresolved tags through process.emitWarning: keep the output readable.
    const warnings = vi.spyOn(process, 'emitWarning').mockImplementation(() => {});
    onTestFinished(() => warnings.mockRestore());
    const seen = { loaded: 0, rejected: 0 };
    fuzz(
      0x3f0000,
      1200,
      (r) => {
        let { kind, content } = configText(r, shape);
        // The worker also reads a controller config and takes worker.checks from it.
        if (typeof content === 'string' && r.chance(0.25)) {
          kind += ' (as worker.checks of a controller config)';
          content = `worker:\n  checks:\n${indent(content, '    ')}`;
        }
        writeFileSync(file, content);
        let config: WorkerConfig;
        try {
          const command = loadWorkerConfig(['--config', file], {});
          if (command.kind !== 'run') throw new Error(`expected a run, got ${command.kind}`);
          config = command.config;
        } catch (err) {
          seen.rejected++;
          try {
            expectNamedProblem(err, []);
          } catch (failure) {
            throw new Error(`${kind}: ${(failure as Error).message}\n--- file (first 300 characters) ---\n${content.toString().slice(0, 300)}`, { cause: failure });
          }
          return;
        }
        seen.loaded++;
        try {
          expectUsable(config);
        } catch (failure) {
          throw new Error(`${kind}: ${(failure as Error).message}\n--- file (first 300 characters) ---\n${content.toString().slice(0, 300)}`, { cause: failure });
        }
      },
      { hangAfterCpuMs: 20_000 },
    );
    if (isReplay()) return;
    expect(seen.loaded).toBeGreaterThan(0);
    expect(seen.rejected).toBeGreaterThan(0);
  }, 120_000);
});

describe('loadWorkerConfig on any flags (fuzz)', () => {
  const names = Object.keys(FLAGS);
  const values = [...Object.values(shape.samples ?? {}).flat(), '', ',', ',,dns', 'dns,api', '99999999999h', '-1s', '1e309s', '0', '596h', '597h'];

  it('returns usable settings or throws a ConfigError naming the flag', () => {
    fuzz(
      0x3f8000,
      1000,
      (r) => {
        const argv: string[] = [];
        for (let i = r.int(5); i >= 0; i--) {
          const flag = r.chance(0.9) ? r.pick(names) : randomString(r, 8);
          const value = r.chance(0.6) ? String(r.pick(values)) : String(randomValue(r, 0));
          argv.push(...(r.chance(0.5) ? [`--${flag}=${value}`] : [`--${flag}`, value]));
        }
        let config: WorkerConfig;
        try {
          const command = loadWorkerConfig(argv, {});
          if (command.kind !== 'run') return;
          config = command.config;
        } catch (err) {
          try {
            expectNamedProblem(err, argv.filter((a) => a.startsWith('-')));
          } catch (failure) {
            // parseArgs reports positional arguments and values that look like flags on their own.
            if (!/^unexpected argument|^Option '|needs a value/.test((err as Error).message)) throw new Error(`${JSON.stringify(argv)}: ${(failure as Error).message}`, { cause: failure });
          }
          return;
        }
        try {
          expectUsable(config);
        } catch (failure) {
          throw new Error(`${JSON.stringify(argv)}: ${(failure as Error).message}`, { cause: failure });
        }
      },
      { hangAfterCpuMs: 20_000 },
    );
  }, 60_000);
});

describe('loadWorkerConfig regressions found by fuzzing', () => {
  function configError(argv: string[]): string {
    try {
      loadWorkerConfig(argv, {});
    } catch (err) {
      expect(err).toBeInstanceOf(ConfigError);
      return (err as Error).message;
    }
    throw new Error('expected a ConfigError');
  }
  const fromFile = (content: string) => {
    writeFileSync(file, content);
    return configError(['--config', file]);
  };

  it('rejects an alias inside its own anchor (a cyclic mapping overflowed the stack: a RangeError, so exit 3 instead of 2)', () => {
    expect(fromFile('dns: &c\n  x: *c\n')).toBe(
      `--config: ${file}: dns.x refers back to a mapping or list that contains it (an alias inside its own anchor); aliases must not form a cycle`,
    );
    // As the controller wrote it when worker.checks held a cycle (yaml.stringify keeps it as an alias).
    expect(fromFile('worker:\n  checks: &a1\n    podnet: *a1\n')).toMatch(/: worker\.checks\.podnet refers back to a mapping or list/);
    expect(fromFile('dns: &c\n  servers: [*c]\n')).toMatch(/: dns\.servers\[0\] refers back to a mapping or list/);
  });

  it('rejects a duration a timer cannot wait (seed 4161788: --timeout=2147483648ms timed every check out at once)', () => {
    expect(configError(['--timeout=2147483648ms'])).toBe('--timeout: expected a duration of at most 596h (the longest timer Node.js can set), got "2147483648ms"');
    expect(fromFile('checkTimeout: 99999999999h\n')).toBe(`checkTimeout (in ${file}): expected a duration of at most 596h (the longest timer Node.js can set), got "99999999999h"`);
    expect(configOf(['--timeout', '596h']).timeout).toBe(MAX_DURATION_MS);
  });

  it('names the file for a value the YAML reads as a tagged or empty mapping (seed 4128768: !!omap gave a Map)', () => {
    const warnings = vi.spyOn(process, 'emitWarning').mockImplementation(() => {});
    onTestFinished(() => warnings.mockRestore());
    // Read as YAML 1.2 core: the tag is not resolved and the value is the list it is written as.
    expect(fromFile('tcp:\n  targets: !!omap [a: 1]\n')).toBe(`tcp.targets[0] (in ${file}): expected HOST:PORT such as "10.0.0.5:443", "db.example.com:5432" or "[fd00::5]:443"`);
    expect(fromFile('dns:\n  externalNames: {}\n')).toBe(`dns.externalNames (in ${file}): expected a list`);
  });

  it('quotes odd keys, so that every problem stays on one line', () => {
    expect(fromFile('dns:\n  "a\\nb": 1\n  "": 2\n').split('\n')).toEqual([
      'invalid configuration:',
      `  - dns."a\\nb" (in ${file}): unknown key; allowed keys: servers, names, externalNames, timeout, slowAfter`,
      `  - dns."" (in ${file}): unknown key; allowed keys: servers, names, externalNames, timeout, slowAfter`,
    ]);
  });
});
