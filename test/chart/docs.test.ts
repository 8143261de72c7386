// The user docs this part of the project owns: relative links point at files that exist (and at
// headings that exist), and the commands they give use the chart's real names and defaults.
import { existsSync, readFileSync } from 'node:fs';
import { dirname, join, relative } from 'node:path';
import { describe, expect, it } from 'vitest';
import { parseConfig } from '../../packages/controller/src/config/load.js';
import { REPO_ROOT } from './helm.js';

const DOCS = [
  'docs/installation.md',
  'docs/operations.md',
  'docs/troubleshooting.md',
  'docs/alerts.md',
  'docs/upgrading.md',
  'deploy/helm/kube-node-ready/README.md',
  'examples/cluster-autoscaler.md',
  'docs/remediation.md',
  'docs/taints.md',
];

/** Written by other parts of the project; allowed to be missing until then. */
const PENDING = new Set<string>();

/** GitHub's anchor for a heading: lowercase, punctuation dropped, spaces to dashes. */
function anchor(heading: string): string {
  return heading
    .trim()
    .toLowerCase()
    .replace(/[`*_]/g, '')
    .replace(/[^\p{L}\p{N} -]/gu, '')
    .replace(/ /g, '-');
}

function anchorsOf(path: string): Set<string> {
  const text = readFileSync(path, 'utf8').replace(/```[\s\S]*?```/g, '');
  return new Set([...text.matchAll(/^#{1,6} (.+)$/gm)].map((m) => anchor(m[1] as string)));
}

describe('docs', () => {
  for (const doc of DOCS) {
    it(`${doc}: relative links resolve`, () => {
      const path = join(REPO_ROOT, doc);
      const text = readFileSync(path, 'utf8').replace(/```[\s\S]*?```/g, '');
      const broken: string[] = [];
      for (const m of text.matchAll(/\]\(([^)\s]+)\)/g)) {
        const target = m[1] as string;
        if (/^[a-z]+:/.test(target)) continue; // http(s), mailto
        const [file, hash] = target.split('#') as [string, string | undefined];
        const resolved = file === '' ? path : join(dirname(path), file);
        const rel = relative(REPO_ROOT, resolved);
        if (!existsSync(resolved)) {
          if (!PENDING.has(rel)) broken.push(`${target} (no file ${rel})`);
          continue;
        }
        if (hash && resolved.endsWith('.md') && !anchorsOf(resolved).has(hash)) broken.push(`${target} (no heading #${hash} in ${rel})`);
      }
      expect(broken).toEqual([]);
    });
  }

  it('commands use the default taint, label, condition and names', () => {
    const defaults = parseConfig({});
    const all = DOCS.map((d) => readFileSync(join(REPO_ROOT, d), 'utf8')).join('\n');
    const taint = defaults.nodeManagement.taints[0];
    expect(all).toContain(`${taint?.key}=${taint?.value}:${taint?.effect}`);
    expect(all).toContain(`${defaults.nodeManagement.verifiedLabel.key}-`); // re-verify: remove the label
    expect(all).toContain(defaults.nodeManagement.condition.type);
    expect(all).toContain('-l app.kubernetes.io/component=worker');
    expect(all).toContain('deployment/kube-node-ready-controller');
    expect(all).toContain(`lease ${defaults.leaderElection.leaseName}`);
    // The Karpenter field is startupTaints; `taints` only ever appears as the thing not to use.
    const flat = all.replace(/\s+/g, ' ');
    for (const m of flat.matchAll(/spec\.template\.spec\.taints/g)) {
      const context = flat.slice(Math.max(0, (m.index ?? 0) - 60), (m.index ?? 0) + 40);
      expect(context, context).toMatch(/\b(not|never|rather than|instead)\b/i);
    }
  });
});
