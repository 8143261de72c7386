// Prints the plain closing line of a vitest run from its JSON report:
//   tests: 183 passed, 0 failed, 2 skipped
// and exits non-zero when the report is missing or nothing ran.
import { readFileSync } from 'node:fs';

const file = process.argv[2] ?? '.test-results.json';
let report;
try {
  report = JSON.parse(readFileSync(file, 'utf8'));
} catch (err) {
  console.error(`test-summary: cannot read ${file}: ${err.message}`);
  process.exit(1);
}
const passed = report.numPassedTests ?? 0;
const failed = report.numFailedTests ?? 0;
const skipped = (report.numPendingTests ?? 0) + (report.numTodoTests ?? 0);
console.log(`tests: ${passed} passed, ${failed} failed, ${skipped} skipped`);
process.exit(failed === 0 && passed > 0 ? 0 : 1);
