import { describe, expect, it } from 'vitest';
import { COMMAND_USAGE, parseCommandLine, USAGE } from './args.js';

const parse = (...argv: string[]) => parseCommandLine(argv, {});

describe('sandbox command line', () => {
  it('every subcommand\'s --help (or -h) is its usage, printed with exit 0', () => {
    for (const command of Object.keys(COMMAND_USAGE) as Array<keyof typeof COMMAND_USAGE>) {
      const help = { kind: 'help', text: COMMAND_USAGE[command].join('\n') };
      expect(parse(command, '--help'), command).toEqual(help);
      expect(parse(command, '-h'), command).toEqual(help);
      expect(help.text, command).toMatch(new RegExp(`^usage: sandbox ${command}\\b`));
    }
    // Among the command's other arguments, too.
    expect(parse('add-nodes', '3', '--taint', 'a=b:NoSchedule', '--help')).toEqual({ kind: 'help', text: COMMAND_USAGE['add-nodes'].join('\n') });
  });

  it('the overview for help, --help and -h; without a command it is a usage error', () => {
    for (const arg of ['help', '--help', '-h']) expect(parse(arg)).toEqual({ kind: 'help', text: USAGE });
    expect(parse()).toEqual({ kind: 'usage-error', text: USAGE });
    for (const command of Object.keys(COMMAND_USAGE)) expect(USAGE).toContain(`  ${command} `);
  });

  it('an unknown command or option is a usage error that says which, and where to look', () => {
    expect(parse('start')).toEqual({ kind: 'usage-error', text: `sandbox: unknown command "start"\n${USAGE}` });
    expect(parse('add-nodes', '--count', '3')).toEqual({ kind: 'usage-error', text: "sandbox add-nodes: Unknown option '--count' (see sandbox add-nodes --help)" });
    expect(parse('up', '--nodes')).toEqual({ kind: 'usage-error', text: "sandbox up: Option '--nodes <value>' argument missing (see sandbox up --help)" });
  });

  it('a command\'s arguments: options, positionals, defaults; --help after "--" belongs to the command run by exec', () => {
    expect(parse('add-nodes', '2', '--taint', 'k=v:NoSchedule', '--label', 'a=b', '--never-start')).toEqual({
      kind: 'run',
      command: 'add-nodes',
      values: { dir: '.sandbox', slot: '0', nodes: '0', prefix: 'node', 'log-level': 'info', taint: ['k=v:NoSchedule'], label: ['a=b'], 'never-start': true },
      positionals: ['2'],
    });
    expect(parseCommandLine(['exec', '--', 'ip', '--help'], { KNR_SANDBOX_DIR: '/tmp/sb' })).toMatchObject({ kind: 'run', command: 'exec', values: { dir: '/tmp/sb' }, positionals: ['ip', '--help'] });
    expect(parse('daemon', '--dir=/x', '--slot=3', '--bin-dir=/b', '--nodes=0', '--log-level=info')).toMatchObject({ kind: 'run', command: 'daemon', values: { dir: '/x', slot: '3', 'bin-dir': '/b' } });
  });
});
