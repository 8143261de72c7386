// Worker bench in the sandbox: one healthy verification (every check) against the real cluster —
// kube-apiserver behind the `kubernetes` Service, the cluster DNS and its pods — from inside the
// sandbox's network namespace, with a real service-account token (TokenRequest) bound to the
// documented RBAC. Each run is its own process, timed from spawn to exit by a launcher inside the
// namespace, under /usr/bin/time for peak RSS and CPU time. Several command lines are measured:
// what the image runs (and the simulated kubelet: `node --enable-source-maps kube-node-ready.mjs
// worker`), the same without source maps, the worker bundled alone, and an empty `node`.
//   built and started by: node packages/worker/src/bench/run.mjs --sandbox [...]
import { execFileSync } from 'node:child_process';
import { copyFileSync, mkdirSync, mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { arch, cpus, loadavg, release, tmpdir } from 'node:os';
import { join, resolve } from 'node:path';
import { parseArgs } from 'node:util';
import { certPaths, connectSandbox, execInSandbox, k8s, type SandboxConnection } from '@kube-node-ready/sandbox';

const { values } = parseArgs({
  options: {
    root: { type: 'string' },
    'worker-bundle': { type: 'string' },
    runs: { type: 'string', default: '10' },
    slot: { type: 'string', default: '4' },
    dir: { type: 'string' },
    out: { type: 'string' },
  },
});
const root = resolve(values.root ?? '.');
const runs = Number(values.runs);
const slot = Number(values.slot);
if (!Number.isInteger(runs) || runs < 1) throw new Error(`--runs: expected a positive integer, got ${values.runs}`);
const outDir = resolve(root, values.out ?? join('bench', 'results'));
const bundle = join(root, 'dist', 'kube-node-ready.mjs');
const workerBundle = values['worker-bundle'];
if (!workerBundle) throw new Error('--worker-bundle is required');
const CHECKS = 'dns,api,tcp,service,podnet';

interface Variant {
  name: string;
  what: string;
  argv: string[];
  /** The run is a verification: it leaves a summary and must exit 0. */
  verification: boolean;
}

const workerArgs = ['--checks', CHECKS, '--timeout', '10s'];
const variants: Variant[] = [
  {
    name: 'image',
    what: 'node --enable-source-maps kube-node-ready.mjs worker: the image ENTRYPOINT and what the sandbox kubelet runs',
    argv: [process.execPath, '--enable-source-maps', bundle, 'worker', ...workerArgs],
    verification: true,
  },
  {
    name: 'image-no-source-maps',
    what: 'node kube-node-ready.mjs worker: the same bundle without --enable-source-maps',
    argv: [process.execPath, bundle, 'worker', ...workerArgs],
    verification: true,
  },
  {
    name: 'worker-bundle',
    what: 'node worker.mjs: the worker alone, bundled by esbuild like the CLI bundle (no controller code)',
    argv: [process.execPath, workerBundle, ...workerArgs],
    verification: true,
  },
  {
    name: 'worker-bundle-source-maps',
    what: 'node --enable-source-maps worker.mjs',
    argv: [process.execPath, '--enable-source-maps', workerBundle, ...workerArgs],
    verification: true,
  },
  { name: 'node-empty', what: "node -e '': the floor any Node process pays", argv: [process.execPath, '-e', ''], verification: false },
];

// Runs inside the namespace: spawns each command under /usr/bin/time, times it from spawn to exit.
const LAUNCHER = `
const { spawn } = require('node:child_process');
const { readFileSync, rmSync } = require('node:fs');
const { performance } = require('node:perf_hooks');
const { variants, runs, env, timeFile, terminationLog } = JSON.parse(process.argv[1]);
(async () => {
  const samples = [];
  for (const v of variants) {
    for (let i = -1; i < runs; i++) {
      rmSync(terminationLog, { force: true });
      const started = performance.now();
      const child = spawn('/usr/bin/time', ['-o', timeFile, '-f', '%e %U %S %M', ...v.argv], { env, stdio: ['ignore', 'ignore', 'pipe'] });
      let stderr = '';
      child.stderr.on('data', (d) => (stderr += d));
      const killer = setTimeout(() => child.kill('SIGKILL'), 30000);
      const code = await new Promise((r) => child.on('close', (c) => r(c)));
      const wallMs = performance.now() - started;
      clearTimeout(killer);
      const [, user, sys, maxRssKiB] = readFileSync(timeFile, 'utf8').trim().split('\\n').pop().split(' ').map(Number);
      let summary;
      try { summary = JSON.parse(readFileSync(terminationLog, 'utf8')); } catch {}
      if (i >= 0) samples.push({ variant: v.name, code, wallMs, cpuMs: (user + sys) * 1000, maxRssKiB, summary, stderr: code === 0 ? undefined : stderr.slice(-2000) });
    }
  }
  process.stdout.write(JSON.stringify(samples));
})();`;

interface Sample {
  variant: string;
  code: number;
  wallMs: number;
  cpuMs: number;
  maxRssKiB: number;
  summary?: { ok: boolean; durationMs: number; checks: Array<{ name: string; ok: boolean; durationMs: number; error?: string }> };
  stderr?: string;
}

const median = (xs: number[]) => {
  const s = [...xs].sort((a, b) => a - b);
  const m = Math.floor(s.length / 2);
  return s.length % 2 ? s[m]! : (s[m - 1]! + s[m]!) / 2;
};
const round = (x: number, digits = 0) => Number(x.toFixed(digits));

/** The sandbox's own command line (dist/sandbox.mjs), as `make sandbox-up` runs it. */
function sandboxCli(command: 'up' | 'down', dir: string): void {
  execFileSync(process.execPath, [join(root, 'dist', 'sandbox.mjs'), command, '--dir', dir, '--slot', String(slot)], { stdio: ['ignore', 'ignore', 'inherit'] });
}

let conn: SandboxConnection;
let started: string | undefined;
if (values.dir) {
  conn = connectSandbox(values.dir);
} else {
  started = join(tmpdir(), `knr-worker-bench-${slot}`);
  process.stderr.write(`bench: starting a sandbox in ${started} on slot ${slot}\n`);
  sandboxCli('up', started);
  conn = connectSandbox(started);
}
const work = mkdtempSync(join(tmpdir(), 'knr-worker-bench-'));
const core = conn.kc.makeApiClient(k8s.CoreV1Api);
const rbac = conn.kc.makeApiClient(k8s.RbacAuthorizationV1Api);
const namespace = `knr-bench-${Date.now().toString(36)}`;
const binding = `knr-bench-worker-${namespace}`;
try {
  // The worker's ServiceAccount with exactly the RBAC docs/worker.md lists, and a bound token.
  await core.createNamespace({ body: { metadata: { name: namespace } } });
  await core.createNamespacedServiceAccount({ namespace, body: { metadata: { name: 'worker' } } });
  await rbac
    .createClusterRole({
      body: {
        metadata: { name: 'knr-bench-worker' },
        rules: [
          { apiGroups: [''], resources: ['services'], verbs: ['get'] },
          { apiGroups: ['discovery.k8s.io'], resources: ['endpointslices'], verbs: ['list'] },
        ],
      },
    })
    .catch(() => undefined);
  await rbac.createClusterRoleBinding({
    body: {
      metadata: { name: binding },
      roleRef: { apiGroup: 'rbac.authorization.k8s.io', kind: 'ClusterRole', name: 'knr-bench-worker' },
      subjects: [{ kind: 'ServiceAccount', name: 'worker', namespace }],
    },
  });
  const tr = await core.createNamespacedServiceAccountToken({ name: 'worker', namespace, body: { spec: { audiences: [], expirationSeconds: 600 } } });
  const token = tr.status?.token;
  if (!token) throw new Error('TokenRequest returned no token');
  const saDir = join(work, 'serviceaccount');
  mkdirSync(saDir);
  writeFileSync(join(saDir, 'token'), token);
  copyFileSync(certPaths(conn.layout.paths.certs).caCert, join(saDir, 'ca.crt'));
  writeFileSync(join(saDir, 'namespace'), namespace);
  const d = conn.layout.clusterDomain;
  writeFileSync(join(work, 'resolv.conf'), `search ${namespace}.svc.${d} svc.${d} ${d}\nnameserver ${conn.layout.clusterDnsIp}\noptions ndots:5\n`);

  const env = {
    PATH: process.env.PATH ?? '/usr/bin:/bin',
    KUBERNETES_SERVICE_HOST: conn.layout.kubernetesServiceIp,
    KUBERNETES_SERVICE_PORT: '443',
    KNR_SERVICEACCOUNT_DIR: saDir,
    KNR_RESOLV_CONF: join(work, 'resolv.conf'),
    KNR_TERMINATION_LOG: join(work, 'termination-log'),
    NODE_NAME: 'bench-node',
  };
  const input = { variants, runs, env, timeFile: join(work, 'time'), terminationLog: env.KNR_TERMINATION_LOG };
  const loadBefore = loadavg()[0]!;
  const out = await execInSandbox(conn.layout, [process.execPath, '-e', LAUNCHER, JSON.stringify(input)]);
  // Other work on the machine lengthens wall times: the load average says how busy it was.
  const load1m = { before: round(loadBefore, 2), after: round(loadavg()[0]!, 2) };
  if (out.code !== 0) throw new Error(`the launcher failed (exit ${out.code}): ${out.stderr}`);
  const samples = JSON.parse(out.stdout) as Sample[];

  const results = variants.map((v) => {
    const mine = samples.filter((s) => s.variant === v.name);
    const bad = mine.find((s) => s.code !== 0 || (v.verification && s.summary?.ok !== true));
    if (bad) throw new Error(`${v.name}: a run failed (exit ${bad.code}): ${JSON.stringify(bad.summary)} ${bad.stderr ?? ''}`);
    const wall = mine.map((s) => s.wallMs);
    const checksWall = mine.map((s) => s.summary?.durationMs ?? 0);
    const perCheck = v.verification
      ? Object.fromEntries(CHECKS.split(',').map((name) => [name, median(mine.map((s) => s.summary!.checks.find((c) => c.name === name)!.durationMs))]))
      : undefined;
    return {
      name: v.name,
      what: v.what,
      argv: v.argv.map((a) => (a === process.execPath ? 'node' : a === workerBundle ? 'worker.mjs' : a.replace(`${root}/`, ''))),
      wallMs: { median: round(median(wall)), min: round(Math.min(...wall)), max: round(Math.max(...wall)) },
      ...(v.verification
        ? {
            checksWallMs: { median: round(median(checksWall)), max: Math.max(...checksWall) },
            checkDurationsMsMedian: perCheck,
            wallMsExcludingChecks: { median: round(median(mine.map((s) => s.wallMs - (s.summary?.durationMs ?? 0)))) },
          }
        : {}),
      cpuMs: { median: round(median(mine.map((s) => s.cpuMs))), max: round(Math.max(...mine.map((s) => s.cpuMs))) },
      peakRssMiB: { median: round(median(mine.map((s) => s.maxRssKiB)) / 1024, 1), max: round(Math.max(...mine.map((s) => s.maxRssKiB)) / 1024, 1) },
    };
  });

  const target = { wallMsExcludingNetworkWait: 300, peakRssMiB: 80 };
  const verdicts = Object.fromEntries(
    results
      .filter((r) => r.wallMsExcludingChecks)
      .map((r) => [
        r.name,
        {
          wallExcludingChecksUnderTarget: r.wallMsExcludingChecks!.median < target.wallMsExcludingNetworkWait,
          cpuUnderTarget: r.cpuMs.median < target.wallMsExcludingNetworkWait,
          rssUnderTarget: r.peakRssMiB.max < target.peakRssMiB,
        },
      ]),
  );
  const git = (args: string[]) => {
    try {
      return execFileSync('git', args, { cwd: root, stdio: ['ignore', 'pipe', 'ignore'] }).toString().trim();
    } catch {
      return 'unknown';
    }
  };
  const now = new Date();
  const report = {
    bench: 'worker-sandbox',
    date: now.toISOString(),
    commit: git(['rev-parse', '--short=12', 'HEAD']),
    dirtyTree: git(['status', '--porcelain', '--untracked-files=no']) !== '',
    machine: { cpus: cpus().length, cpuModel: cpus()[0]?.model ?? 'unknown', arch: arch(), kernel: release(), node: process.version, load1m },
    sandbox: { kubernetesVersion: conn.state.kubernetesVersion, slot: conn.layout.slot },
    method:
      'Each run is a new process started inside the sandbox network namespace by a launcher that times spawn to exit (wallMs) under /usr/bin/time (peak RSS, user+sys CPU). ' +
      'The worker runs every check against the real cluster with a TokenRequest token of a ServiceAccount bound to the documented RBAC; every run must exit 0 with summary ok. ' +
      'checksWallMs is the summary durationMs (the checks, concurrently, including their waits on the network); wallMsExcludingChecks = wallMs - checksWallMs (Node start-up, module loading, configuration, teardown); ' +
      'cpuMs is the time the process was not waiting. One discarded warm-up run per variant.',
    runs,
    target,
    verdicts,
    results,
  };
  mkdirSync(outDir, { recursive: true });
  const file = join(outDir, `worker-${now.toISOString().slice(0, 10)}.json`);
  writeFileSync(file, `${JSON.stringify(report, null, 2)}\n`);
  for (const r of results) {
    const checks = r.checksWallMs ? `, checks ${r.checksWallMs.median} ms, excluding checks ${r.wallMsExcludingChecks!.median} ms` : '';
    process.stdout.write(`${r.name.padEnd(26)} wall ${String(r.wallMs.median).padStart(4)} ms${checks}, cpu ${r.cpuMs.median} ms, peak RSS ${r.peakRssMiB.max} MiB\n`);
  }
  process.stdout.write(`wrote ${file}\n`);
} finally {
  await rbac.deleteClusterRoleBinding({ name: binding }).catch(() => undefined);
  await core.deleteNamespace({ name: namespace }).catch(() => undefined);
  rmSync(work, { recursive: true, force: true });
  if (started) sandboxCli('down', started);
}
// The kube client keeps connections open: the bench is done.
process.exit(0);
