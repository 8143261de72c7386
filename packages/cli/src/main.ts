// `kube-node-ready`: the one entry point of the image (controller, worker) and of the operator tools.
import { ExitCode, versionString } from '@kube-node-ready/core';

const USAGE = `kube-node-ready: verify a new node's network from its pod network before opening it to workloads

usage: kube-node-ready <command> [options]

commands:
  controller   watch nodes, run a worker pod per unverified node, open or fail the node
  worker       run the checks (in a pod on the node under verification)
  agent        DaemonSet mode: verify and open the node this pod runs on
  status       table of nodes with their verification state, and the controller's leader
  verify NODE  start a new verification of NODE
  version      print the version and commit (also --version)

Run 'kube-node-ready <command> --help' for a command's options.`;

export async function main(argv: string[], env: NodeJS.ProcessEnv): Promise<number> {
  const [command, ...rest] = argv;
  switch (command) {
    case 'controller': {
      const { runController } = await import('@kube-node-ready/controller');
      return runController(rest, env);
    }
    case 'agent': {
      const { runAgent } = await import('@kube-node-ready/controller');
      return runAgent(rest, env);
    }
    case 'worker': {
      const { runWorker } = await import('@kube-node-ready/worker');
      return runWorker(rest, env);
    }
    case 'status': {
      const { runStatus } = await import('./status.js');
      return runStatus(rest, env);
    }
    case 'verify': {
      const { runVerify } = await import('./verify.js');
      return runVerify(rest, env);
    }
    case 'version':
    case '--version':
    case '-v':
      console.log(versionString());
      return ExitCode.OK;
    case undefined:
    case 'help':
    case '--help':
    case '-h':
      console.log(USAGE);
      return command === undefined ? ExitCode.CONFIG_ERROR : ExitCode.OK;
    default:
      console.error(`kube-node-ready: unknown command "${command}"\n\n${USAGE}`);
      return ExitCode.CONFIG_ERROR;
  }
}

main(process.argv.slice(2), process.env).then(
  (code) => {
    // Every command is done when main resolves: exit without waiting on stray handles.
    process.exit(code);
  },
  (err: unknown) => {
    console.error(`kube-node-ready: internal error: ${err instanceof Error ? (err.stack ?? err.message) : String(err)}`);
    process.exit(ExitCode.INTERNAL_ERROR);
  },
);
