// Real nodes: a real kubelet (built with the other Kubernetes binaries), Debian's containerd and
// runc, and the CNI bridge plugin, each node in a network namespace of its own as its host network.
// The node's InternalIP is on a bridge in the sandbox's namespace shared by every real node; its
// pods get addresses from its own pod CIDR (host-local IPAM) and reach the other nodes' pods, the
// apiserver and the Service addresses through the sandbox's namespace. Images come from a real
// registry (CNCF Distribution) in the sandbox's namespace: the product's image as `make image` built
// it, and a pause image made from the Kubernetes module's own pause.c.
//
// Each node runs a real kube-proxy (nftables mode) in its namespace; the sandbox drops Service
// addresses arriving from the real nodes' bridge before its own translation (a network has no route
// to them), so a node whose kube-proxy is not running cannot reach a Service. Their cluster DNS is
// real CoreDNS (coredns.ts) on a system node of their own, which the first real node brings up.
import type { ChildProcess } from 'node:child_process';
import { createReadStream, createWriteStream, existsSync, mkdirSync, readFileSync, rmSync, statSync, writeFileSync } from 'node:fs';
import { pipeline } from 'node:stream/promises';
import { join } from 'node:path';
import type { Logger } from '@kube-node-ready/core';
import { kubeconfigYaml, type SandboxCerts } from './certs.js';
import { containerdConfig, unmountUnder } from './containerd.js';
import { CLUSTER_DNS, coreDnsVersion, deployCoreDns, pushCoreDnsImage, SYSTEM_NODE, SYSTEM_NODE_LABEL, SYSTEM_NODE_TAINT } from './coredns.js';
import type { SandboxLayout } from './layout.js';
import { type LoggedProcess, run, runOk, sleep, startLogged, stopProcess } from './proc.js';
import { OUTSIDE, startOutside } from './outside.js';
import { startRegistry, type Registry } from './registry.js';
import { cgroupHierarchyRoots, removeTree } from './runtime/cgroups.js';
import { NETNS_DIR, NFT, removeNamespaces } from './runtime/pod-network.js';
import { type RealNodeFault, setRealNodeFault } from './real-node-faults.js';
import { repoRoot } from './sandbox.js';

/** Addresses of the real nodes, outside every other range of the sandbox (layout.ts). */
export const REAL_NODE_RANGE = '10.248.0.0/14';
export const REAL_NODE_GATEWAY = '10.248.0.1';
/**
 * The bridge's MAC address, set so that it never changes: a Linux bridge without one takes the lowest
 * MAC of its ports and changes it when that port goes, and a node whose ARP entry for its gateway
 * names a removed port has no way out (nor its pods) until the entry expires.
 */
export const REAL_NODE_BRIDGE_MAC = '02:6b:6e:72:00:01';
/** Every real node's pod CIDR (10.249.N.0/24) is inside it: kube-proxy's cluster CIDR. */
export const REAL_NODE_POD_RANGE = '10.249.0.0/16';
/** The registry's address in the sandbox's namespace, where real nodes pull images from. */
export const REAL_NODE_REGISTRY = '10.0.0.5:5000';
export const PAUSE_IMAGE = `${REAL_NODE_REGISTRY}/pause:3.10`;
/** Labels a real node carries (the simulated kubelet leaves it alone: it has no simulated label). */
export const REAL_NODE_LABEL = 'sandbox.kube-node-ready.io/real';

export function realNodeBridge(slot: number): string {
  return `knr${slot}br`;
}

export function realNodeNetnsPrefix(slot: number): string {
  return `knr${slot}-n`;
}

/** The system node's namespace (coredns.ts): apart from the other real nodes' (realNodeNetnsPrefix), which come and go. */
export function systemNodeNetns(slot: number): string {
  return `knr${slot}-s0`;
}

/** KEY[=VALUE]:EFFECT, as kubectl taint and the kubelet's --register-with-taints write it. */
export function parseTaint(text: string): { key: string; value?: string; effect: string } {
  const m = /^([^=:]+)(?:=([^:]*))?:(NoSchedule|PreferNoSchedule|NoExecute)$/.exec(text);
  if (!m) throw new Error(`taint ${JSON.stringify(text)}: expected KEY[=VALUE]:EFFECT with EFFECT NoSchedule, PreferNoSchedule or NoExecute`);
  return { key: m[1]!, ...(m[2] !== undefined ? { value: m[2] } : {}), effect: m[3]! };
}

export interface RealNodeOptions {
  name: string;
  /** Taints the kubelet registers the node with (--register-with-taints), as a cloud node's does. */
  taints?: Array<{ key: string; value?: string; effect: string }>;
  labels?: Record<string, string>;
  /** Faults the node starts with (REAL_NODE_FAULTS), each with its value if it takes one. */
  faults?: Array<{ fault: RealNodeFault; value?: string }>;
}

export const CNI_CONFIG = '10-sandbox.conflist';
/** How long after a kubelet exits on its own it is started again (systemd's RestartSec for kubeadm's kubelet is 10 s). */
const KUBELET_RESTART_MS = 2_000;
/**
 * Paths the kubelet uses whatever its --root-dir, the same for every kubelet of the machine, and
 * the node's own directory bind-mounted over each in its kubelet's mount namespace:
 * - the device plugin registration socket (pluginapi.KubeletSocket) and its checkpoint: a kubelet
 *   removes every socket there at its start, then listens on kubelet.sock; of two kubelets starting
 *   at once, one can find the other's new socket in its way ("listen unix
 *   /var/lib/kubelet/device-plugins/kubelet.sock: bind: address already in use", then "Failed to
 *   start ContainerManager" and exit 1), at each start that meets another's;
 * - /var/log/containers, the container log symlinks: a kubelet's container GC removes those whose
 *   log is gone, whichever kubelet made them.
 */
export const KUBELET_MACHINE_PATHS = [
  { path: '/var/lib/kubelet/device-plugins', nodeDir: 'device-plugins' },
  { path: '/var/log/containers', nodeDir: 'container-logs' },
] as const;

/**
 * The command prefix that runs the kubelet in a mount namespace of its own with the node's
 * directories over KUBELET_MACHINE_PATHS. The namespace keeps the machine's propagation: the
 * machine's mounts holding those paths must not be shared (they would carry the bind mounts back to
 * the machine), as in a container; the kubelet's --root-dir is a shared mount of its own.
 */
async function kubeletMountNamespace(dir: string): Promise<string[]> {
  const script: string[] = [];
  const args: string[] = [];
  for (const { path, nodeDir } of KUBELET_MACHINE_PATHS) {
    mkdirSync(path, { recursive: true });
    const propagation = (await runOk('findmnt', ['-n', '-o', 'PROPAGATION', '-T', path])).trim();
    if (propagation.includes('shared')) throw new Error(`real nodes: the mount holding ${path} is ${propagation}; a kubelet's own ${path} (a bind mount in its mount namespace) would reach the machine's`);
    mkdirSync(join(dir, nodeDir), { recursive: true });
    args.push(join(dir, nodeDir), path);
    script.push(`mount --bind "$${args.length - 1}" "$${args.length}"`);
  }
  // sh -c SCRIPT NAME ARGS...: $1.. are the pairs; the kubelet's argv follows them.
  return ['unshare', '--mount', '--propagation', 'unchanged', '--', 'sh', '-c', `${script.join(' && ')} && shift ${args.length} && exec "$@"`, 'kubelet-mounts', ...args];
}

/** fs.inotify.max_user_instances the real nodes need (raiseInotifyInstances). */
export const INOTIFY_INSTANCES = 8192;
const INOTIFY_INSTANCES_FILE = '/proc/sys/fs/inotify/max_user_instances';

/**
 * Raises the machine's limit of inotify instances per user to INOTIFY_INSTANCES if it is lower.
 * Every process of root on the machine counts against that one limit (128 by default), whichever
 * sandbox it belongs to: a real node holds several (its kubelet's cAdvisor and file watchers, its
 * containerd, its kube-proxy), a sandbox's control plane a few more. A kubelet that gets none fails
 * its start ("Failed to start cAdvisor" err="inotify_init: too many open files", exit 1) until
 * another process frees one. kind tells its users to raise the same limit.
 */
export function raiseInotifyInstances(log: Logger): void {
  let current: number;
  try {
    current = Number(readFileSync(INOTIFY_INSTANCES_FILE, 'utf8').trim());
  } catch (err) {
    log.warn({ file: INOTIFY_INSTANCES_FILE, err: String(err) }, 'cannot read the inotify instance limit; kubelets may fail to start ("inotify_init: too many open files")');
    return;
  }
  if (current >= INOTIFY_INSTANCES) return;
  try {
    writeFileSync(INOTIFY_INSTANCES_FILE, String(INOTIFY_INSTANCES));
    log.info({ sysctl: 'fs.inotify.max_user_instances', from: current, to: INOTIFY_INSTANCES }, 'raised the machine\'s inotify instance limit for the real nodes\' kubelets');
  } catch (err) {
    log.warn({ sysctl: 'fs.inotify.max_user_instances', current, wanted: INOTIFY_INSTANCES, err: String(err) }, 'cannot raise the inotify instance limit; kubelets may fail to start ("inotify_init: too many open files") once the machine\'s processes hold them all');
  }
}

/** Copies kept of an exited kubelet's log, per node: a kubelet that fails at every start fails the same way. */
const KEPT_KUBELET_EXITS = 5;

/** A running real node, as its faults (real-node-faults.ts) reach into it. */
export interface RunningNode {
  name: string;
  index: number;
  dir: string;
  netns: string;
  ip: string;
  podCidr: string;
  containerd: ChildProcess;
  kubelet: ChildProcess | undefined;
  startKubelet: () => ChildProcess;
  kubeProxy: ChildProcess | undefined;
  startKubeProxy: () => ChildProcess;
  /** The faults in effect, with their values (pod-mtu's bytes). */
  faults: Map<RealNodeFault, string | undefined>;
}

export interface RealNodesDeps {
  layout: SandboxLayout;
  binDir: string;
  certs: SandboxCerts;
  log: Logger;
}

/**
 * The sandbox's real nodes. `add` starts one (its namespace, containerd, kubelet) and returns once
 * its kubelet has registered; `remove` stops one and removes everything it made; `stop` all of them
 * and the registry.
 */
export class RealNodes {
  private readonly nodes = new Map<string, RunningNode>();
  /** Nodes being started, by name: their index. */
  private readonly starting = new Map<string, number>();
  /** The index given last (freeIndex). */
  private lastIndex = 0;
  /** Nodes being stopped, by name. */
  private readonly removing = new Map<string, Promise<void>>();
  private registry: Registry | undefined;
  private outside: { stop: () => Promise<void> } | undefined;
  private ready: Promise<void> | undefined;
  /** The system node and CoreDNS on it, serving: brought up by the first real node's add, before that node starts. */
  private clusterDns: Promise<void> | undefined;
  private stopping = false;
  private readonly dir: string;

  constructor(private readonly deps: RealNodesDeps) {
    this.dir = join(deps.layout.dir, 'real-nodes');
  }

  names(): string[] {
    return [...this.nodes.keys()];
  }

  /** Each running node's directory (its logs: kubelet.log, containerd.log, kube-proxy.log) and namespace. */
  details(): Array<{ name: string; dir: string; netns: string }> {
    return [...this.nodes.values()].map((n) => ({ name: n.name, dir: n.dir, netns: n.netns }));
  }

  async add(opts: RealNodeOptions): Promise<{ name: string; ip: string; podCidr: string; dir: string; netns: string }> {
    if (this.nodes.has(opts.name) || this.starting.has(opts.name)) throw new Error(`real node ${opts.name} exists`);
    // The index is taken at once: nodes added side by side (a Karpenter burst) get their own.
    const index = this.freeIndex();
    this.starting.set(opts.name, index);
    // By index, not name: the node's sockets (containerd's, the kubelet's pod-resources and device
    // plugins) live in it, and a Karpenter node's name is long enough to pass the 108-byte limit of a
    // unix socket's path.
    const dir = join(this.dir, `n${index}`);
    try {
      if (!this.ready) {
        raiseInotifyInstances(this.deps.log);
        this.ready = this.startRegistry();
      }
      await this.ready;
      // The cluster DNS serves before any other real node starts (its worker would fail dns otherwise).
      if (opts.name !== SYSTEM_NODE) await this.startClusterDns();
      else if (!this.clusterDns) throw new Error(`${SYSTEM_NODE} is the name of the system node, which the first real node brings up`);
      return await this.start(opts, index, dir);
    } catch (err) {
      // Nothing of a node that did not start is left: its processes, mounts, namespace, route, cgroups, files.
      await run('pkill', ['-KILL', '-f', `${dir}/`]);
      await unmountUnder(dir);
      await run('ip', ['netns', 'del', `${realNodeNetnsPrefix(this.deps.layout.slot)}${index}`]);
      await run('ip', ['-n', this.deps.layout.netns, 'route', 'del', `10.249.${index}.0/24`]);
      for (const h of cgroupHierarchyRoots()) await removeTree(join(h, `/knr${this.deps.layout.slot}-${opts.name}`));
      rmSync(dir, { recursive: true, force: true });
      throw err;
    } finally {
      this.starting.delete(opts.name);
    }
  }

  private async start(opts: RealNodeOptions, index: number, dir: string): Promise<{ name: string; ip: string; podCidr: string; dir: string; netns: string }> {
    const { layout, binDir, certs, log } = this.deps;
    rmSync(dir, { recursive: true, force: true });
    mkdirSync(dir, { recursive: true });
    const netns = opts.name === SYSTEM_NODE ? systemNodeNetns(layout.slot) : `${realNodeNetnsPrefix(layout.slot)}${index}`;
    const ip = `10.248.0.${10 + index}`;
    const podCidr = `10.249.${index}.0/24`;
    const sandboxNs = join(NETNS_DIR, layout.netns);
    const veth = `knr${layout.slot}n${index}`;

    // 1. The node's host network: a namespace on the sandbox's bridge, forwarding for its pods.
    await run('ip', ['netns', 'del', netns]);
    await runOk('ip', ['netns', 'add', netns]);
    await runOk('ip', ['link', 'add', veth, 'type', 'veth', 'peer', 'name', 'eth0', 'netns', netns]);
    await runOk('ip', ['link', 'set', veth, 'netns', layout.netns]);
    await runOk('ip', ['-n', layout.netns, '-b', '-'], { input: `link set ${veth} master ${realNodeBridge(layout.slot)} up\nroute replace ${podCidr} via ${ip}\n` });
    await runOk('ip', ['-n', netns, '-b', '-'], { input: `link set lo up\naddr add ${ip}/24 dev eth0\nlink set eth0 up\nroute add default via ${REAL_NODE_GATEWAY}\n` });
    await runOk('nsenter', [`--net=${join(NETNS_DIR, netns)}`, '--', 'sh', '-c', 'echo 1 > /proc/sys/net/ipv4/ip_forward']);

    // 2. containerd with the CRI plugin, its CNI configuration and the registry (plain HTTP).
    const hosts = join(dir, 'certs.d', REAL_NODE_REGISTRY);
    mkdirSync(hosts, { recursive: true });
    writeFileSync(join(hosts, 'hosts.toml'), `server = "http://${REAL_NODE_REGISTRY}"\n[host."http://${REAL_NODE_REGISTRY}"]\n  capabilities = ["pull", "resolve"]\n`);
    mkdirSync(join(dir, 'cni', 'net.d'), { recursive: true });
    mkdirSync(join(dir, 'cni', 'held'), { recursive: true });
    // The configuration is kept in cni/held/ and written into net.d/ unless the node starts without it.
    writeFileSync(
      join(dir, 'cni', 'held', CNI_CONFIG),
      `${JSON.stringify({
        cniVersion: '0.4.0',
        name: 'sandbox',
        plugins: [
          { type: 'bridge', bridge: 'cni0', isGateway: true, ipMasq: false, ipam: { type: 'host-local', ranges: [[{ subnet: podCidr }]], routes: [{ dst: '0.0.0.0/0' }], dataDir: join(dir, 'cni', 'ipam') } },
          { type: 'loopback' },
        ],
      })}\n`,
    );
    if (!opts.faults?.some((f) => f.fault === 'cni-config-missing')) writeFileSync(join(dir, 'cni', 'net.d', CNI_CONFIG), readFileSync(join(dir, 'cni', 'held', CNI_CONFIG)));
    const sock = join(dir, 'containerd.sock');
    writeFileSync(
      join(dir, 'containerd.toml'),
      containerdConfig(join(dir, 'containerd'), sock, [
        '[plugins."io.containerd.grpc.v1.cri"]',
        `  sandbox_image = "${PAUSE_IMAGE}"`,
        // Without CAP_SYS_RESOURCE runc cannot lower a process's oom_score_adj (PITFALLS, "Real nodes").
        '  restrict_oom_score_adj = true',
        '  [plugins."io.containerd.grpc.v1.cri".cni]',
        '    bin_dir = "/usr/lib/cni"',
        `    conf_dir = "${dir}/cni/net.d"`,
        '  [plugins."io.containerd.grpc.v1.cri".containerd]',
        '    snapshotter = "overlayfs"',
        '    [plugins."io.containerd.grpc.v1.cri".containerd.runtimes.runc]',
        '      runtime_type = "io.containerd.runc.v2"',
        '  [plugins."io.containerd.grpc.v1.cri".registry]',
        `    config_path = "${dir}/certs.d"`,
      ]),
    );
    const inNode = (argv: string[]) => ['nsenter', `--net=${join(NETNS_DIR, netns)}`, '--', ...argv];
    const [cCmd, ...cArgs] = inNode(['containerd', '--config', join(dir, 'containerd.toml')]);
    const containerd = startLogged(cCmd!, cArgs, join(dir, 'containerd.log'));
    await waitFor(async () => (await run('ctr', ['--address', sock, 'version'])).code === 0, `containerd of ${opts.name}`, 30_000);

    // 3. The kubelet: its own cgroup root in every hierarchy, client certificate, configuration.
    const cgroupRoot = `/knr${layout.slot}-${opts.name}`;
    for (const h of cgroupHierarchyRoots()) mkdirSync(join(h, cgroupRoot), { recursive: true });
    const cert = join(dir, 'kubelet.crt');
    const key = join(dir, 'kubelet.key');
    await issueNodeCert(certs, opts.name, cert, key, dir);
    writeFileSync(join(dir, 'kubeconfig'), kubeconfigYaml(`https://${layout.advertiseAddress}:${layout.apiPort}`, certs.caCert, cert, key, `system:node:${opts.name}`));
    writeFileSync(join(dir, 'resolv.conf'), `nameserver ${layout.clusterDnsIp}\n`);
    writeFileSync(
      join(dir, 'kubelet.yaml'),
      [
        'apiVersion: kubelet.config.k8s.io/v1beta1',
        'kind: KubeletConfiguration',
        // This machine is cgroup v1 with cgroupfs (PITFALLS, "Real nodes").
        'failCgroupV1: false',
        'cgroupDriver: cgroupfs',
        `cgroupRoot: ${cgroupRoot}`,
        'enforceNodeAllocatable: []',
        'failSwapOn: false',
        `containerRuntimeEndpoint: unix://${sock}`,
        'authentication: {anonymous: {enabled: false}, webhook: {enabled: false}, x509: {clientCAFile: ' + certs.caCert + '}}',
        // The apiserver (logs, exec) is the only client: it presents the sandbox admin's certificate.
        'authorization: {mode: AlwaysAllow}',
        // Real CoreDNS's Service (coredns.ts); simulated nodes keep the sandbox's kube-dns.
        `clusterDNS: [${CLUSTER_DNS.ip}]`,
        `clusterDomain: ${layout.clusterDomain}`,
        `address: ${ip}`,
        'port: 10250',
        'readOnlyPort: 0',
        'healthzBindAddress: 127.0.0.1',
        'healthzPort: 10248',
        `podLogsDir: ${dir}/pod-logs`,
        `resolvConf: ${dir}/resolv.conf`,
        // The machine's disk and memory are shared by every sandbox: no eviction, no image GC.
        'evictionHard: {memory.available: "1Mi", nodefs.available: "1%", imagefs.available: "1%"}',
        'imageGCHighThresholdPercent: 100',
        'imageGCLowThresholdPercent: 99',
        `registerWithTaints: ${JSON.stringify(opts.taints ?? [])}`,
        '',
      ].join('\n'),
    );
    const labels = { [REAL_NODE_LABEL]: 'true', ...opts.labels };
    // The kubelet runs in a mount namespace of its own, where the machine-wide paths it hard-codes
    // are the node's (kubeletMounts): a kubelet's root directory is shared with the machine's mount
    // namespace, so the volumes it mounts there reach containerd.
    const rootDir = join(dir, 'kubelet');
    mkdirSync(rootDir, { recursive: true });
    await runOk('mount', ['--bind', rootDir, rootDir]);
    await runOk('mount', ['--make-shared', rootDir]);
    const [kCmd, ...kArgs] = inNode([
      ...(await kubeletMountNamespace(dir)),
      join(binDir, 'kubelet'),
      '--config', join(dir, 'kubelet.yaml'),
      '--kubeconfig', join(dir, 'kubeconfig'),
      '--root-dir', rootDir,
      // Its serving certificate (self-signed, for its own name), not the machine's /var/lib/kubelet/pki.
      '--cert-dir', join(dir, 'pki'),
      '--hostname-override', opts.name,
      '--node-ip', ip,
      '--node-labels', Object.entries(labels).map(([k, v]) => `${k}=${v}`).join(','),
      '--v=1',
    ]);
    // Supervised as systemd supervises a node's kubelet (Restart=always): one that exits on its own
    // (a container runtime not answering yet on a busy machine ends its start with an error) is
    // started again. One stopped on purpose (the kubelet-stopped fault, the node's removal) is
    // taken off the node first, and stays stopped.
    // What an exited kubelet wrote is kept in the sandbox's logs: the node's directory goes with it.
    let exits = 0;
    const startKubelet = (): ChildProcess => {
      const kubeletLog = join(dir, 'kubelet.log');
      const from = existsSync(kubeletLog) ? statSync(kubeletLog).size : 0;
      const child = startLogged(kCmd!, kArgs, kubeletLog);
      child.once('exit', (code, signal) => {
        if (node.kubelet !== child) return;
        const exit = ++exits;
        setTimeout(() => {
          if (node.kubelet === child) node.kubelet = startKubelet();
        }, KUBELET_RESTART_MS);
        void keepExitedKubeletLog(child, kubeletLog, from, join(layout.paths.logs, 'kubelet-exits'), opts.name, exit).then((kept) =>
          log.warn({ node: opts.name, code, signal, exit, log: kept }, 'the kubelet exited on its own; starting it again in 2 s, as systemd would'),
        );
      });
      return child;
    };

    // 4. kube-proxy, nftables mode, programming the node's namespace.
    const proxyCert = join(dir, 'kube-proxy.crt');
    const proxyKey = join(dir, 'kube-proxy.key');
    await issueClientCert(certs, '/CN=system:kube-proxy', proxyCert, proxyKey, dir);
    writeFileSync(join(dir, 'kube-proxy.kubeconfig'), kubeconfigYaml(`https://${layout.advertiseAddress}:${layout.apiPort}`, certs.caCert, proxyCert, proxyKey, 'system:kube-proxy'));
    writeFileSync(
      join(dir, 'kube-proxy.yaml'),
      [
        'apiVersion: kubeproxy.config.k8s.io/v1alpha1',
        'kind: KubeProxyConfiguration',
        'mode: nftables',
        `clientConnection: {kubeconfig: ${join(dir, 'kube-proxy.kubeconfig')}}`,
        `hostnameOverride: ${opts.name}`,
        // Its node IP, given: it starts before the kubelet registers the Node it would read it from.
        `bindAddress: ${ip}`,
        'healthzBindAddress: 127.0.0.1:10256',
        'metricsBindAddress: 127.0.0.1:10249',
        `clusterCIDR: ${REAL_NODE_POD_RANGE}`,
        // The conntrack table size and timeouts are the machine's, shared with everything else: left as they are.
        'conntrack: {maxPerCore: 0, min: 0, tcpEstablishedTimeout: 0s, tcpCloseWaitTimeout: 0s}',
        '',
      ].join('\n'),
    );
    const [pCmd, ...pArgs] = inNode([join(binDir, 'kube-proxy'), '--config', join(dir, 'kube-proxy.yaml'), '--v=1']);
    const startKubeProxy = () => startLogged(pCmd!, pArgs, join(dir, 'kube-proxy.log'));
    const node: RunningNode = {
      name: opts.name,
      index,
      dir,
      netns,
      ip,
      podCidr,
      containerd,
      kubelet: undefined,
      startKubelet,
      kubeProxy: undefined,
      startKubeProxy,
      faults: new Map(),
    };
    this.nodes.set(opts.name, node);
    // The faults it starts with are in place before its kubelet and kube-proxy start.
    for (const { fault, value } of opts.faults ?? []) await setRealNodeFault(node, fault, true, value, log);
    // kube-proxy first, and the kubelet once it has programmed the Services, as on a node image that
    // starts kube-proxy before the kubelet: a healthy node's first worker finds its Services routed
    // (a kube-proxy still syncing is a fault the product catches; a healthy node must not have it).
    if (!node.faults.has('kube-proxy-stopped')) {
      node.kubeProxy = startKubeProxy();
      // Its rules name the `kubernetes` Service's ClusterIP once it has synced the Services (its
      // /healthz answers 503 until the Node exists, which the kubelet has not registered yet).
      const rules = () => run('nsenter', [`--net=${join(NETNS_DIR, netns)}`, '--', NFT, 'list', 'table', 'ip', 'kube-proxy']);
      await waitFor(async () => (await rules()).stdout.includes(layout.kubernetesServiceIp), `kube-proxy of ${opts.name} to program the Services`, 120_000);
    }
    if (!node.faults.has('kubelet-stopped')) node.kubelet = startKubelet();
    log.info({ node: opts.name, ip, podCidr, netns, sandboxNs }, 'real node started');
    return { name: opts.name, ip, podCidr, dir, netns };
  }

  /**
   * The system node (without the verification taint; SYSTEM_NODE_TAINT keeps other workloads off it)
   * and CoreDNS on it, serving. Started once; a start that failed is undone and tried again by the
   * next add.
   */
  private startClusterDns(): Promise<void> {
    this.clusterDns ??= (async () => {
      const { layout, binDir, log } = this.deps;
      const started = Date.now();
      log.info({ node: SYSTEM_NODE }, 'starting the system node and CoreDNS on it, the real nodes\' cluster DNS');
      await this.add({ name: SYSTEM_NODE, taints: [{ ...SYSTEM_NODE_TAINT }], labels: { [SYSTEM_NODE_LABEL]: 'true' } });
      const image = realNodeCoreDnsImage(repoRoot());
      // It also names what lies outside the cluster (outside.ts), for the egress check.
      const hosts = [`${OUTSIDE.ip} ${OUTSIDE.name}`];
      const { pod, podIp } = await deployCoreDns({ layout, kubectl: join(binDir, 'kubectl'), node: SYSTEM_NODE, image, hosts, timeoutMs: 240_000 });
      log.info({ pod, podIp, image, service: `${CLUSTER_DNS.namespace}/${CLUSTER_DNS.name}`, clusterIp: CLUSTER_DNS.ip, ms: Date.now() - started }, 'CoreDNS serves the real nodes');
    })().catch(async (err: unknown) => {
      this.clusterDns = undefined;
      if (this.nodes.has(SYSTEM_NODE)) await this.remove(SYSTEM_NODE).catch(() => undefined);
      await run('ip', ['netns', 'del', systemNodeNetns(this.deps.layout.slot)]);
      throw err;
    });
    return this.clusterDns;
  }

  /** Breaks (on) or repairs (off) one of the node's components (real-node-faults.ts). */
  async setFault(name: string, fault: RealNodeFault, on: boolean, value?: string): Promise<{ node: string; fault: RealNodeFault; on: boolean; value?: string }> {
    const node = this.nodes.get(name);
    if (!node) throw new Error(`no real node ${name}: the real nodes are ${this.names().join(', ') || 'none'}`);
    return setRealNodeFault(node, fault, on, value, this.deps.log);
  }

  /** Stops the node's kubelet, its pods and containerd, and removes its namespace, mounts, cgroups and files. */
  async remove(name: string): Promise<void> {
    const node = this.nodes.get(name);
    if (!node) throw new Error(`no real node ${name}`);
    if (name === SYSTEM_NODE && this.clusterDns && !this.stopping) throw new Error(`${SYSTEM_NODE} is the system node, where the real nodes' CoreDNS runs: it goes with the sandbox`);
    // Listed (names()) until it is gone: whoever waits for a node to stop, the sandbox's own stop
    // included, waits for its teardown, not only its start.
    let removal = this.removing.get(name);
    if (!removal) {
      removal = this.teardown(node).finally(() => {
        this.nodes.delete(name);
        this.removing.delete(name);
      });
      this.removing.set(name, removal);
    }
    return removal;
  }

  private async teardown(node: RunningNode): Promise<void> {
    const name = node.name;
    if (node.kubeProxy) await stopProcess(node.kubeProxy);
    const kubelet = node.kubelet;
    node.kubelet = undefined; // stopped on purpose: not started again
    if (kubelet) await stopProcess(kubelet, 10_000);
    const sock = join(node.dir, 'containerd.sock');
    const ctr = (args: string[]) => run('ctr', ['--address', sock, '--namespace', 'k8s.io', ...args]);
    // The pods' network namespaces (containerd's CRI makes one per pod sandbox under /run/netns).
    const podNetns = new Set<string>();
    const containers = (await ctr(['containers', 'ls', '-q'])).stdout.split('\n').filter(Boolean);
    for (const id of containers) {
      const info = await ctr(['containers', 'info', id]);
      for (const m of info.stdout.matchAll(/"path":\s*"(\/(?:var\/)?run\/netns\/[^"]+)"/g)) podNetns.add(m[1]!);
    }
    for (const id of (await ctr(['tasks', 'ls', '-q'])).stdout.split('\n').filter(Boolean)) await ctr(['tasks', 'kill', '--signal', 'SIGKILL', id]);
    for (let i = 0; i < 50 && (await ctr(['tasks', 'ls', '-q'])).stdout.split('\n').some((l) => l.trim() && !/STOPPED/.test(l)); i++) await sleep(100);
    for (const id of containers) {
      await ctr(['tasks', 'delete', '--force', id]);
      await ctr(['containers', 'delete', id]);
    }
    await stopProcess(node.containerd, 10_000);
    await run('pkill', ['-KILL', '-f', `containerd-shim-runc-v2 .*-address ${sock}`]);
    for (const p of podNetns) {
      await run('umount', [p]);
      rmSync(p, { force: true });
    }
    await unmountUnder(node.dir);
    await run('ip', ['netns', 'del', node.netns]);
    await run('ip', ['-n', this.deps.layout.netns, 'route', 'del', node.podCidr]);
    for (const h of cgroupHierarchyRoots()) await removeTree(join(h, `/knr${this.deps.layout.slot}-${name}`));
    rmSync(node.dir, { recursive: true, force: true });
  }

  async stop(): Promise<void> {
    this.stopping = true;
    // The system node last: the other nodes' pods may ask CoreDNS while they stop.
    const names = this.names().sort((a, b) => Number(a === SYSTEM_NODE) - Number(b === SYSTEM_NODE));
    for (const name of names) await this.remove(name).catch((err: unknown) => this.deps.log.warn({ node: name, err: String(err) }, 'removing a real node failed'));
    await this.registry?.stop();
    await this.outside?.stop();
    rmSync(this.dir, { recursive: true, force: true });
  }

  private freeIndex(): number {
    const used = new Set([...this.nodes.values()].map((n) => n.index).concat([...this.starting.values()]));
    // Round robin: a removed node's index (its directory, namespace, addresses) is not given to the
    // next node at once, so what is left of one is never taken for another's.
    for (let k = 0; k < 200; k++) {
      const i = ((this.lastIndex + k) % 200) + 1;
      if (!used.has(i)) return (this.lastIndex = i);
    }
    throw new Error('at most 200 real nodes');
  }

  /** The registry in the sandbox's namespace, with the pause image and the product's image (make image). */
  private async startRegistry(): Promise<void> {
    const { log } = this.deps;
    const root = repoRoot();
    const build = join(root, 'packages', 'sandbox', 'go', 'build.sh');
    const tools = (await runOk('bash', [build, 'crane', 'registry', 'coredns'])).trim().split('\n').pop()!;
    const dir = join(this.dir, 'registry');
    // The daemon runs inside the sandbox's namespace, so this listens there.
    this.registry = await startRegistry(join(tools, 'registry'), dir, REAL_NODE_REGISTRY);
    this.outside = await startOutside(join(this.dir, 'outside'));
    const crane = (args: string[]) => runOk(join(tools, 'crane'), ['--insecure', ...args]);

    // pause: the Kubernetes module's pause.c, static, as registry.k8s.io/pause is made.
    const kdir = join(root, 'packages', 'sandbox', 'go', 'kubernetes');
    const version = /k8s\.io\/kubernetes (v[\d.]+)/.exec(readFileSync(join(kdir, 'go.mod'), 'utf8'))?.[1];
    const mod = JSON.parse(await runOk('go', ['mod', 'download', '-json', `k8s.io/kubernetes@${version}`], { cwd: kdir })) as { Dir: string };
    const pause = join(this.dir, 'pause', 'root');
    mkdirSync(pause, { recursive: true });
    await runOk('gcc', ['-static', '-Os', '-DVERSION=3.10', '-o', join(pause, 'pause'), join(mod.Dir, 'build', 'pause', 'linux', 'pause.c')]);
    await runOk('tar', ['--owner=0', '--group=0', '--numeric-owner', '-C', pause, '-cf', join(this.dir, 'pause', 'pause.tar'), 'pause']);
    const appended = (await crane(['append', '--oci-empty-base', '-f', join(this.dir, 'pause', 'pause.tar'), '-t', PAUSE_IMAGE])).trim().split('\n').pop()!;
    await crane(['mutate', appended, '--entrypoint', '/pause', '--user', '65535:65535', '--set-platform', 'linux/amd64', '-t', PAUSE_IMAGE]);

    // CoreDNS, the real nodes' cluster DNS (coredns.ts).
    await pushCoreDnsImage({ crane, binary: join(tools, 'coredns'), workDir: join(this.dir, 'coredns-image'), image: realNodeCoreDnsImage(root) });

    // The product's image, as make image wrote it.
    const tar = join(root, 'dist', 'kube-node-ready-oci.tar');
    if (existsSync(tar)) {
      const layout = join(this.dir, 'product-layout');
      mkdirSync(layout, { recursive: true });
      await runOk('tar', ['-xf', tar, '-C', layout]);
      await crane(['push', layout, `${REAL_NODE_REGISTRY}/kube-node-ready:dev`]);
      rmSync(layout, { recursive: true, force: true });
    } else log.warn({ tar }, 'no image to push for the real nodes: run make image');
    log.info({ registry: REAL_NODE_REGISTRY }, 'real nodes\' registry ready');
  }
}

/**
 * Kills what still runs in the slot's real-node namespaces and removes them (a daemon that did not
 * stop cleanly); `stop()` is the orderly way.
 */
export async function removeRealNodeNamespaces(slot: number): Promise<void> {
  await removeNamespaces(realNodeNetnsPrefix(slot));
  await removeNamespaces(systemNodeNetns(slot).slice(0, -1));
}

/** The image of CoreDNS on real nodes, in their registry, tagged with the version go/coredns pins. */
export function realNodeCoreDnsImage(root: string): string {
  return `${REAL_NODE_REGISTRY}/coredns/coredns:${coreDnsVersion(root)}`;
}

/** The image reference of the product on real nodes: the index `make image` built, by digest. */
export function realNodeProductImage(root: string): { repository: string; digest: string } {
  const file = join(root, 'dist', 'kube-node-ready-oci.json');
  if (!existsSync(file)) throw new Error(`${file} is missing: real nodes run the image make image builds (run make image, then start the sandbox)`);
  const meta = JSON.parse(readFileSync(file, 'utf8')) as { index: string };
  return { repository: `${REAL_NODE_REGISTRY}/kube-node-ready`, digest: meta.index };
}

async function issueNodeCert(certs: SandboxCerts, name: string, cert: string, key: string, dir: string): Promise<void> {
  await issueClientCert(certs, `/O=system:nodes/CN=system:node:${name}`, cert, key, dir);
}

async function issueClientCert(certs: SandboxCerts, subject: string, cert: string, key: string, dir: string): Promise<void> {
  const ext = join(dir, 'client.ext');
  writeFileSync(ext, 'keyUsage=digitalSignature,keyEncipherment\nextendedKeyUsage=clientAuth\n');
  // A node's name may be up to 253 characters (Karpenter's often pass 64), and its certificate's
  // common name must be system:node:<name>: OpenSSL's string table limits a CN to 64 characters
  // (X.520's upper bound) unless its configuration says otherwise. Go's x509, which a kubelet's TLS
  // bootstrap goes through, has no such limit.
  const conf = join(dir, 'openssl.cnf');
  writeFileSync(conf, 'openssl_conf = default_conf\n[default_conf]\nstbl_section = stbl\n[stbl]\ncommonName = min:1,max:300\n[req]\ndistinguished_name = dn\n[dn]\n');
  const env = { ...process.env, OPENSSL_CONF: conf };
  await runOk('openssl', ['req', '-newkey', 'rsa:2048', '-nodes', '-keyout', key, '-out', `${cert}.csr`, '-subj', subject], { env });
  await runOk('openssl', ['x509', '-req', '-in', `${cert}.csr`, '-CA', certs.caCert, '-CAkey', certs.caKey, '-CAcreateserial', '-out', cert, '-days', '30', '-extfile', ext], { env });
}

/**
 * Copies what one run of a kubelet wrote to its node's kubelet.log (from byte `from` on) into
 * `<keepDir>/<node>.exit-<exit>.<time>.log`, once all of its output is in. Returns the copy's path, or why there is none.
 */
async function keepExitedKubeletLog(child: LoggedProcess, kubeletLog: string, from: number, keepDir: string, node: string, exit: number): Promise<string> {
  if (exit > KEPT_KUBELET_EXITS) return `not kept (the first ${KEPT_KUBELET_EXITS} exits of ${node} are, in ${keepDir})`;
  try {
    await child.logged;
    const to = statSync(kubeletLog).size;
    mkdirSync(keepDir, { recursive: true });
    // A node's name may be up to 253 characters, a file name 255 bytes; a name may come back (a new node of that name).
    const kept = join(keepDir, `${node.slice(0, 200)}.exit-${exit}.${new Date().toISOString().replace(/:/g, '-')}.log`);
    if (to > from) await pipeline(createReadStream(kubeletLog, { start: from, end: to - 1 }), createWriteStream(kept));
    else writeFileSync(kept, '');
    return kept;
  } catch (err) {
    return `not kept: ${String(err)}`;
  }
}

async function waitFor(check: () => Promise<boolean>, what: string, timeoutMs: number): Promise<void> {
  const deadline = Date.now() + timeoutMs;
  while (Date.now() < deadline) {
    if (await check().catch(() => false)) return;
    await sleep(200);
  }
  throw new Error(`timed out after ${timeoutMs} ms waiting for ${what}`);
}
