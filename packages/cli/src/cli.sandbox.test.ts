// `kube-node-ready status` and `kube-node-ready verify`, run from the bundle against the sandbox.
import { execFile } from 'node:child_process';
import { mkdtempSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { promisify } from 'node:util';
import { describe, expect, it } from 'vitest';
import { repoRoot } from '@kube-node-ready/sandbox';
import { addNode, core, deleteNode, sandbox, uniqueName } from '../../../test/sandbox.js';

const exec = promisify(execFile);
const cli = (args: string[]) =>
  exec(process.execPath, [join(repoRoot(), 'dist', 'kube-node-ready.mjs'), ...args, '--kubeconfig', sandbox().state.kubeconfig]).then(
    (r) => ({ code: 0, ...r }),
    (e: { code: number; stdout: string; stderr: string }) => ({ code: e.code, stdout: e.stdout, stderr: e.stderr }),
  );

describe('kube-node-ready status and verify', () => {
  it('verify NODE drops the verified label and our progress, puts the taint back; status shows the node before and after', async () => {
    const id = uniqueName('cli');
    const taint = { key: `${id}.kube-node-ready.io/unverified`, value: 'true', effect: 'NoSchedule' };
    const label = { key: `${id}.kube-node-ready.io/verified`, value: 'true' };
    const configFile = join(mkdtempSync(join(tmpdir(), 'knr-cli-')), 'config.yaml');
    writeFileSync(configFile, `nodeManagement:\n  taints:\n    - key: ${taint.key}\n      value: "true"\n      effect: NoSchedule\n  verifiedLabel:\n    key: ${label.key}\n    value: "true"\n`);
    const node = await addNode({ prefix: 'cli', labels: { [label.key]: 'true', team: 'a' }, annotations: { other: 'keep' }, taints: [{ key: 'other/taint', value: 'x', effect: 'NoSchedule' }] });
    try {
      const live = await core().readNode({ name: node });
      await core().patchNode({
        name: node,
        body: [
          { op: 'add', path: '/metadata/annotations/kube-node-ready.io~1node-uid', value: live.metadata!.uid },
          { op: 'add', path: '/metadata/annotations/kube-node-ready.io~1attempt', value: '1' },
          { op: 'add', path: '/metadata/annotations/kube-node-ready.io~1failures', value: '0' },
          { op: 'add', path: '/metadata/annotations/kube-node-ready.io~1phase', value: 'Passed' },
          { op: 'add', path: '/metadata/annotations/kube-node-ready.io~1last-outcome', value: 'Passed' },
          { op: 'add', path: '/metadata/annotations/kube-node-ready.io~1verified-at', value: new Date().toISOString() },
        ],
      });

      const before = await cli(['status', '--config', configFile, '-o', 'json']);
      expect(before.code, before.stderr).toBe(0);
      const row = (JSON.parse(before.stdout) as { nodes: Array<{ node: string; state: string; attempt: number }> }).nodes.find((n) => n.node === node);
      expect(row).toMatchObject({ state: 'Verified', attempt: 1 });

      const verify = await cli(['verify', node, '--config', configFile]);
      expect(verify.code, verify.stderr).toBe(0);
      const after = await core().readNode({ name: node });
      expect(after.metadata?.labels?.[label.key]).toBeUndefined();
      expect(after.metadata?.labels?.team).toBe('a');
      expect(Object.keys(after.metadata?.annotations ?? {}).filter((k) => k.startsWith('kube-node-ready.io/'))).toEqual([]);
      expect(after.metadata?.annotations?.other).toBe('keep');
      expect(after.spec?.taints?.map((t) => t.key)).toEqual(['other/taint', taint.key]);

      const table = await cli(['status', '--config', configFile]);
      expect(table.code).toBe(0);
      expect(table.stdout.split('\n').find((l) => l.startsWith(node))).toMatch(new RegExp(`^${node}\\s+Pending\\s+-`));

      const missing = await cli(['verify', `${node}-absent`, '--config', configFile]);
      expect(missing.code).toBe(3);
      expect(missing.stderr).toMatch(/not ?found/i);
      const usage = await cli(['verify']);
      expect(usage.code).toBe(2);
    } finally {
      await deleteNode(node);
    }
  });
});
