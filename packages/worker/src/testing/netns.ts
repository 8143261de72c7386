import { execFileSync, spawn, type ChildProcess } from 'node:child_process';
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { build } from 'esbuild';

/**
 * Two network namespaces joined by a veth pair, for tests of what only a real packet path shows
 * (MTU, packet size). "pod" holds the worker (its default route leaves by eth0, as in a pod),
 * "node" the servers. Only addresses inside these namespaces are used; nothing reaches the
 * machine's own interfaces. Needs root and iproute2: without them the test fails, it is not
 * skipped.
 */
export interface NetnsPair {
  pod: string;
  node: string;
  podIp: string;
  nodeIp: string;
  /**
   * Runs `node BUNDLE ARGS` inside `ns` with `ip netns exec` (which mounts the namespace's own
   * /sys, as a container runtime does), or with `nsenter --net` (`hostSysfs`: /sys stays the
   * machine's, as in the sandbox's simulated kubelet).
   */
  spawnIn(ns: string, args: string[], options?: { hostSysfs?: boolean }): ChildProcess;
  exec(ns: string, command: string[]): string;
  cleanup(): void;
}

export interface PairOptions {
  /** MTU of eth0 in the pod namespace. */
  podMtu: number;
  /** MTU of eth0 in the node namespace: a smaller one drops larger packets from the pod (veth checks the receiver's MTU). */
  nodeMtu: number;
  /** Packets larger than this (IP bytes) leaving the node namespace towards the pod are dropped (tc tbf). */
  nodeToPodMaxPacket?: number;
  /**
   * UDP packets larger than this (IP bytes) arriving in the pod namespace are dropped (nft, before
   * delivery, so the sender sees no error); TCP passes: a path that loses large UDP answers while
   * TCP gets through (as with MSS clamping on an overlay).
   */
  podDropsUdpOver?: number;
}

let pairs = 0;
const PREFIX = 'knr-w16-';

export function createPair(bundle: string, options: PairOptions): NetnsPair {
  const id = `${PREFIX}${process.pid}-${pairs++}`;
  const pod = `${id}-pod`;
  const node = `${id}-node`;
  const podIp = '10.216.16.1';
  const nodeIp = '10.216.16.2';
  const ip = (...args: string[]) => execFileSync('ip', args, { stdio: ['ignore', 'pipe', 'pipe'] }).toString();
  const exec = (ns: string, command: string[]) => execFileSync('ip', ['netns', 'exec', ns, ...command], { stdio: ['ignore', 'pipe', 'pipe'] }).toString();
  const children: ChildProcess[] = [];
  const cleanup = () => {
    for (const c of children) c.kill('SIGKILL');
    for (const ns of [pod, node]) {
      try {
        ip('netns', 'del', ns);
      } catch {
        // not created
      }
    }
  };
  try {
    ip('netns', 'add', pod);
    ip('netns', 'add', node);
    ip('link', 'add', 'eth0', 'netns', pod, 'type', 'veth', 'peer', 'name', 'eth0', 'netns', node);
    for (const [ns, address, mtu] of [
      [pod, podIp, options.podMtu],
      [node, nodeIp, options.nodeMtu],
    ] as const) {
      exec(ns, ['ip', 'link', 'set', 'lo', 'up']);
      exec(ns, ['ip', 'link', 'set', 'eth0', 'mtu', String(mtu), 'up']);
      exec(ns, ['ip', 'addr', 'add', `${address}/24`, 'dev', 'eth0']);
    }
    exec(pod, ['ip', 'route', 'add', 'default', 'dev', 'eth0']);
    if (options.nodeToPodMaxPacket !== undefined) {
      // tbf drops every packet larger than its bucket (the size counts the 14-byte Ethernet header).
      const burst = String(options.nodeToPodMaxPacket + 14);
      exec(node, ['tc', 'qdisc', 'add', 'dev', 'eth0', 'root', 'tbf', 'rate', '1gbit', 'burst', burst, 'mtu', burst, 'limit', '1000000']);
    }
    if (options.podDropsUdpOver !== undefined) {
      const rules = `table inet knr { chain in { type filter hook prerouting priority raw; meta l4proto udp meta length > ${options.podDropsUdpOver} drop; }; }`;
      exec(pod, ['nft', rules]);
    }
  } catch (err) {
    cleanup();
    const stderr = (err as { stderr?: Buffer }).stderr?.toString() ?? '';
    throw new Error(`cannot set up network namespaces (this test needs root and iproute2): ${String(err)} ${stderr}`, { cause: err });
  }
  return {
    pod,
    node,
    podIp,
    nodeIp,
    exec,
    spawnIn: (ns, args, spawnOptions = {}) => {
      const command = spawnOptions.hostSysfs ? ['nsenter', `--net=/run/netns/${ns}`, '--'] : ['ip', 'netns', 'exec', ns];
      const child = spawn(command[0] as string, [...command.slice(1), process.execPath, bundle, ...args], { stdio: ['ignore', 'pipe', 'pipe'] });
      children.push(child);
      return child;
    },
    cleanup,
  };
}

/** Bundles testing/netns-main.ts (the worker and the test DNS server) into one file for `ip netns exec node`. */
export async function bundleNetnsMain(): Promise<{ file: string; remove(): void }> {
  const dir = mkdtempSync(join(tmpdir(), 'knr-w16-bundle-'));
  const file = join(dir, 'netns-main.mjs');
  await build({
    entryPoints: [fileURLToPath(new URL('./netns-main.ts', import.meta.url))],
    outfile: file,
    bundle: true,
    platform: 'node',
    format: 'esm',
    target: 'node24',
    conditions: ['source'],
    logLevel: 'warning',
    external: ['pino-pretty'],
    banner: { js: "import { createRequire as __knrCreateRequire } from 'node:module'; const require = __knrCreateRequire(import.meta.url);" },
  });
  return { file, remove: () => rmSync(dir, { recursive: true, force: true }) };
}

/** Waits for a child's first stdout line (a server saying it is ready), failing with its stderr. */
export function readyLine(child: ChildProcess, timeoutMs = 10_000): Promise<string> {
  return new Promise((resolve, reject) => {
    let stderr = '';
    child.stderr?.on('data', (c: Buffer) => (stderr += c.toString()));
    const timer = setTimeout(() => reject(new Error(`no ready line within ${timeoutMs}ms; stderr: ${stderr}`)), timeoutMs);
    child.stdout?.once('data', (c: Buffer) => {
      clearTimeout(timer);
      resolve(c.toString().trim());
    });
    child.once('exit', (code) => {
      clearTimeout(timer);
      reject(new Error(`exited with ${String(code)} before it was ready; stderr: ${stderr}`));
    });
  });
}

/** Waits for a child to exit; its exit code and output. */
export function exited(child: ChildProcess): Promise<{ code: number | null; stdout: string; stderr: string }> {
  let stdout = '';
  let stderr = '';
  child.stdout?.on('data', (c: Buffer) => (stdout += c.toString()));
  child.stderr?.on('data', (c: Buffer) => (stderr += c.toString()));
  return new Promise((resolve) => child.once('exit', (code) => resolve({ code, stdout, stderr })));
}
