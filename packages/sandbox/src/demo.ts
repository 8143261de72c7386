import { readFileSync } from 'node:fs';
import { join } from 'node:path';
import { createIgnoreExists, k8s, loadKubeConfig, statusCode } from './kube.js';
import { simulatedNode } from './node-registry.js';
import { sleep } from './proc.js';
import { startSandbox, stopSandbox } from './sandbox.js';

export interface DemoOptions {
  dir: string;
  slot: number;
  keep: boolean;
  out: (line: string) => void;
}

const TAINT = { key: 'node-ready/unverified', value: 'true', effect: 'NoSchedule' };

/**
 * The demo scenario on a fresh sandbox. Until the controller lands, it plays the controller's
 * part by hand: tainted nodes join, one kube-node-ready pod per node runs through the real
 * scheduler and simulated kubelet, and the table shows what each node reported.
 * Exits non-zero unless every node's pod ran and reported.
 */
export async function runDemo(opts: DemoOptions): Promise<number> {
  const { out } = opts;
  const state = await startSandbox({ dir: opts.dir, slot: opts.slot, progress: out });
  try {
    const kc = loadKubeConfig(state.kubeconfig);
    const core = kc.makeApiClient(k8s.CoreV1Api);
    const names = ['demo-node-a', 'demo-node-b', 'demo-node-c'];
    out(`demo: ${names.length} nodes join with the taint ${TAINT.key}=${TAINT.value}:${TAINT.effect}`);
    for (const name of names) await createIgnoreExists(() => core.createNode({ body: simulatedNode({ name, taints: [TAINT] }) }));
    for (const name of names) {
      await createIgnoreExists(() =>
        core.createNamespacedPod({
          namespace: 'kube-system',
          body: {
            metadata: { name: `demo-${name}` },
            spec: {
              restartPolicy: 'Never',
              affinity: { nodeAffinity: { requiredDuringSchedulingIgnoredDuringExecution: { nodeSelectorTerms: [{ matchFields: [{ key: 'metadata.name', operator: 'In', values: [name] }] }] } } },
              tolerations: [{ key: TAINT.key, operator: 'Exists', effect: 'NoSchedule' }],
              containers: [{ name: 'worker', image: 'kube-node-ready:dev', args: ['--version'], terminationMessagePolicy: 'FallbackToLogsOnError' }],
            },
          },
        }),
      );
    }
    const deadline = Date.now() + 60_000;
    const rows = new Map<string, string[]>();
    while (Date.now() < deadline) {
      let done = 0;
      for (const name of names) {
        const pod = await core.readNamespacedPod({ name: `demo-${name}`, namespace: 'kube-system' }).catch((err) => {
          if (statusCode(err) === 404) return undefined;
          throw err;
        });
        const t = pod?.status?.containerStatuses?.[0]?.state?.terminated;
        const output = t ? readLog(join(opts.dir, 'pods', pod!.metadata!.uid!, 'worker.log')) : '';
        rows.set(name, [name, pod?.status?.phase ?? 'Pending', t ? String(t.exitCode) : '-', output]);
        if (pod?.status?.phase === 'Succeeded') done++;
      }
      if (done === names.length) break;
      await sleep(250);
    }
    table(out, ['NODE', 'POD PHASE', 'EXIT', 'OUTPUT'], [...rows.values()]);
    const ok = [...rows.values()].every((r) => r[1] === 'Succeeded' && r[3]?.startsWith('kube-node-ready'));
    out(ok ? 'demo: every node ran kube-node-ready from the pod network' : 'demo: FAILED: not every node reported');
    if (opts.keep) out(`demo: sandbox left running (KEEP=1): kubectl --kubeconfig ${state.kubeconfig} get nodes`);
    return ok ? 0 : 1;
  } finally {
    if (!opts.keep) await stopSandbox(opts.dir, opts.slot, out);
  }
}

function readLog(file: string): string {
  try {
    return readFileSync(file, 'utf8').trim().split('\n')[0] ?? '';
  } catch {
    return '';
  }
}

export function table(out: (l: string) => void, header: string[], rows: string[][]): void {
  const widths = header.map((h, i) => Math.max(h.length, ...rows.map((r) => (r[i] ?? '').length)));
  const line = (cells: string[]) => cells.map((c, i) => (c ?? '').padEnd(widths[i]!)).join('  ').trimEnd();
  out(line(header));
  for (const r of rows) out(line(r));
}
