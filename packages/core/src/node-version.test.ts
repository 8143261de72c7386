import { readFileSync } from 'node:fs';
import { describe, expect, it } from 'vitest';
import { nodeVersionProblem, REQUIRED_NODE_MAJOR } from './node-version.js';

describe('nodeVersionProblem', () => {
  it('accepts every release of the required major, written either way', () => {
    for (const version of ['v24.0.0', 'v24.21.0', '24.21.0', 'v24.22.1-nightly']) expect(nodeVersionProblem('kube-node-ready', version), version).toBeUndefined();
  });

  it('refuses an older major in one line: the version it runs on, the one it needs, and how to get it', () => {
    expect(nodeVersionProblem('kube-node-ready', 'v20.20.2', '/usr/bin/node')).toBe(
      'kube-node-ready: needs Node.js 24, but runs on Node.js v20.20.2 (/usr/bin/node). ' +
        'In the repository, `make deps` installs Node.js 24 into node_modules/.bin: run `export PATH=$PWD/node_modules/.bin:$PATH` ' +
        'from its top directory and try again. The kube-node-ready image has it already.',
    );
    expect(nodeVersionProblem('kube-node-ready', 'v20.20.2', '/usr/bin/node')).not.toContain('\n');
    expect(nodeVersionProblem('sandbox', '22.1.0')).toMatch(/^sandbox: needs Node.js 24, but runs on Node.js v22\.1\.0\. In the repository/);
  });

  it('refuses a newer major too (tested on 24 only), and a version it cannot read', () => {
    expect(nodeVersionProblem('bench', 'v25.0.0')).toMatch(/^bench: needs Node.js 24, but runs on Node.js v25\.0\.0\./);
    expect(nodeVersionProblem('chaos', 'v2')).toMatch(/^chaos: needs Node.js 24/);
  });

  it('requires the major package.json "engines" names', () => {
    const engines = (JSON.parse(readFileSync(new URL('../../../package.json', import.meta.url), 'utf8')) as { engines: { node: string } }).engines.node;
    expect(engines).toBe(`>=${REQUIRED_NODE_MAJOR} <${REQUIRED_NODE_MAJOR + 1}`);
  });
});
