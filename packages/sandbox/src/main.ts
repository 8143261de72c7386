// The sandbox's command line, bundled into dist/sandbox.mjs:
//   sandbox up [--dir .sandbox] [--slot 0] [--nodes N]   start in the background, return when ready
//   sandbox down [--dir .sandbox] [--slot 0]              stop it; nothing is left running
//   sandbox status [--dir .sandbox]
//   sandbox add-nodes N [--prefix P] [--taint key=value:Effect] [--label k=v] [--dns dead|blackhole|lying] [--never-start]
//   sandbox add-nodes N --real [--taint ...] [--fault F]    real nodes (real-node.ts)
//   sandbox fault NODE FAULT | NODE --clear [FAULT]       break or repair a real node's component
//   sandbox exec -- CMD...                                run a command inside the sandbox network namespace
//   sandbox demo [--dir D] [--slot N]                     the `make demo` scenario (KEEP=1 leaves the sandbox up)
//   sandbox daemon ...                                    (internal) runs inside the namespace
//   sandbox <command> --help                              its usage (args.ts)
import { dirname, join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { createLogger } from '@kube-node-ready/core';
import { parseCommandLine } from './args.js';
import { runDaemon } from './daemon.js';
import { sandboxControl } from './control.js';
import { runDemo } from './demo.js';
import { createIgnoreExists, k8s } from './kube.js';
import { sandboxLayout } from './layout.js';
import { simulatedNode } from './node-registry.js';
import { parseFaultSpec, parseRealNodeFault, REAL_NODE_FAULTS } from './real-node-faults.js';
import { connectSandbox, execInSandbox, startSandbox, stopSandbox } from './sandbox.js';

async function main(argv: string[]): Promise<number> {
  const line = parseCommandLine(argv, process.env);
  if (line.kind === 'help') {
    console.log(line.text);
    return 0;
  }
  if (line.kind === 'usage-error') {
    console.error(line.text);
    return 2;
  }
  const { command: cmd, values, positionals } = line;
  const slot = Number(values.slot);
  switch (cmd) {
    case 'up': {
      const state = await startSandbox({ dir: values.dir, slot, nodes: Number(values.nodes), binDir: values['bin-dir'], logLevel: values['log-level'] === 'debug' ? 'debug' : 'info' });
      console.log(`sandbox is up: ${state.kubernetesVersion}, apiserver ${state.apiServer}`);
      const realNodes = Number(values['real-nodes'] ?? '0');
      for (let i = 1; i <= realNodes; i++) {
        console.log(`starting real node real-node-${i} (${i}/${realNodes}): containerd, kubelet, kube-proxy...`);
        await sandboxControl(state.dir, 'POST', `/add-real-node/real-node-${i}`, 300_000);
      }
      console.log(`  kubectl --kubeconfig ${state.kubeconfig} get nodes -o wide`);
      console.log(`  stop it with: make sandbox-down`);
      return 0;
    }
    case 'down':
      await stopSandbox(values.dir, slot);
      return 0;
    case 'status': {
      const { state } = connectSandbox(values.dir);
      console.log(JSON.stringify(state, null, 2));
      return 0;
    }
    case 'add-nodes': {
      if (values.real) {
        const { state } = connectSandbox(values.dir);
        const count = Number(positionals[0] ?? '1');
        for (const f of values.fault ?? []) parseFaultSpec(f);
        for (let i = 1; i <= count; i++) {
          const name = `${values.prefix}-${Date.now().toString(36)}-${i}`;
          const query = new URLSearchParams([...(values.taint ?? []).map((t): [string, string] => ['taint', t]), ...(values.label ?? []).map((l): [string, string] => ['label', l]), ...(values.fault ?? []).map((f): [string, string] => ['fault', f])]);
          await sandboxControl(state.dir, 'POST', `/add-real-node/${name}?${query.toString()}`, 300_000);
          console.log(name);
        }
        return 0;
      }
      const { kc } = connectSandbox(values.dir);
      const core = kc.makeApiClient(k8s.CoreV1Api);
      const count = Number(positionals[0] ?? '1');
      const taints = (values.taint ?? []).map(parseTaint);
      const labels = Object.fromEntries((values.label ?? []).map((l) => l.split('=', 2) as [string, string]));
      for (let i = 1; i <= count; i++) {
        const name = `${values.prefix}-${Date.now().toString(36)}-${i}`;
        await createIgnoreExists(() =>
          core.createNode({ body: simulatedNode({ name, taints, labels, faults: { dns: values.dns, neverStart: values['never-start'] } }) }),
        );
        console.log(name);
      }
      return 0;
    }
    case 'fault': {
      const [node, named, value] = positionals;
      if (!node || (!named && !values.clear)) {
        console.error('usage: sandbox fault NODE FAULT [VALUE] | sandbox fault NODE --clear [FAULT] (see sandbox fault --help)');
        return 2;
      }
      const { state } = connectSandbox(values.dir);
      if (!values.clear) {
        const spec = parseFaultSpec(value === undefined ? named! : `${named}=${value}`);
        const query = new URLSearchParams({ fault: spec.fault, on: 'true', ...(spec.value !== undefined ? { value: spec.value } : {}) });
        await sandboxControl(state.dir, 'POST', `/real-node-fault/${node}?${query.toString()}`);
        console.log(`${node}: ${spec.fault}${spec.value !== undefined ? ` ${spec.value}` : ''} set`);
        return 0;
      }
      for (const fault of named ? [parseRealNodeFault(named)] : REAL_NODE_FAULTS) {
        await sandboxControl(state.dir, 'POST', `/real-node-fault/${node}?fault=${fault}&on=false`);
        console.log(`${node}: ${fault} cleared`);
      }
      return 0;
    }
    case 'demo':
      return runDemo({ dir: values.dir, slot, keep: process.env.KEEP === '1', live: Boolean(process.stdout.isTTY) && !process.env.CI, out: (l) => console.log(l) });
    case 'exec': {
      const layout = sandboxLayout(values.dir, slot);
      const r = await execInSandbox(layout, positionals);
      process.stdout.write(r.stdout);
      process.stderr.write(r.stderr);
      return r.code ?? 1;
    }
    case 'daemon': {
      const layout = sandboxLayout(values.dir, slot);
      const log = await createLogger({ base: { name: 'sandbox' }, level: values['log-level'] === 'debug' ? 'debug' : 'info' });
      const root = join(dirname(fileURLToPath(import.meta.url)), '..');
      await runDaemon(
        layout,
        {
          binDir: values['bin-dir'] ?? '',
          nodes: Number(values.nodes),
          leaseRenewMs: values['lease-renew-ms'] ? Number(values['lease-renew-ms']) : undefined,
          auditWrites: values['audit-writes'] === true,
          images: {
            // The image's entrypoint (Dockerfile): no --enable-source-maps.
            'kube-node-ready': [process.execPath, join(root, 'dist', 'kube-node-ready.mjs')],
            'sandbox-shell': ['/bin/sh'],
            'sandbox-node': [process.execPath],
            // A worker that passes at once (a summary with no checks), so a benchmark measures the controller, not the checks.
            'kube-node-ready-instant': [
              '/bin/sh',
              '-c',
              `printf '{"v":1,"ok":true,"node":"%s","durationMs":0,"checks":[]}' "$NODE_NAME" > "\${KNR_TERMINATION_LOG:-/dev/termination-log}"`,
              'kube-node-ready-instant',
            ],
            // node-readiness-controller's image (ENTRYPOINT ["/manager"]), built from its source archive by
            // go/build.sh. A Go client reads the service-account token at its absolute path, which a
            // sandbox process cannot see: a kubeconfig with the same server, CA and token file stands in.
            'node-readiness-controller': [
              '/bin/sh',
              '-c',
              [
                'd=${KNR_SERVICEACCOUNT_DIR:-/var/run/secrets/kubernetes.io/serviceaccount}',
                'printf \'apiVersion: v1\\nkind: Config\\nclusters: [{name: c, cluster: {server: "https://%s:%s", certificate-authority: "%s/ca.crt"}}]\\nusers: [{name: u, user: {tokenFile: "%s/token"}}]\\ncontexts: [{name: c, context: {cluster: c, user: u}}]\\ncurrent-context: c\\n\' "$KUBERNETES_SERVICE_HOST" "$KUBERNETES_SERVICE_PORT" "$d" "$d" > "$d/kubeconfig"',
                'KUBECONFIG="$d/kubeconfig" exec "$0" "$@"',
              ].join('\n'),
              join(values['bin-dir'] ?? '', 'node-readiness-controller', 'manager'),
            ],
            // Its readiness-condition-reporter's image (registry.k8s.io/node-readiness-controller/node-readiness-reporter),
            // built beside it. It knows only the in-cluster configuration, which reads the token and CA at
            // their absolute path: as a container runtime mounts them there, the service-account directory
            // is bind-mounted there in a mount namespace of the process's own.
            'node-readiness-reporter': [
              'unshare',
              '--mount',
              '--propagation',
              'private',
              '/bin/sh',
              '-c',
              [
                'sa=/var/run/secrets/kubernetes.io/serviceaccount',
                'mkdir -p "$sa" && mount --bind "${KNR_SERVICEACCOUNT_DIR:?the pod has no service-account token}" "$sa" || exit 1',
                'exec "$0" "$@"',
              ].join('\n'),
              join(values['bin-dir'] ?? '', 'node-readiness-controller', 'reporter'),
            ],
          },
        },
        log,
      );
      return -1; // keep running
    }
  }
}

function parseTaint(s: string): k8s.V1Taint {
  const m = /^([^=:]+)(?:=([^:]*))?:(NoSchedule|PreferNoSchedule|NoExecute)$/.exec(s);
  if (!m) throw new Error(`bad taint "${s}": write it as key=value:NoSchedule`);
  return { key: m[1]!, value: m[2], effect: m[3]! };
}

main(process.argv.slice(2)).then(
  (code) => {
    if (code >= 0) process.exit(code);
  },
  (err: unknown) => {
    console.error(`sandbox: ${err instanceof Error ? err.message : String(err)}`);
    process.exit(1);
  },
);
