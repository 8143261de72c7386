import type { SandboxLayout } from './layout.js';
import { run, runOk } from './proc.js';

/**
 * Creates the sandbox's network namespace: loopback up, all of 10.0.0.0/8 routed to the
 * namespace's loopback (cluster addresses are local there), and a veth pair so the host can
 * reach the apiserver at layout.apiHost. Idempotent: an existing namespace is replaced.
 */
export async function createNetns(layout: SandboxLayout): Promise<void> {
  await deleteNetns(layout);
  const ns = layout.netns;
  const inNs = (...args: string[]) => runOk('ip', ['netns', 'exec', ns, 'ip', ...args]);
  try {
    await runOk('ip', ['netns', 'add', ns]);
  } catch (err) {
    throw new Error(
      `cannot create network namespace ${ns}: the sandbox needs root (CAP_NET_ADMIN, CAP_SYS_ADMIN) and iproute2. ${(err as Error).message}`,
      { cause: err },
    );
  }
  await inNs('link', 'set', 'lo', 'up');
  await inNs('route', 'add', 'local', '10.0.0.0/8', 'dev', 'lo');
  await runOk('ip', ['link', 'add', layout.hostVeth, 'type', 'veth', 'peer', 'name', layout.nsVeth]);
  await runOk('ip', ['link', 'set', layout.nsVeth, 'netns', ns]);
  await runOk('ip', ['addr', 'add', `${layout.hostVethIp}/30`, 'dev', layout.hostVeth]);
  await runOk('ip', ['link', 'set', layout.hostVeth, 'up']);
  await inNs('addr', 'add', `${layout.apiHost}/30`, 'dev', layout.nsVeth);
  await inNs('link', 'set', layout.nsVeth, 'up');
}

/** Removes the namespace (and with it the veth pair). No error when it does not exist. */
export async function deleteNetns(layout: SandboxLayout): Promise<void> {
  await run('ip', ['netns', 'del', layout.netns]);
  await run('ip', ['link', 'del', layout.hostVeth]);
}

/** argv prefix that runs a command inside the namespace. */
export function inNetns(layout: SandboxLayout, argv: string[]): string[] {
  return ['ip', 'netns', 'exec', layout.netns, ...argv];
}
