// The worker as the bundled CLI runs it, plus one line of resource figures when the process ends.
// The process is not told to exit: it must end by itself once runWorker resolves.
import { runWorker } from '../index.js';

process.on('exit', () => {
  const usage = process.resourceUsage();
  process.stderr.write(`${JSON.stringify({ bench: { maxRssKiB: usage.maxRSS, uptimeMs: Math.round(process.uptime() * 1000) } })}\n`);
});
process.exitCode = await runWorker(process.argv.slice(2), process.env);
