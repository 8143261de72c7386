import { fileURLToPath } from 'node:url';
import { describe, expect, it } from 'vitest';
import { renderConfigDocs } from './docs.js';

const DOC = fileURLToPath(new URL('../../../../docs/configuration.md', import.meta.url));
const REGENERATE = 'npx vitest run --project unit packages/controller/src/config/docs.test.ts -u';

describe('docs/configuration.md', () => {
  it('is the one generated from the schema', async () => {
    await expect(renderConfigDocs(), `docs/configuration.md is out of date; regenerate it with: ${REGENERATE}`).toMatchFileSnapshot(DOC);
  });

  it('documents every key with its default', () => {
    const doc = renderConfigDocs();
    expect(doc).toContain('| `reconciliation.maxRetries` | integer | `5` |');
    expect(doc).toContain('| `worker.timeout` | duration | `"60s"` |');
    expect(doc).toContain('| `nodeManagement.taints[].effect` | enum |');
    expect(doc).toContain('| `leaderElection.leaseDuration` | duration | `"15s"` |');
    expect(doc).toContain('key: node-ready/unverified');
  });
});
