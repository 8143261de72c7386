import { readFileSync } from 'node:fs';
import { ApiException } from '@kubernetes/client-node';
import { createLogger, type Logger } from '@kube-node-ready/core';
import { describe, expect, it } from 'vitest';
import { parse } from 'yaml';
import { parseConfig } from '../../../config/load.js';
import type { ControllerConfigInput } from '../../../config/schema.js';
import { checkWorkerPrerequisites, CRD_DIRECTORY, TROUBLESHOOTING, WORKER_PRIORITY_CLASS, type PrerequisiteReads } from './prerequisites.js';

const NS = '/api/v1/namespaces/kube-system';
const SA = '/api/v1/namespaces/kube-system/serviceaccounts/kube-node-ready-worker';
const PC = '/apis/scheduling.k8s.io/v1/priorityclasses/kube-node-ready-worker';
const CRD = '/apis/kube-node-ready.io/v1alpha1/nodeverifications';

/** A recording fake of the one read: `present` paths answer, an `errors` entry fails, the rest are 404. */
class FakeApi implements PrerequisiteReads {
  readonly calls: string[] = [];
  readonly present = new Set<string>();
  readonly errors = new Map<string, Error>();

  constructor(present: readonly string[] = []) {
    for (const path of present) this.present.add(path);
  }

  async exists(operation: string, path: string, query?: Readonly<Record<string, string | number>>): Promise<boolean> {
    this.calls.push(`${operation} ${path}${query ? `?${Object.entries(query).map(([k, v]) => `${k}=${v}`).join('&')}` : ''}`);
    const error = this.errors.get(path);
    if (error) throw error;
    return this.present.has(path);
  }
}

const forbidden = (what: string) => new ApiException(403, 'GET', JSON.stringify({ kind: 'Status', reason: 'Forbidden', message: `${what} is forbidden` }), {});

async function recordingLogger(): Promise<{ log: Logger; lines: Array<{ level: string; msg: string }> }> {
  const lines: Array<{ level: string; msg: string }> = [];
  const log = await createLogger({ level: 'debug', destination: { write: (line: string) => void lines.push(JSON.parse(line) as { level: string; msg: string }) } });
  return { log, lines };
}

const DEBUG = 'debug';
const INFO = 'info';
const WARN = 'warn';

async function check(api: FakeApi, input: ControllerConfigInput = {}) {
  const { log, lines } = await recordingLogger();
  const findings = await checkWorkerPrerequisites(api, parseConfig(input), log);
  return { findings: Object.fromEntries(findings.map((f) => [f.prerequisite.operation, f.state])), lines };
}

describe('checkWorkerPrerequisites', () => {
  it('reads the worker namespace, ServiceAccount and PriorityClass and the NodeVerification collection, each once', async () => {
    const api = new FakeApi([NS, SA, PC, CRD]);
    const { findings, lines } = await check(api);
    expect(api.calls).toEqual([`get namespace ${NS}`, `get serviceaccount ${SA}`, `get priorityclass ${PC}`, `list nodeverifications ${CRD}?limit=1`]);
    expect(findings).toEqual({ 'get namespace': 'present', 'get serviceaccount': 'present', 'get priorityclass': 'present', 'list nodeverifications': 'present' });
    expect(lines).toEqual([expect.objectContaining({ level: DEBUG, msg: 'worker prerequisites present' })]);
  });

  it('names everything missing in one warning line, each with the command that creates it', async () => {
    const api = new FakeApi();
    const { findings, lines } = await check(api, { worker: { namespace: 'knr', serviceAccountName: 'runner', priorityClassName: 'knr-high' } });
    expect(Object.values(findings)).toEqual(['missing', 'missing', 'missing', 'missing']);
    expect(lines).toHaveLength(1);
    expect(lines[0]?.level).toBe(WARN);
    expect(lines[0]?.msg).toBe(
      'worker prerequisites missing: ' +
        'namespace "knr": create it with `kubectl create namespace knr`; ' +
        'ServiceAccount "knr/runner": create it with `kubectl -n knr create serviceaccount runner`; ' +
        'PriorityClass "knr-high": create it with `kubectl create priorityclass knr-high --value=1000000000 --preemption-policy=Never ' +
        '--description="kube-node-ready worker pods: verified before any workload runs on a new node; never preempt workloads."`; ' +
        'the NodeVerification CRD (nodeverifications.kube-node-ready.io): create it with `kubectl apply --server-side -f deploy/helm/kube-node-ready/crds/`. ' +
        `No node is verified until they exist; the Helm chart creates them all (${TROUBLESHOOTING})`,
    );
  });

  it('names only what is missing', async () => {
    const api = new FakeApi([NS, PC, CRD]);
    const { lines } = await check(api);
    expect(lines.map((l) => l.level)).toEqual([WARN]);
    expect(lines[0]?.msg).toMatch(/^worker prerequisites missing: ServiceAccount "kube-system\/kube-node-ready-worker": create it with `kubectl -n kube-system create serviceaccount kube-node-ready-worker`\. No node is verified/);
    expect(lines[0]?.msg).not.toMatch(/namespace "|PriorityClass|CRD/);
  });

  it('a read the controller may not make (403) is "cannot check", not missing', async () => {
    const api = new FakeApi([SA, PC, CRD]);
    api.errors.set(SA, forbidden('serviceaccounts'));
    const { findings, lines } = await check(api);
    expect(findings['get serviceaccount']).toBe('forbidden');
    expect(lines.map((l) => l.level)).toEqual([WARN]); // the namespace is missing
    expect(lines[0]?.msg).toContain('worker prerequisites missing: namespace "kube-system": create it with `kubectl create namespace kube-system`. ');
    expect(lines[0]?.msg).toContain('Cannot check ServiceAccount "kube-system/kube-node-ready-worker" (forbidden).');
    expect(lines[0]?.msg).not.toContain('create serviceaccount');
  });

  it('reads forbidden and nothing missing (the chart\'s RBAC) is one information line, not a warning', async () => {
    const api = new FakeApi([CRD]);
    for (const path of [NS, SA, PC]) api.errors.set(path, forbidden(path));
    const { lines } = await check(api);
    expect(lines).toEqual([
      expect.objectContaining({
        level: INFO,
        msg: 'worker prerequisites: cannot check namespace "kube-system" (forbidden), ServiceAccount "kube-system/kube-node-ready-worker" (forbidden), PriorityClass "kube-node-ready-worker" (forbidden)',
      }),
    ]);
  });

  it('a read that failed otherwise is a warning with the API\'s answer', async () => {
    const api = new FakeApi([NS, SA, CRD]);
    api.errors.set(PC, new ApiException(500, 'GET', JSON.stringify({ kind: 'Status', reason: 'InternalError', message: 'etcd timed out' }), {}));
    const { findings, lines } = await check(api);
    expect(findings['get priorityclass']).toBe('unknown');
    expect(lines).toEqual([
      expect.objectContaining({ level: WARN, msg: 'worker prerequisites: cannot check PriorityClass "kube-node-ready-worker" (500 InternalError: etcd timed out)' }),
    ]);
  });

  it('no PriorityClass is read when worker.priorityClassName is empty, no CRD in dry run (progress stays in memory)', async () => {
    const api = new FakeApi();
    const { lines } = await check(api, { worker: { priorityClassName: '' }, dryRun: true });
    expect(api.calls).toEqual([`get namespace ${NS}`, `get serviceaccount ${SA}`]);
    expect(lines[0]?.msg).not.toMatch(/PriorityClass|CRD/);
  });
});

describe('the suggested PriorityClass', () => {
  it('is the chart\'s: its value and description', () => {
    const chart = new URL('../../../../../../deploy/helm/kube-node-ready/', import.meta.url);
    const values = parse(readFileSync(new URL('values.yaml', chart), 'utf8')) as { workerPriorityClass: { value: number } };
    const template = readFileSync(new URL('templates/priorityclass.yaml', chart), 'utf8');
    expect(values.workerPriorityClass.value).toBe(WORKER_PRIORITY_CLASS.value);
    expect(template).toContain(`preemptionPolicy: ${WORKER_PRIORITY_CLASS.preemptionPolicy}\n`);
    expect(template).toContain(`description: ${JSON.stringify(WORKER_PRIORITY_CLASS.description)}\n`);
  });
});

describe('the message\'s pointers', () => {
  it('the CRD directory and the troubleshooting entry exist', () => {
    const root = new URL('../../../../../../', import.meta.url);
    expect(readFileSync(new URL(`${CRD_DIRECTORY}nodeverifications.kube-node-ready.io.yaml`, root), 'utf8')).toContain('kind: CustomResourceDefinition');
    const [file, anchor] = TROUBLESHOOTING.split('#') as [string, string];
    const headings = readFileSync(new URL(file, root), 'utf8')
      .split('\n')
      .filter((l) => l.startsWith('#'))
      .map((l) => l.replace(/^#+\s*/, '').toLowerCase().replace(/[^\w\s-]/g, '').replace(/\s/g, '-'));
    expect(headings).toContain(anchor);
  });
});
