// The command line of dist/sandbox.mjs (main.ts): which subcommand, its options, and the usage
// `--help` prints. Pure, so it is tested without starting a sandbox (args.test.ts).
import { parseArgs } from 'node:util';

const DIR = '  --dir DIR             the sandbox directory (default: KNR_SANDBOX_DIR, else .sandbox)';
const SLOT = '  --slot N              0..99: its network namespace and addresses, so several run side by side (default 0)';

/** Each subcommand's usage, as `sandbox <command> --help` prints it. */
export const COMMAND_USAGE = {
  up: [
    'usage: sandbox up [--dir DIR] [--slot N] [--nodes N] [--real-nodes N] [--bin-dir DIR] [--log-level info|debug]',
    'Start the sandbox in the background; returns when it is ready.',
    DIR,
    SLOT,
    '  --nodes N             simulated nodes to start with (default 0)',
    '  --real-nodes N        real nodes to start with, real-node-1..N (default 0; about 150 MiB each, docs/sandbox.md#real-nodes)',
    '  --bin-dir DIR         the Kubernetes binaries (default: built or found by packages/sandbox/go/build.sh)',
    '  --log-level LEVEL     info (default) or debug',
  ],
  down: ['usage: sandbox down [--dir DIR] [--slot N]', 'Stop the sandbox; nothing it started is left running.', DIR, SLOT],
  status: ['usage: sandbox status [--dir DIR]', 'Print the running sandbox\'s state (JSON).', DIR],
  'add-nodes': [
    'usage: sandbox add-nodes [COUNT] [--real] [--dir DIR] [--prefix P] [--taint key=value:Effect]... [--label k=v]... [--dns ok|dead|blackhole|lying] [--never-start] [--fault F]...',
    'Add COUNT (default 1) simulated nodes, or real ones with --real; prints their names.',
    DIR,
    '  --real                real nodes: a real kubelet, containerd and CNI each (docs/sandbox.md#real-nodes); --dns and --never-start are for simulated nodes',
    '  --fault F[=VALUE]     a real node starts with this fault (repeatable; pod-mtu=1400; see sandbox fault --help)',
    '  --prefix P            node name prefix (default node)',
    '  --taint k=v:Effect    a taint on each node (repeatable; Effect NoSchedule, PreferNoSchedule or NoExecute)',
    '  --label k=v           a label on each node (repeatable)',
    '  --dns MODE            where the nodes\' pods\' DNS goes: ok, dead (nothing answers), blackhole (never answers), lying (wrong answers)',
    '  --never-start         pods bound to the nodes never start',
  ],
  fault: [
    'usage: sandbox fault NODE FAULT [VALUE] [--dir DIR] | sandbox fault NODE --clear [FAULT]',
    'Break a real node\'s own component, or repair it (--clear: every fault, or the one named).',
    DIR,
    '  FAULT                 cni-config-missing: the node\'s CNI configuration directory emptied (containerd: cni plugin not initialized; the kubelet: NotReady)',
    '                        kube-proxy-stopped: the node\'s kube-proxy stopped and its rules deleted (no Service ClusterIP connects from its pods)',
    '                        kubelet-stopped: the node\'s kubelet killed (its pods run on; the node goes NotReady when its Lease expires)',
    '                        dns-blocked: the node drops its pods\' DNS traffic (port 53) on its way out',
    '                        dns-large-dropped: the node drops UDP DNS answers over 1200 bytes to its pods (small ones and TCP pass)',
    '                        egress-blocked: the node drops what its pods send outside the cluster (10.0.0.0/8)',
    '                        pod-mtu BYTES: the node\'s link carries at most BYTES (576-1500) while its pods keep 1500',
  ],
  exec: ['usage: sandbox exec [--dir DIR] [--slot N] -- COMMAND [ARGS...]', 'Run a command inside the sandbox\'s network namespace.', DIR, SLOT],
  demo: ['usage: sandbox demo [--dir DIR] [--slot N]', 'The `make demo` scenario (KEEP=1 leaves the sandbox up).', DIR, SLOT],
} as const;

export type Command = keyof typeof COMMAND_USAGE | 'daemon';

export const USAGE = [
  'usage: sandbox <command> [options]',
  ...Object.entries(COMMAND_USAGE).map(([name, lines]) => `  ${name.padEnd(10)} ${lines[1]}`),
  'Run \'sandbox <command> --help\' for its options.',
].join('\n');

const OPTIONS = {
  dir: { type: 'string' },
  slot: { type: 'string', default: '0' },
  nodes: { type: 'string', default: '0' },
  'real-nodes': { type: 'string' },
  'bin-dir': { type: 'string' },
  'lease-renew-ms': { type: 'string' },
  'audit-writes': { type: 'boolean' },
  prefix: { type: 'string', default: 'node' },
  taint: { type: 'string', multiple: true },
  label: { type: 'string', multiple: true },
  dns: { type: 'string' },
  'never-start': { type: 'boolean' },
  real: { type: 'boolean' },
  fault: { type: 'string', multiple: true },
  clear: { type: 'boolean' },
  'log-level': { type: 'string', default: 'info' },
  help: { type: 'boolean', short: 'h' },
} as const;

export type Values = ReturnType<typeof parseArgs<{ options: typeof OPTIONS; allowPositionals: true }>>['values'] & { dir: string };

export type CommandLine =
  /** Print `text` on stdout and exit 0. */
  | { kind: 'help'; text: string }
  /** Print `text` on stderr and exit 2. */
  | { kind: 'usage-error'; text: string }
  | { kind: 'run'; command: Command; values: Values; positionals: string[] };

export function parseCommandLine(argv: readonly string[], env: Readonly<Record<string, string | undefined>>): CommandLine {
  const [command, ...rest] = argv;
  if (command === undefined) return { kind: 'usage-error', text: USAGE };
  if (command === 'help' || command === '--help' || command === '-h') return { kind: 'help', text: USAGE };
  if (command !== 'daemon' && !Object.hasOwn(COMMAND_USAGE, command)) return { kind: 'usage-error', text: `sandbox: unknown command "${command}"\n${USAGE}` };
  let parsed;
  try {
    parsed = parseArgs({ args: [...rest], allowPositionals: true, strict: true, options: OPTIONS });
  } catch (err) {
    // node:util's advice on positionals that start with '-' fits none of these commands.
    const message = (err instanceof Error ? err.message : String(err)).replace(/\. To specify a positional argument.*$/s, '');
    return { kind: 'usage-error', text: `sandbox ${command}: ${message} (see sandbox ${command} --help)` };
  }
  const cmd = command as Command;
  if (parsed.values.help) return { kind: 'help', text: cmd === 'daemon' ? 'sandbox daemon: internal (started by sandbox up)' : COMMAND_USAGE[cmd].join('\n') };
  return { kind: 'run', command: cmd, values: { ...parsed.values, dir: parsed.values.dir ?? env.KNR_SANDBOX_DIR ?? '.sandbox' }, positionals: parsed.positionals };
}
