// Entry points of the processes that network-namespace tests start inside their namespaces
// (bundled by testing/netns.ts):
//   worker ARGS...                 the worker, as the CLI runs it
//   dns HOST PORT LARGE_NAME N     startSizedDnsServer: LARGE_NAME has N A records, every other name one
import { runWorker } from '../index.js';
import { startSizedDnsServer } from './sized-dns-server.js';

const [role, ...args] = process.argv.slice(2);
if (role === 'worker') {
  process.exitCode = await runWorker(args, process.env);
} else if (role === 'dns') {
  const [host, port, largeName, count] = args as [string, string, string, string];
  const large = Array.from({ length: Number(count) }, (_, i) => `192.0.2.${(i % 250) + 1}`);
  await startSizedDnsServer(host, Number(port), (name) => (name === largeName ? large : ['10.96.0.1']));
  process.stdout.write('ready\n');
} else {
  throw new Error(`unknown role ${String(role)}`);
}
