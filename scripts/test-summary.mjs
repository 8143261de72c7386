// Prints the plain closing line of vitest runs from their JSON reports (added up):
//   tests: 183 passed, 0 failed, 2 skipped
// preceded by every failed test (file, name, the first lines of its error) and every test file
// that failed outside a test (an import error, a failing hook), so the end of a long log (all that
// a CI page may keep) says what failed. Exits non-zero when a report is missing, nothing ran or
// anything failed.
import { readFileSync } from 'node:fs';
import { relative } from 'node:path';

const files = process.argv.length > 2 ? process.argv.slice(2) : ['.test-results.json'];
const MAX_LINES = 12;
let passed = 0;
let failed = 0;
let skipped = 0;
let unsuccessful = false;
const failures = [];
const COLOURS = new RegExp(`${String.fromCharCode(27)}\\[[0-9;]*m`, 'g');
const clip = (text) => {
  const lines = String(text).replace(COLOURS, '').split('\n');
  return lines.slice(0, MAX_LINES).map((l) => `      ${l}`).join('\n') + (lines.length > MAX_LINES ? `\n      ... (${lines.length - MAX_LINES} more lines)` : '');
};
for (const file of files) {
  let report;
  try {
    report = JSON.parse(readFileSync(file, 'utf8'));
  } catch (err) {
    console.error(`test-summary: cannot read ${file}: ${err.message}`);
    process.exit(1);
  }
  passed += report.numPassedTests ?? 0;
  failed += report.numFailedTests ?? 0;
  skipped += (report.numPendingTests ?? 0) + (report.numTodoTests ?? 0);
  if (report.success === false) unsuccessful = true;
  for (const suite of report.testResults ?? []) {
    const where = relative(process.cwd(), suite.name ?? '?');
    const failedTests = (suite.assertionResults ?? []).filter((t) => t.status === 'failed');
    for (const t of failedTests) {
      failures.push(`  FAIL ${where} > ${t.fullName}\n${clip((t.failureMessages ?? []).join('\n') || '(no message)')}`);
      // What the test left for its failure (real-nodes.ts: the nodes' logs and network), whole.
      if (t.meta?.diagnostics) failures.push(`    what it saw:\n${String(t.meta.diagnostics).split('\n').map((l) => `      ${l}`).join('\n')}`);
    }
    if (suite.status === 'failed' && failedTests.length === 0) failures.push(`  FAIL ${where} (outside any test)\n${clip(suite.message || '(no message)')}`);
  }
}
if (failures.length) console.log(`failed:\n${failures.join('\n')}`);
else if (unsuccessful) console.log('failed: no test failed, but vitest reported an error outside the tests (a setup or teardown error, an unhandled rejection); see the log above');
console.log(`tests: ${passed} passed, ${failed} failed, ${skipped} skipped`);
process.exit(failed === 0 && failures.length === 0 && !unsuccessful && passed > 0 ? 0 : 1);
