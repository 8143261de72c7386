// Helpers for the chart tests: the helm binary the sandbox builds, `helm template` into objects.
import { execFile } from 'node:child_process';
import { mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { basename, join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { promisify } from 'node:util';
import { parseAllDocuments } from 'yaml';
import { ensureBinaries } from '@kube-node-ready/sandbox';

const run = promisify(execFile);

export const REPO_ROOT = fileURLToPath(new URL('../..', import.meta.url));
export const CHART_DIR = join(REPO_ROOT, 'deploy', 'helm', 'kube-node-ready');
export const RELEASE = 'kube-node-ready';
export const NAMESPACE = 'kube-system';

export interface KubeObject {
  apiVersion: string;
  kind: string;
  metadata: { name: string; namespace?: string; labels?: Record<string, string>; annotations?: Record<string, string> };
  [key: string]: unknown;
}

let binDir: Promise<string> | undefined;

/** The directory with helm and kubectl (built from Go modules once, then cached). */
export function tools(): Promise<string> {
  binDir ??= ensureBinaries(() => {});
  return binDir;
}

/**
 * The Kubernetes version the sandbox runs (from the cache directory name, "k8s-v1.36.3-...").
 * Helm built without ldflags assumes v1.20 for `helm template`, below the chart's kubeVersion.
 */
export async function kubeVersion(): Promise<string> {
  const m = /k8s-(v\d+\.\d+\.\d+)/.exec(basename(await tools()));
  return m?.[1] ?? 'v1.33.0';
}

export interface HelmResult {
  stdout: string;
  stderr: string;
  code: number;
}

/**
 * Runs one of the sandbox's tools (helm, kubectl) with a scratch HOME (its caches and config, and the
 * kube discovery cache, stay out of the user's home and the cwd); `setup` may put files there and
 * returns the arguments to add. A failure is returned, not thrown: its exit code and output.
 */
async function tool(name: 'helm' | 'kubectl', args: string[], env: NodeJS.ProcessEnv = {}, setup: (home: string) => string[] = () => []): Promise<HelmResult> {
  const bin = join(await tools(), name);
  const home = mkdtempSync(join(tmpdir(), `knr-${name}-`));
  try {
    const { stdout, stderr } = await run(bin, [...args, ...setup(home)], {
      env: { PATH: process.env.PATH, HOME: home, HELM_CACHE_HOME: join(home, 'cache'), HELM_CONFIG_HOME: join(home, 'config'), HELM_DATA_HOME: join(home, 'data'), ...env },
      maxBuffer: 64 * 1024 * 1024,
    });
    return { stdout, stderr, code: 0 };
  } catch (err) {
    const e = err as { stdout?: string; stderr?: string; code?: number };
    return { stdout: e.stdout ?? '', stderr: e.stderr ?? String(err), code: typeof e.code === 'number' ? e.code : 1 };
  } finally {
    rmSync(home, { recursive: true, force: true });
  }
}

export function helm(args: string[], env: NodeJS.ProcessEnv = {}): Promise<HelmResult> {
  return tool('helm', args, env);
}

/** kubectl against the sandbox (admin credentials), `input` given as a file (`-f`). */
export async function kubectl(args: string[], input?: string): Promise<HelmResult> {
  const { sandbox } = await import('../sandbox.js');
  return tool('kubectl', ['--kubeconfig', sandbox().state.kubeconfig, ...args], {}, (home) => {
    if (input === undefined) return [];
    writeFileSync(join(home, 'in.yaml'), input);
    return ['-f', join(home, 'in.yaml')];
  });
}

/** Writes values to a temporary file, runs fn with its path, removes it. */
async function withValuesFile<T>(values: unknown, fn: (path: string) => Promise<T>): Promise<T> {
  const dir = mkdtempSync(join(tmpdir(), 'knr-values-'));
  const path = join(dir, 'values.json');
  writeFileSync(path, JSON.stringify(values));
  try {
    return await fn(path);
  } finally {
    rmSync(dir, { recursive: true, force: true });
  }
}

export interface TemplateOptions {
  release?: string;
  namespace?: string;
  extraArgs?: string[];
}

/** `helm template` output as text; throws with helm's message on failure. */
export async function templateText(values: unknown = {}, opts: TemplateOptions = {}): Promise<string> {
  const result = await tryTemplate(values, opts);
  if (result.code !== 0) throw new Error(`helm template failed: ${result.stderr}`);
  return result.stdout;
}

export async function tryTemplate(values: unknown = {}, opts: TemplateOptions = {}): Promise<HelmResult> {
  const version = await kubeVersion();
  return withValuesFile(values, (file) =>
    helm([
      'template',
      opts.release ?? RELEASE,
      CHART_DIR,
      '--namespace',
      opts.namespace ?? NAMESPACE,
      '--kube-version',
      version,
      '--values',
      file,
      ...(opts.extraArgs ?? []),
    ]),
  );
}

/** `helm template` output as objects. */
export async function template(values: unknown = {}, opts: TemplateOptions = {}): Promise<KubeObject[]> {
  return parseManifests(await templateText(values, opts));
}

export function parseManifests(text: string): KubeObject[] {
  return parseAllDocuments(text)
    .map((doc) => {
      if (doc.errors.length > 0) throw new Error(`rendered YAML is invalid: ${doc.errors[0]?.message}`);
      return doc.toJS() as KubeObject | null;
    })
    .filter((o): o is KubeObject => o !== null && typeof o === 'object');
}

export function find(objects: KubeObject[], kind: string, name?: string): KubeObject {
  const found = objects.filter((o) => o.kind === kind && (name === undefined || o.metadata.name === name));
  if (found.length !== 1) {
    throw new Error(`expected one ${kind}${name ? ` ${name}` : ''}, found ${found.length}: ${objects.map((o) => `${o.kind}/${o.metadata.name}`).join(', ')}`);
  }
  return found[0] as KubeObject;
}

export function findAll(objects: KubeObject[], kind: string): KubeObject[] {
  return objects.filter((o) => o.kind === kind);
}

/** Every optional feature of the chart on, with remediation enabled. */
export const ALL_FEATURES = {
  serviceMonitor: { enabled: true, labels: { release: 'prometheus' } },
  prometheusRule: { enabled: true, labels: { release: 'prometheus' }, alertLabels: { team: 'platform' } },
  imagePullSecrets: [{ name: 'registry-credentials' }],
  controller: {
    podAnnotations: { 'example.com/owner': 'platform' },
    podLabels: { 'example.com/tier': 'system' },
    extraArgs: ['--log-level=debug'],
    extraEnv: [{ name: 'EXTRA', value: '1' }],
  },
  commonLabels: { 'example.com/team': 'platform' },
  serviceAccount: { controller: { annotations: { 'example.com/role': 'controller' } }, worker: { annotations: { 'example.com/role': 'worker' } } },
  metrics: { service: { annotations: { 'example.com/scrape': 'true' } } },
  config: {
    nodeManagement: { deleteFailedNodes: true },
    health: { bindAddress: '0.0.0.0:8081' },
  },
};
