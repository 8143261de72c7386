// `kube-node-ready status` and `kube-node-ready verify`, run from the bundle against the sandbox.
import { execFile } from 'node:child_process';
import { mkdtempSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { promisify } from 'node:util';
import { describe, expect, it } from 'vitest';
import { NodeVerificationApi, type NodeVerification, type NodeVerificationStatus } from '@kube-node-ready/controller';
import { k8s, repoRoot } from '@kube-node-ready/sandbox';
import { addNode, core, deleteNode, readVerification, sandbox, uniqueName } from '../../../test/sandbox.js';

const exec = promisify(execFile);
const cli = (args: string[]) =>
  exec(process.execPath, [join(repoRoot(), 'dist', 'kube-node-ready.mjs'), ...args, '--kubeconfig', sandbox().state.kubeconfig]).then(
    (r) => ({ code: 0, ...r }),
    (e: { code: number; stdout: string; stderr: string }) => ({ code: e.code, stdout: e.stdout, stderr: e.stderr }),
  );

const { group, version, plural } = NodeVerificationApi;
const custom = () => sandbox().kc.makeApiClient(k8s.CustomObjectsApi);

/** A NodeVerification for `node` with `status`, as the controller keeps one (owned by the Node, created with its status: ADR 0006). */
async function storeProgress(node: string, status: NodeVerificationStatus): Promise<void> {
  const live = await core().readNode({ name: node });
  const body: NodeVerification = {
    apiVersion: NodeVerificationApi.apiVersion,
    kind: NodeVerificationApi.kind,
    metadata: { name: node, ownerReferences: [{ apiVersion: 'v1', kind: 'Node', name: node, uid: live.metadata!.uid! }] },
    spec: { nodeName: node, nodeUID: live.metadata!.uid! },
    status,
  };
  await custom().createClusterCustomObject({ group, version, plural, body });
}

describe('kube-node-ready status and verify', () => {
  it('verify NODE drops the verified label and its NodeVerification, puts the taint back; status shows the node before and after', async () => {
    const id = uniqueName('cli');
    const taint = { key: `${id}.kube-node-ready.io/unverified`, value: 'true', effect: 'NoSchedule' };
    const label = { key: `${id}.kube-node-ready.io/verified`, value: 'true' };
    const configFile = join(mkdtempSync(join(tmpdir(), 'knr-cli-')), 'config.yaml');
    writeFileSync(configFile, `nodeManagement:\n  taints:\n    - key: ${taint.key}\n      value: "true"\n      effect: NoSchedule\n  verifiedLabel:\n    key: ${label.key}\n    value: "true"\n`);
    const node = await addNode({ prefix: 'cli', labels: { [label.key]: 'true', team: 'a' }, annotations: { other: 'keep' }, taints: [{ key: 'other/taint', value: 'x', effect: 'NoSchedule' }] });
    // An open node verified once, re-verified with --no-taint: it stays open and keeps its NodeVerification.
    const open = await addNode({ prefix: 'cli-open', labels: { [label.key]: 'true' } });
    try {
      const passed: NodeVerificationStatus = { phase: 'Passed', attempt: 1, failures: 0, verifiedAt: new Date().toISOString().replace(/\.\d{3}Z$/, 'Z'), lastAttempt: { attempt: 1, reason: 'Passed', message: 'all checks passed' } };
      await storeProgress(node, passed);
      await storeProgress(open, passed);

      const before = await cli(['status', '--config', configFile, '-o', 'json']);
      expect(before.code, before.stderr).toBe(0);
      const row = (JSON.parse(before.stdout) as { nodes: Array<{ node: string; state: string; attempt: number; verifiedAt?: string }> }).nodes.find((n) => n.node === node);
      expect(row).toMatchObject({ state: 'Verified', attempt: 1, verifiedAt: expect.any(String) });

      const dryRun = await cli(['verify', node, '--config', configFile, '--dry-run']);
      expect(dryRun.code, dryRun.stderr).toBe(0);
      expect(dryRun.stdout).toContain(`nodeverification/${node}: delete`);
      expect(await readVerification(node), 'a dry run deletes nothing').toBeDefined();

      const verify = await cli(['verify', node, '--config', configFile]);
      expect(verify.code, verify.stderr).toBe(0);
      expect(verify.stdout).toContain(`node/${node}: verification restarted (taint set until it passes)`);
      const after = await core().readNode({ name: node });
      expect(after.metadata?.labels?.[label.key]).toBeUndefined();
      expect(after.metadata?.labels?.team).toBe('a');
      expect(after.metadata?.annotations?.other).toBe('keep');
      expect(after.spec?.taints?.map((t) => t.key)).toEqual(['other/taint', taint.key]);
      expect(await readVerification(node), 'the NodeVerification is deleted').toBeUndefined();

      const table = await cli(['status', '--config', configFile]);
      expect(table.code).toBe(0);
      expect(table.stdout.split('\n').find((l) => l.startsWith(node))).toMatch(new RegExp(`^${node}\\s+Pending\\s+-`));

      // Again: nothing left to delete, the node already closed: still a restart, not an error.
      const again = await cli(['verify', node, '--config', configFile]);
      expect(again.code, again.stderr).toBe(0);

      const keepOpen = await cli(['verify', open, '--config', configFile, '--no-taint']);
      expect(keepOpen.code, keepOpen.stderr).toBe(0);
      const opened = await core().readNode({ name: open });
      expect(opened.metadata?.labels?.[label.key]).toBeUndefined();
      expect(opened.spec?.taints ?? []).toEqual([]);
      expect((await readVerification(open))?.status).toMatchObject({ phase: 'Passed', attempt: 1 });
      // Without the label and without a NodeVerification, nothing would have the controller verify it again: refused.
      await custom().deleteClusterCustomObject({ group, version, plural, name: open });
      const refused = await cli(['verify', open, '--config', configFile, '--no-taint']);
      expect(refused.code).toBe(2);
      expect(refused.stderr).toMatch(/--no-taint: the node carries no verification taint and no NodeVerification of its own/);

      const missing = await cli(['verify', `${node}-absent`, '--config', configFile]);
      expect(missing.code).toBe(3);
      expect(missing.stderr).toMatch(/not ?found/i);
      const usage = await cli(['verify']);
      expect(usage.code).toBe(2);
    } finally {
      await Promise.all([deleteNode(node), deleteNode(open)]);
    }
  });
});
