// Every kubectl (and helm) command in docs/troubleshooting.md, run against the sandbox.
//
// The chart is installed as in the end-to-end test (chart.sandbox.test.ts): its own namespace
// (Pod Security "restricted"), its own release, taint, label, condition and Lease, so it touches
// only its own nodes. Two nodes give the commands something to show:
//   - a verified node, launched by real Karpenter from a NodePool of this file whose startupTaints
//     carry the release's taint (the Karpenter section's commands need a NodeClaim);
//   - a failing node (sandbox fault `dns: dead`) that exhausts its retries; its last failed worker
//     pod is kept (worker.keepFailedPods) for `kubectl logs`.
// The doc is parsed (code blocks, and code spans in tables), each command's placeholders and
// default names are replaced with this release's, and the command is run with the sandbox's
// kubeconfig; its exit code and what the doc says it shows are checked. Commands the sandbox cannot
// serve are in ALLOWED with the reason. A command in the doc that is neither in COMMANDS nor in
// ALLOWED fails the first test (and so does an entry the doc no longer has): doc and test stay in sync.
import { execFile } from 'node:child_process';
import { existsSync, mkdtempSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { promisify } from 'node:util';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { parse } from 'yaml';
import type { NodeVerification } from '@kube-node-ready/controller';
import { createNodePool, deleteNodePool, k8s, listNodeClaims, statusCode } from '@kube-node-ready/sandbox';
import { addNode, core, createNamespace, deleteNode, describeNodesOnTimeout, pendingWorkloadFor, readVerification, sandbox, waitFor } from '../sandbox.js';
import { CHART_DIR, REPO_ROOT } from './helm.js';

const run = promisify(execFile);
const DOC_PATH = join(REPO_ROOT, 'docs', 'troubleshooting.md');

// ---------------------------------------------------------------------------------------------
// The doc's commands

interface DocCommand {
  /** The command as written (continuation lines joined, trailing comment removed, whitespace collapsed). */
  text: string;
  /** Where it is: "line N (section)". */
  where: string[];
}

/** Removes a trailing `# comment` that is outside quotes. */
function stripComment(line: string): string {
  let quote: string | undefined;
  for (let i = 0; i < line.length; i++) {
    const c = line[i]!;
    if (quote) {
      if (c === quote) quote = undefined;
      else if (c === '\\' && quote === '"') i++;
    } else if (c === "'" || c === '"') quote = c;
    else if (c === '\\') i++;
    else if (c === '#' && (i === 0 || /\s/.test(line[i - 1]!))) return line.slice(0, i);
  }
  return line;
}

const isCommand = (s: string) => /^(kubectl|helm)\s/.test(s) || /(^|[\s;(|])kubectl\s/.test(s);

/**
 * Every line of a fenced code block that runs kubectl or helm (multi-line commands joined), and every
 * code span in a table row that starts with `kubectl `. Prose mentions (`kubectl describe pod` shows
 * ...) are references, not commands.
 */
function extractCommands(markdown: string): DocCommand[] {
  const found = new Map<string, DocCommand>();
  const add = (text: string, lineNo: number, section: string) => {
    const norm = text.replace(/\s+/g, ' ').trim();
    if (!isCommand(norm)) return;
    const where = `line ${lineNo} (${section})`;
    const seen = found.get(norm);
    if (seen) seen.where.push(where);
    else found.set(norm, { text: norm, where: [where] });
  };
  const lines = markdown.split('\n');
  let section = '(top)';
  let fence: string | undefined;
  let pending = '';
  let pendingLine = 0;
  for (let i = 0; i < lines.length; i++) {
    const raw = lines[i]!;
    const trimmed = raw.trim();
    if (fence !== undefined) {
      if (trimmed.startsWith('```')) {
        fence = undefined;
        if (pending) add(pending, pendingLine, section);
        pending = '';
        continue;
      }
      const code = stripComment(trimmed).trimEnd();
      if (!pending) pendingLine = i + 1;
      if (code.endsWith('\\')) {
        pending += `${code.slice(0, -1)} `;
        continue;
      }
      add(pending + code, pendingLine, section);
      pending = '';
      continue;
    }
    if (trimmed.startsWith('```')) {
      fence = trimmed;
      continue;
    }
    if (/^#{1,6}\s/.test(trimmed)) section = trimmed.replace(/^#+\s*/, '');
    if (trimmed.startsWith('|')) {
      for (const m of trimmed.matchAll(/`([^`]+)`/g)) if (/^kubectl\s/.test(m[1]!)) add(m[1]!.replace(/\\\|/g, '|'), i + 1, section);
    }
  }
  return [...found.values()];
}

/** Shell words of a command without shell syntax other than quotes and `|` (a separate word). */
function shellWords(s: string): string[] {
  const out: string[] = [];
  let cur = '';
  let has = false;
  const flush = () => {
    if (has) out.push(cur);
    cur = '';
    has = false;
  };
  for (let i = 0; i < s.length; ) {
    const c = s[i]!;
    if (c === "'") {
      const end = s.indexOf("'", i + 1);
      if (end < 0) throw new Error(`unterminated ' in: ${s}`);
      cur += s.slice(i + 1, end);
      has = true;
      i = end + 1;
    } else if (c === '"') {
      i++;
      while (i < s.length && s[i] !== '"') {
        if (s[i] === '\\' && '"\\$`'.includes(s[i + 1] ?? '')) i++;
        if (s[i] === '$' || s[i] === '`') throw new Error(`expansion in double quotes (run it with shell: true): ${s}`);
        cur += s[i];
        i++;
      }
      if (i >= s.length) throw new Error(`unterminated " in: ${s}`);
      has = true;
      i++;
    } else if (c === '\\') {
      cur += s[i + 1] ?? '';
      has = true;
      i += 2;
    } else if (/\s/.test(c)) {
      flush();
      i++;
    } else if (c === '|') {
      flush();
      out.push('|');
      i++;
    } else if ('$`<>;&()'.includes(c)) {
      throw new Error(`shell syntax "${c}" (run it with shell: true): ${s}`);
    } else {
      cur += c;
      has = true;
      i++;
    }
  }
  flush();
  return out;
}

// ---------------------------------------------------------------------------------------------
// The release under test and what it did

interface Ctx {
  namespace: string;
  release: string;
  /** The chart's name prefix for this release ("kube-node-ready" for the default release). */
  fullname: string;
  taint: { key: string; value: string; effect: string };
  label: { key: string; value: string };
  conditionType: string;
  pool: string;
  /** Karpenter's node, verified and opened. */
  verified: string;
  /** A node whose cluster DNS is dead: failed, retries exhausted. */
  failing: string;
  /** The failed worker pod kept for the failing node. */
  workerPod: string;
  workerAttempt: string;
  controllerPods: string[];
}

type Role = 'failing' | 'verified';

interface Result {
  /** The command as run (placeholders and names substituted). */
  cmd: string;
  code: number;
  stdout: string;
  stderr: string;
  /** stdout after the doc's pipe (grep, jq) was applied in the test; stdout when there is none. */
  out: string;
  /** The working directory of a shell command (files it redirected into). */
  dir: string;
}

interface RunEntry {
  /** What `<node>` (or $NODE) stands for; each role is one run. */
  nodes?: Role[];
  /** `kube-system` here is the cluster's own namespace (cluster DNS), not the release's. */
  keepKubeSystem?: boolean;
  /** Run with bash (variables, redirections, loops); NODE and NS set as the doc's first line sets them. */
  shell?: boolean;
  /** The doc's jq filter, in TypeScript (jq is not a dependency of this project). */
  jq?: (json: string) => string;
  /** 'restarted': after every controller container restarted once; 'last': destructive. */
  phase?: 'restarted' | 'last';
  check: (r: Result, c: Ctx, role: Role | undefined) => void | Promise<void>;
}

interface AllowedEntry {
  /** Why the sandbox cannot run it. */
  reason: string;
  /** What can still be checked about it. */
  check?: (c: Ctx, doc: string) => Promise<void>;
}

const lines = (s: string) => s.split('\n').filter((l) => l.trim() !== '');
const nodeName = (c: Ctx, role: Role | undefined) => (role === 'verified' ? c.verified : c.failing);

/** kube-node-ready's Events about a node: the reasons the doc lists for each outcome (a pass at the first attempt has none). */
const EVENTS: Record<Role, string[]> = {
  failing: ['VerificationChecksFailed', 'VerificationFailed'],
  verified: [],
};

/**
 * Every command of docs/troubleshooting.md this test runs, keyed by its text in the doc. `check`
 * asserts what the doc says the command shows.
 */
const COMMANDS: Record<string, RunEntry> = {
  // ## First: what does the node say?
  'kubectl describe node <node>': {
    nodes: ['failing', 'verified'],
    check(r, c, role) {
      expect(r.out).toMatch(new RegExp(`^Name:\\s+${nodeName(c, role)}$`, 'm'));
      // The taint while the node is closed; the condition with the outcome; the Events.
      const taints = /^Taints:([\s\S]*?)^Unschedulable:/m.exec(r.out)?.[1] ?? '';
      const condition = r.out.split('\n').find((l) => l.trim().startsWith(c.conditionType));
      if (role === 'failing') {
        expect(taints).toContain(`${c.taint.key}=true:NoSchedule`);
        expect(condition).toMatch(/\sFalse\s.*RetriesExhausted/);
      } else {
        expect(taints).not.toContain(c.taint.key);
        expect(condition).toMatch(/\sTrue\s.*Passed/);
      }
      const events = r.out.slice(r.out.indexOf('\nEvents:'));
      for (const reason of EVENTS[role!]) expect(events).toContain(reason);
      if (role === 'verified') expect(events).not.toMatch(/Verification(Started|Passed)/);
    },
  },
  'kubectl get events -n default --field-selector involvedObject.kind=Node,involvedObject.name=<node> --sort-by=.lastTimestamp': {
    nodes: ['failing', 'verified'],
    check(r, c, role) {
      for (const reason of EVENTS[role!]) expect(r.out).toContain(reason);
      for (const l of lines(r.out).slice(1)) expect(l).toContain(`node/${nodeName(c, role)}`);
      // Sorted: the attempt's outcome before the verdict; a first-attempt pass has no Event of ours.
      if (role === 'failing') expect(r.out.indexOf('VerificationChecksFailed')).toBeLessThan(r.out.indexOf('VerificationFailed'));
      else expect(r.out).not.toMatch(/Verification(Started|Passed)/);
    },
  },
  // The progress the controller keeps in the node's NodeVerification: the table (the CRD's printer columns), then all of it.
  'kubectl get nv <node>': {
    nodes: ['failing', 'verified'],
    check(r, c, role) {
      expect(lines(r.out)[0]).toMatch(/^NAME\s+PHASE\s+PROFILE\s+ATTEMPT\s+FAILURES\s+OUTCOME\s+VERIFIED\s+AGE$/);
      const rows = lines(r.out).slice(1);
      expect(rows).toHaveLength(1);
      // Two attempts (maxRetries 1), both failed, never verified (an empty VERIFIED, then the AGE); the
      // verified node usually passed at attempt 1, but on a loaded machine a first attempt can run out
      // of its 20 s and the next pass.
      if (role === 'failing') expect(rows[0]).toMatch(new RegExp(`^${c.failing}\\s+Failed\\s+default\\s+2\\s+2\\s+ChecksFailed\\s+\\d+[smhd]\\S*$`));
      else expect(rows[0]).toMatch(new RegExp(`^${c.verified}\\s+Passed\\s+default\\s+[1-9]\\d*\\s+0\\s+Passed\\s+\\d+[smh]\\S*\\s+\\S+$`));
    },
  },
  'kubectl get nv <node> -o yaml': {
    nodes: ['failing', 'verified'],
    async check(r, c, role) {
      const nv = parse(r.out) as NodeVerification;
      const node = await core().readNode({ name: nodeName(c, role) });
      // One per node, named after it, for this Node object (its UID), which owns it.
      expect(nv.spec).toEqual({ nodeName: node.metadata!.name, nodeUID: node.metadata!.uid });
      expect(nv.metadata?.ownerReferences).toContainEqual(expect.objectContaining({ kind: 'Node', name: node.metadata!.name, uid: node.metadata!.uid }));
      const s = nv.status!;
      expect(s.conditions).toHaveLength(1);
      if (role === 'failing') {
        expect(s).toMatchObject({ phase: 'Failed', attempt: 2, failures: 2, lastAttempt: { attempt: 2, reason: 'ChecksFailed' }, failedAt: expect.any(String) });
        expect(s.lastAttempt!.message).toContain('dns');
        expect(s.lastAttempt!.checks).toContainEqual(expect.objectContaining({ name: 'dns', ok: false }));
        expect(s.conditions![0]).toMatchObject({ type: 'Verified', status: 'False', reason: 'RetriesExhausted' });
      } else {
        expect(s).toMatchObject({ phase: 'Passed', attempt: expect.any(Number), failures: 0, lastAttempt: { reason: 'Passed' }, verifiedAt: expect.any(String) });
        expect(s.conditions![0]).toMatchObject({ type: 'Verified', status: 'True', reason: 'Passed' });
      }
    },
  },

  // ## No worker pod is created for a new node
  [`kubectl get node <node> -o jsonpath='{.spec.taints}{"\\n"}'`]: {
    nodes: ['failing', 'verified'],
    check(r, c, role) {
      if (role === 'failing') {
        const taints = JSON.parse(r.out) as k8s.V1Taint[];
        expect(taints).toContainEqual(expect.objectContaining({ key: c.taint.key, effect: 'NoSchedule' }));
      } else {
        expect(r.out).not.toContain(c.taint.key);
      }
    },
  },
  'kubectl get nodes -L node-ready/verified': {
    check(r, c) {
      const header = lines(r.out)[0]!;
      expect(header).toMatch(/\sVERIFIED$/); // kubectl names the column after the key's last segment
      expect(r.out).toMatch(new RegExp(`^${c.verified}\\s.*\\strue$`, 'm'));
      const failingRow = lines(r.out).find((l) => l.startsWith(`${c.failing} `));
      expect(failingRow).toBeDefined();
      expect(failingRow).not.toMatch(/\strue$/);
    },
  },
  'kubectl -n kube-system get pods -l app.kubernetes.io/component=controller -o wide': {
    check(r, c) {
      for (const pod of c.controllerPods) expect(r.out).toMatch(new RegExp(`^${pod}\\s+1/1\\s+Running\\s`, 'm'));
    },
  },
  [`kubectl -n kube-system get lease kube-node-ready-controller -o jsonpath='{.spec.holderIdentity}{"\\n"}'`]: {
    async check(r, c) {
      const holder = r.out.trim();
      expect(holder).toMatch(/_[0-9a-f-]{36}$/); // hostname_uuid, the hostname being the pod's name
      expect(c.controllerPods).toContain(holder.replace(/_[0-9a-f-]{36}$/, ''));
      const lease = await sandbox().kc.makeApiClient(k8s.CoordinationV1Api).readNamespacedLease({ namespace: c.namespace, name: `${c.fullname}-controller` });
      expect(holder).toBe(lease.spec?.holderIdentity);
    },
  },
  'kubectl -n kube-system logs -l app.kubernetes.io/component=controller --tail=200 --prefix | grep -i <node>': {
    nodes: ['failing'],
    check(r, c) {
      // --prefix names the pod that wrote each line; the leader is the one acting on the node.
      const found = lines(r.out);
      expect(found.length).toBeGreaterThan(0);
      for (const l of found) expect(l).toMatch(new RegExp(`^\\[pod/(${c.controllerPods.join('|')})/controller\\] .*${c.failing}`, 'i'));
    },
  },
  'kubectl auth can-i create pods -n kube-node-ready-worker --as=system:serviceaccount:kube-system:kube-node-ready-controller': { check: (r) => expect(r.out.trim()).toBe('yes') },
  'kubectl auth can-i patch nodes --as=system:serviceaccount:kube-system:kube-node-ready-controller': { check: (r) => expect(r.out.trim()).toBe('yes') },
  'kubectl auth can-i update leases/kube-node-ready-controller -n kube-system --as=system:serviceaccount:kube-system:kube-node-ready-controller': {
    check: (r) => expect(r.out.trim()).toBe('yes'),
  },

  // ## The worker pod is stuck (Pending, ContainerCreating)
  'kubectl -n kube-node-ready-worker get pods -l app.kubernetes.io/component=worker,kube-node-ready.io/node=<node> -o wide': {
    nodes: ['failing'],
    check(r, c) {
      // The failed attempt's pod, kept for inspection (the first attempt's was deleted: keepFailedPods 1).
      const rows = lines(r.out).slice(1);
      expect(rows).toHaveLength(1);
      expect(rows[0]).toMatch(new RegExp(`^${c.workerPod}\\s+0/1\\s+Error\\s.*\\s${c.failing}\\s`));
    },
  },
  'kubectl -n kube-node-ready-worker describe pod <worker-pod>': {
    check(r, c) {
      expect(r.out).toMatch(new RegExp(`^Name:\\s+${c.workerPod}$`, 'm'));
      expect(r.out).toMatch(new RegExp(`^Node:\\s+${c.failing}/`, 'm'));
      expect(r.out).toMatch(/^Status:\s+Failed$/m);
      expect(r.out).toMatch(/^ +Message: +\{.*"name":"dns","ok":false/m); // the termination message: the JSON summary
      expect(r.out).toMatch(/^ +State: +Terminated\n +Reason: +Error\n(?: +Message: +\{.*\}\n)? +Exit Code: +1$/m);
      // The kubelet's Events of the pod.
      const events = r.out.slice(r.out.indexOf('\nEvents:'));
      for (const reason of ['Scheduled', 'Created', 'Started']) expect(events).toContain(reason);
    },
  },
  'kubectl -n kube-node-ready-worker delete pod <worker-pod>': {
    phase: 'last',
    async check(r, c) {
      expect(r.out).toContain(`pod "${c.workerPod}" deleted`);
      await waitFor(async () => (await readPod(`${c.fullname}-worker`, c.workerPod)) === undefined, `pod ${c.workerPod} to be gone`, 30_000, 250);
    },
  },

  // ## The worker ran and failed
  'kubectl -n kube-node-ready-worker logs <worker-pod>': {
    check(r) {
      // One JSON line per check, then a summary.
      const records = lines(r.out).map((l) => JSON.parse(l) as { check?: string; ok?: boolean; error?: string; msg?: string; failed?: string[] });
      const dns = records.find((x) => x.check === 'dns');
      expect(dns).toMatchObject({ ok: false });
      expect(records.find((x) => x.check === 'api')).toMatchObject({ ok: true });
      const summary = records.at(-1)!;
      expect(summary).toMatchObject({ ok: false, msg: 'verification failed' });
      expect(summary.failed).toContain('dns');
    },
  },
  [`kubectl -n kube-node-ready-worker get pod <worker-pod> -o jsonpath='{.status.containerStatuses[0].state.terminated}{"\\n"}'`]: {
    check(r) {
      const terminated = JSON.parse(r.out) as { exitCode: number; reason: string; message: string };
      expect(terminated).toMatchObject({ exitCode: 1, reason: 'Error' });
      // The termination message is the JSON summary: each check with its result and first error.
      const summary = JSON.parse(terminated.message) as { ok: boolean; checks: Array<{ name: string; ok: boolean; error?: string }> };
      expect(summary.ok).toBe(false);
      expect(summary.checks.find((x) => x.name === 'dns')).toMatchObject({ ok: false, error: expect.any(String) });
    },
  },
  // The table "Check failed | Look at".
  'kubectl -n kube-system get pods,endpointslices -l k8s-app=kube-dns -o wide': {
    keepKubeSystem: true, // the cluster DNS lives in kube-system whatever the release's namespace
    async check(r) {
      // On a real cluster the CoreDNS pods and the kube-dns Service's EndpointSlices (the
      // EndpointSlice controller copies the Service's labels, k8s-app=kube-dns among them). The
      // sandbox has no DNS Pods (docs/sandbox.md) and its own kube-dns EndpointSlice carries only
      // kubernetes.io/service-name: until it also carries the Service's labels, the command shows
      // nothing. Either way it must run; the addresses are required once the slice is labelled.
      const slices = await sandbox()
        .kc.makeApiClient(k8s.DiscoveryV1Api)
        .listNamespacedEndpointSlice({ namespace: 'kube-system', labelSelector: 'kubernetes.io/service-name=kube-dns' });
      const labelled = slices.items.some((s) => s.metadata?.labels?.['k8s-app'] === 'kube-dns');
      if (labelled) expect(r.out).toMatch(/10\.53\.1\.1,10\.53\.1\.2/);
      else expect(`${r.out}${r.stderr}`).toMatch(/No resources found in kube-system namespace/);
    },
  },
  // ### Cold start: every node's taints, one line each.
  'kubectl get nodes -o custom-columns=NAME:.metadata.name,TAINTS:.spec.taints[*].key': {
    check(r, c) {
      const row = lines(r.out).find((l) => l.startsWith(`${c.failing} `));
      expect(row, r.out).toMatch(new RegExp(`^${c.failing}\\s+\\S*${c.taint.key.replace(/[./]/g, '\\$&')}`));
      expect(lines(r.out)[0]).toMatch(/^NAME\s+TAINTS$/);
    },
  },
  'kubectl get endpointslices -n default -l kubernetes.io/service-name=kubernetes': {
    check: (r) => expect(r.out).toMatch(/^kubernetes\s+IPv4\s+6443\s+10\.0\.0\.1\s/m),
  },
  'kubectl auth can-i get services --as=system:serviceaccount:kube-node-ready-worker:kube-node-ready-worker': { check: (r) => expect(r.out.trim()).toBe('yes') },

  // ## The node passed but keeps its taint (Karpenter)
  'kubectl get nodeclaims -o wide | grep <node>': {
    nodes: ['verified'],
    check(r, c) {
      const found = lines(r.out);
      expect(found).toHaveLength(1);
      expect(found[0]).toMatch(new RegExp(`\\s${c.verified}\\s+True\\s.*\\s${c.pool}\\s`));
    },
  },
  'kubectl get node <node> -L karpenter.sh/registered,karpenter.sh/nodepool': {
    nodes: ['verified'],
    check(r, c) {
      expect(lines(r.out)[0]).toMatch(/\sREGISTERED\s+NODEPOOL$/);
      expect(lines(r.out)[1]).toMatch(new RegExp(`^${c.verified}\\s+Ready\\s.*\\strue\\s+${c.pool}$`));
    },
  },

  // ## The controller does not start
  'kubectl -n kube-system get pods -l app.kubernetes.io/component=controller': {
    check(r, c) {
      for (const pod of c.controllerPods) expect(r.out).toMatch(new RegExp(`^${pod}\\s+1/1\\s+Running\\s`, 'm'));
    },
  },
  'kubectl -n kube-system logs deploy/kube-node-ready-controller --previous': {
    // A previous container needs a restart: every controller container has exited once (lost its
    // leadership, exit 1) and been restarted by the kubelet, so whichever pod kubectl picks has one.
    phase: 'restarted',
    check(r) {
      expect(r.out).toContain('leadership lost; exiting so a fresh process can compete again');
    },
  },

  // ## Two controllers act on the same nodes
  'kubectl get deploy -A -l app.kubernetes.io/name=kube-node-ready': {
    check: (r, c) => expect(r.out).toMatch(new RegExp(`^${c.namespace}\\s+${c.fullname}-controller\\s+2/2\\s`, 'm')),
  },
  'kubectl get lease -A | grep kube-node-ready': {
    check: (r, c) => expect(r.out).toMatch(new RegExp(`^${c.namespace}\\s+${c.fullname}-controller\\s+(${c.controllerPods.join('|')})_`, 'm')),
  },

  // ## Collect everything for a bug report (run in a scratch directory, as the doc runs them)
  'kubectl describe node "$NODE" > node.txt': {
    nodes: ['failing'],
    shell: true,
    check(r, c) {
      const text = readFileSync(join(r.dir, 'node.txt'), 'utf8');
      expect(text).toMatch(new RegExp(`^Name:\\s+${c.failing}$`, 'm'));
      expect(text).toContain(c.conditionType);
      expect(text).toContain('VerificationChecksFailed');
    },
  },
  'kubectl get events -n default --field-selector involvedObject.name="$NODE" -o yaml > events.yaml': {
    nodes: ['failing'],
    shell: true,
    check(r) {
      const text = readFileSync(join(r.dir, 'events.yaml'), 'utf8');
      for (const reason of EVENTS.failing) expect(text).toContain(`reason: ${reason}`);
    },
  },
  'kubectl -n "$WNS" get pods -l app.kubernetes.io/component=worker,kube-node-ready.io/node="$NODE" -o yaml > workers.yaml': {
    nodes: ['failing'],
    shell: true,
    check(r, c) {
      const text = readFileSync(join(r.dir, 'workers.yaml'), 'utf8');
      expect(text).toContain(`name: ${c.workerPod}`);
      expect(text).toContain('phase: Failed');
    },
  },
  'for p in $(kubectl -n "$WNS" get pods -l app.kubernetes.io/component=worker,kube-node-ready.io/node="$NODE" -o name); do kubectl -n "$WNS" logs "$p" > "$(basename "$p").log"; done': {
    nodes: ['failing'],
    shell: true,
    check(r, c) {
      const file = join(r.dir, `${c.workerPod}.log`);
      expect(existsSync(file), `${file} written`).toBe(true);
      expect(readFileSync(file, 'utf8')).toMatch(/"check":"dns","ok":false/);
    },
  },
  'kubectl -n "$NS" logs -l app.kubernetes.io/component=controller --tail=-1 --prefix > controller.log': {
    nodes: ['failing'],
    shell: true,
    check(r, c) {
      const text = readFileSync(join(r.dir, 'controller.log'), 'utf8');
      expect(text).toMatch(/^\[pod\/[^/]+\/controller\] \{/m);
      expect(text).toContain(c.failing);
      expect(text).toContain('became leader');
    },
  },
  'helm get values kube-node-ready -n "$NS" > values.yaml': {
    nodes: ['failing'],
    shell: true,
    check(r, c) {
      const text = readFileSync(join(r.dir, 'values.yaml'), 'utf8');
      expect(text).toMatch(/^USER-SUPPLIED VALUES:/);
      expect(text).toContain(c.taint.key);
    },
  },
};

/**
 * Commands the sandbox cannot run, with the reason, and what is still checked about them. The
 * simulated kubelet serves container logs only: no exec, attach or port-forward (docs/sandbox.md).
 */
const ALLOWED: Record<string, AllowedEntry> = {
  'kubectl -n kube-system exec deploy/kube-node-ready-controller -- /nodejs/bin/node /app/kube-node-ready.mjs status --config /etc/kube-node-ready/config.yaml': {
    reason: "kubectl exec needs the kubelet's exec API, which the sandbox's simulated kubelet does not serve",
    // What it would run: the image's node and bundle (Dockerfile), the config file the chart mounts,
    // and `status` itself, run here from the bundle with the release's own configuration.
    async check(c) {
      expect(readFileSync(join(REPO_ROOT, 'Dockerfile'), 'utf8')).toContain('ENTRYPOINT ["/nodejs/bin/node", "/app/kube-node-ready.mjs"]');
      const deployment = await sandbox().kc.makeApiClient(k8s.AppsV1Api).readNamespacedDeployment({ namespace: c.namespace, name: `${c.fullname}-controller` });
      const container = deployment.spec?.template.spec?.containers[0];
      expect(container?.args?.slice(0, 3)).toEqual(['controller', '--config', '/etc/kube-node-ready/config.yaml']);
      expect(container?.volumeMounts?.map((m) => m.mountPath)).toContain('/etc/kube-node-ready');
      const cm = await core().readNamespacedConfigMap({ namespace: c.namespace, name: `${c.fullname}-config` });
      const dir = mkdtempSync(join(tmpdir(), 'knr-status-'));
      try {
        writeFileSync(join(dir, 'config.yaml'), cm.data?.['config.yaml'] ?? '');
        const stdout = await bundle(['status', '--config', join(dir, 'config.yaml'), '--kubeconfig', sandbox().state.kubeconfig], { POD_NAMESPACE: c.namespace });
        // Every node kube-node-ready has looked at, with its phase, attempt and last outcome.
        expect(stdout).toMatch(new RegExp(`^${c.failing}\\s+Failed\\s+2\\s+ChecksFailed: `, 'm'));
        expect(stdout).toMatch(new RegExp(`^${c.verified}\\s+Verified\\s+1\\s+Passed`, 'm'));
        // "and the current leader": not checked. `status` looks for the Lease in
        // leaderElection.namespace or else kube-system, not in the pod's own namespace (POD_NAMESPACE)
        // as the controller does, so outside kube-system it prints "leader: none" (packages/cli/src/status.ts).
        expect(stdout).toMatch(/^leader: /m);
      } finally {
        rmSync(dir, { recursive: true, force: true });
      }
    },
  },
  [`kubectl -n kube-node-ready-worker run knr-debug --rm -it --restart=Never --image=ghcr.io/kube-node-ready/kube-node-ready:<version> --override-type=strategic --overrides='{"spec":{"serviceAccountName":"kube-node-ready-worker","nodeName":"<node>","tolerations":[{"operator":"Exists"}],"securityContext":{"runAsNonRoot":true,"runAsUser":65532,"seccompProfile":{"type":"RuntimeDefault"}},"containers":[{"name":"knr-debug","securityContext":{"allowPrivilegeEscalation":false,"capabilities":{"drop":["ALL"]}}}]}}' -- worker --checks dns,api,tcp,service,podnet,mtu,egress,http --log-format pretty`]: {
    reason: "kubectl run -it attaches to the container, which needs the kubelet's attach API, which the sandbox's simulated kubelet does not serve",
    // What kubectl would create (a server-side dry run, without --rm -it: the worker namespace's
    // Pod Security "restricted" admits it), and that the worker takes those flags and check names.
    async check(c, doc) {
      const text = substitute(doc.replace('<version>', 'dev'), c, 'failing', {}).replace(' --rm -it', '');
      const words = shellWords(text);
      const dashes = words.indexOf('--'); // kubectl's flags go before the container's arguments
      const dry = await kubectl([...words.slice(1, dashes), '--dry-run=server', '-o', 'json', ...words.slice(dashes)]);
      expect(dry.code, dry.stderr).toBe(0);
      expect(dry.stderr).not.toContain('PodSecurity');
      const pod = JSON.parse(dry.stdout) as k8s.V1Pod;
      expect(pod.metadata?.namespace).toBe(`${c.fullname}-worker`);
      expect(pod.spec).toMatchObject({ serviceAccountName: `${c.fullname}-worker`, nodeName: c.failing, restartPolicy: 'Never', tolerations: [{ operator: 'Exists' }] });
      const args = pod.spec?.containers[0]?.args ?? [];
      expect(args.slice(0, 3)).toEqual(['worker', '--checks', 'dns,api,tcp,service,podnet,mtu,egress,http']);
      const help = await bundle(['worker', '--help']);
      expect(help).toContain('(default dns,api,tcp,service,podnet,mtu,egress,http)');
      expect(help).toContain('--log-format json|pretty');
      const chartValues = readFileSync(join(CHART_DIR, 'values.yaml'), 'utf8');
      expect(chartValues).toMatch(/^ {2}repository: ghcr\.io\/kube-node-ready\/kube-node-ready$/m);
    },
  },
};

// ---------------------------------------------------------------------------------------------
// Running them

let binDir: Promise<string> | undefined;

/**
 * The directory with kubectl and helm: only those two components are built (or found in the cache),
 * so a change to another component of build.sh never makes this test wait for its build.
 */
function tools(): Promise<string> {
  binDir ??= run('bash', [join(REPO_ROOT, 'packages', 'sandbox', 'go', 'build.sh'), 'kubernetes', 'helm'], { maxBuffer: 16 * 1024 * 1024 }).then(({ stdout }) => {
    const dir = stdout.trim().split('\n').pop() ?? '';
    if (!existsSync(join(dir, 'kubectl')) || !existsSync(join(dir, 'helm'))) throw new Error(`build.sh kubernetes helm printed ${JSON.stringify(stdout)}`);
    return dir;
  });
  return binDir;
}

/** helm against the sandbox, its caches and config in a scratch HOME. */
async function helm(args: string[]): Promise<{ code: number; stdout: string; stderr: string }> {
  const home = mkdtempSync(join(tmpdir(), 'knr-helm-'));
  try {
    const { stdout, stderr } = await run(join(await tools(), 'helm'), [...args, '--kubeconfig', sandbox().state.kubeconfig], {
      env: { PATH: process.env.PATH, HOME: home, HELM_CACHE_HOME: join(home, 'cache'), HELM_CONFIG_HOME: join(home, 'config'), HELM_DATA_HOME: join(home, 'data') },
      maxBuffer: 64 * 1024 * 1024,
    });
    return { code: 0, stdout, stderr };
  } catch (err) {
    const e = err as { code?: number; stdout?: string; stderr?: string };
    return { code: typeof e.code === 'number' ? e.code : 1, stdout: e.stdout ?? '', stderr: e.stderr ?? String(err) };
  } finally {
    rmSync(home, { recursive: true, force: true });
  }
}

/**
 * Runs the product's bundle (what the image runs) and returns its stdout. dist/ is shared with
 * other test runs on the machine, whose global set-up rebundles it: while that writes the entry
 * point and its chunks, a start can miss a chunk (ERR_MODULE_NOT_FOUND), so that is tried again.
 */
async function bundle(args: string[], env: Record<string, string> = {}): Promise<string> {
  for (let attempt = 1; ; attempt++) {
    try {
      return (await run(process.execPath, [join(REPO_ROOT, 'dist', 'kube-node-ready.mjs'), ...args], { env: { PATH: process.env.PATH, ...env } })).stdout;
    } catch (err) {
      if (attempt >= 5 || !String((err as { stderr?: string }).stderr).includes('ERR_MODULE_NOT_FOUND')) throw err;
      await new Promise((r) => setTimeout(r, 2000));
    }
  }
}

async function kubectl(args: string[]): Promise<{ code: number; stdout: string; stderr: string }> {
  const bin = join(await tools(), 'kubectl');
  const home = mkdtempSync(join(tmpdir(), 'knr-kubectl-'));
  try {
    const { stdout, stderr } = await run(bin, ['--kubeconfig', sandbox().state.kubeconfig, ...args], { maxBuffer: 64 * 1024 * 1024, env: { PATH: process.env.PATH, HOME: home } });
    return { code: 0, stdout, stderr };
  } catch (err) {
    const e = err as { code?: number; stdout?: string; stderr?: string };
    return { code: typeof e.code === 'number' ? e.code : 1, stdout: e.stdout ?? '', stderr: e.stderr ?? String(err) };
  } finally {
    rmSync(home, { recursive: true, force: true });
  }
}

/** The doc's command with this release's names: placeholders, namespace, release-derived names, taint and label keys. */
function substitute(cmd: string, c: Ctx, role: Role | undefined, entry: Pick<RunEntry, 'keepKubeSystem'>): string {
  let s = cmd
    .replaceAll('<node>', nodeName(c, role))
    .replaceAll('<worker-pod>', c.workerPod)
    .replace(/(?<![\w.-])kube-node-ready-(controller|worker)(?![\w.-])/g, `${c.fullname}-$1`)
    .replace(/^(helm (?:[a-z]+ )+)kube-node-ready(?=\s)/, `$1${c.release}`)
    .replace(/(?<![\w.-])node-ready\/unverified(?![\w.-])/g, c.taint.key)
    .replace(/(?<![\w.-])node-ready\/verified(?![\w.-])/g, c.label.key);
  if (!entry.keepKubeSystem) s = s.replace(/(?<![\w.-])kube-system(?![\w.-])/g, c.namespace);
  const left = /<[a-z-]+>/.exec(s);
  if (left) throw new Error(`placeholder ${left[0]} has no value in: ${cmd}`);
  return s;
}

/** `grep [-i] PATTERN` as a pipe stage: the matching lines; nothing matching fails, as grep exits 1. */
function grep(words: string[], text: string): string {
  const ignoreCase = words[1] === '-i';
  const pattern = words[ignoreCase ? 2 : 1];
  if (!pattern || words.length !== (ignoreCase ? 3 : 2)) throw new Error(`unsupported grep: ${words.join(' ')}`);
  const needle = ignoreCase ? pattern.toLowerCase() : pattern;
  const found = text.split('\n').filter((l) => (ignoreCase ? l.toLowerCase() : l).includes(needle));
  if (found.length === 0) throw new Error(`grep ${pattern}: no line matched in:\n${text}`);
  return `${found.join('\n')}\n`;
}

async function runCommand(cmd: string, entry: RunEntry, c: Ctx, role: Role | undefined): Promise<Result> {
  const text = substitute(cmd, c, role, entry);
  const dir = mkdtempSync(join(tmpdir(), 'knr-troubleshooting-'));
  if (entry.shell) {
    // As the doc's block runs it: its first line sets NODE, NS and WNS; kubectl and helm from the sandbox's
    // binaries, the sandbox's kubeconfig through KUBECONFIG; helm's caches in the scratch directory.
    const env = {
      PATH: `${await tools()}:${process.env.PATH}`,
      HOME: dir,
      KUBECONFIG: sandbox().state.kubeconfig,
      NODE: nodeName(c, role),
      NS: c.namespace,
      WNS: `${c.fullname}-worker`,
    };
    try {
      const { stdout, stderr } = await run('bash', ['-euo', 'pipefail', '-c', text], { cwd: dir, env, maxBuffer: 64 * 1024 * 1024 });
      return { cmd: text, code: 0, stdout, stderr, out: stdout, dir };
    } catch (err) {
      const e = err as { code?: number; stdout?: string; stderr?: string };
      return { cmd: text, code: typeof e.code === 'number' ? e.code : 1, stdout: e.stdout ?? '', stderr: e.stderr ?? String(err), out: '', dir };
    }
  }
  const words = shellWords(text);
  const stages: string[][] = [[]];
  for (const w of words) {
    if (w === '|') stages.push([]);
    else stages.at(-1)!.push(w);
  }
  const [first, ...pipes] = stages as [string[], ...string[][]];
  if (first[0] !== 'kubectl') throw new Error(`not a kubectl command: ${text}`);
  const result = await kubectl(first.slice(1));
  let out = result.stdout;
  if (result.code === 0) {
    for (const stage of pipes) {
      if (stage[0] === 'grep') out = grep(stage, out);
      else if (stage[0] === 'jq' && entry.jq) out = entry.jq(out);
      else throw new Error(`no TypeScript stand-in for the pipe stage "${stage.join(' ')}" of: ${cmd}`);
    }
  }
  return { cmd: text, ...result, out, dir };
}

// ---------------------------------------------------------------------------------------------
// The scenario

async function readPod(namespace: string, name: string): Promise<k8s.V1Pod | undefined> {
  try {
    return await core().readNamespacedPod({ namespace, name });
  } catch (err) {
    if (statusCode(err) === 404) return undefined;
    throw err;
  }
}

/** The last lines each controller pod wrote (kept by the simulated kubelet), for timeouts. */
async function controllerLogs(namespace: string): Promise<string> {
  const pods = await core().listNamespacedPod({ namespace, labelSelector: 'app.kubernetes.io/component=controller' }).catch(() => ({ items: [] as k8s.V1Pod[] }));
  const out: string[] = [];
  for (const pod of pods.items) {
    const file = join(sandbox().layout.dir, 'pods', pod.metadata?.uid ?? '-', 'controller.log');
    const tail = existsSync(file) ? readFileSync(file, 'utf8').trim().split('\n').slice(-8) : ['(no log)'];
    out.push(`--- ${pod.metadata?.name} (${pod.status?.phase}, restarts ${pod.status?.containerStatuses?.[0]?.restartCount ?? 0}):`, ...tail);
  }
  return out.join('\n');
}

const DOC = readFileSync(DOC_PATH, 'utf8');
const FOUND = extractCommands(DOC);
const FAKE_HOLDER = 'troubleshooting-test';

let ctx: Ctx | undefined;
const nodes: string[] = [];
let appsNamespace = '';
let restarted: Promise<void> | undefined;

const started = Date.now();
/** A line on stderr per step of the set-up, so a slow run shows where the time went. */
const step = (what: string) => console.error(`[troubleshooting +${((Date.now() - started) / 1000).toFixed(1)}s] ${what}`);

/** Waits, and on timeout adds the controller pods' last log lines to what waitFor describes. */
async function waitWithLogs<T>(fn: () => Promise<T | undefined | false>, what: string, timeoutMs: number, intervalMs = 500): Promise<T> {
  return waitFor(fn, what, timeoutMs, intervalMs).catch(async (err: Error) => {
    throw new Error(`${err.message}\n${ctx ? await controllerLogs(ctx.namespace) : ''}`, { cause: err });
  });
}

/**
 * Makes every controller container exit once and restart: the Lease is handed to a holder that
 * does not exist, so the leader loses it (exit 1, the kubelet restarts the container after its
 * back-off); after leaseDuration the follower takes it over, and loses it the same way.
 */
async function restartEveryController(c: Ctx): Promise<void> {
  const coordination = sandbox().kc.makeApiClient(k8s.CoordinationV1Api);
  const restarts = async () => {
    const pods = (await core().listNamespacedPod({ namespace: c.namespace, labelSelector: 'app.kubernetes.io/component=controller' })).items;
    return new Map(pods.map((p) => [p.metadata!.name!, p.status?.containerStatuses?.[0]?.restartCount ?? 0]));
  };
  for (let round = 0; round < 4 && [...(await restarts()).values()].some((n) => n === 0); round++) {
    // Read, then replace guarded by that resourceVersion: a renewal in between (409) means read again.
    const { leader, before } = await waitWithLogs(
      async () => {
        const lease = await coordination.readNamespacedLease({ namespace: c.namespace, name: `${c.fullname}-controller` });
        const holder = lease.spec?.holderIdentity ?? '';
        if (!holder || holder === FAKE_HOLDER) return undefined;
        const pod = holder.replace(/_[0-9a-f-]{36}$/, '');
        const count = (await restarts()).get(pod) ?? 0;
        const now = new k8s.V1MicroTime();
        try {
          await coordination.replaceNamespacedLease({
            namespace: c.namespace,
            name: lease.metadata!.name!,
            body: { ...lease, spec: { ...lease.spec, holderIdentity: FAKE_HOLDER, acquireTime: now, renewTime: now, leaseTransitions: (lease.spec?.leaseTransitions ?? 0) + 1 } },
          });
        } catch (err) {
          if (statusCode(err) === 409) return undefined;
          throw err;
        }
        return { leader: pod, before: count };
      },
      `a controller to hold the Lease, and to hand it to ${FAKE_HOLDER} (round ${round + 1})`,
      60_000,
      200,
    );
    await waitWithLogs(async () => ((await restarts()).get(leader) ?? 0) > before, `controller pod ${leader} to lose the Lease and restart`, 60_000);
  }
  const counts = await restarts();
  expect([...counts.values()].every((n) => n > 0), `restarts per controller pod: ${JSON.stringify(Object.fromEntries(counts))}\n${await controllerLogs(c.namespace)}`).toBe(true);
  // Both running again.
  await waitWithLogs(
    async () => {
      const pods = (await core().listNamespacedPod({ namespace: c.namespace, labelSelector: 'app.kubernetes.io/component=controller' })).items;
      return pods.length === c.controllerPods.length && pods.every((p) => p.status?.containerStatuses?.[0]?.state?.running);
    },
    'the controller containers to run again',
    60_000,
  );
}

async function setUp(): Promise<Ctx> {
  const namespace = await createNamespace('ts');
  await core().patchNamespace(
    { name: namespace, body: { metadata: { labels: { 'pod-security.kubernetes.io/enforce': 'restricted', 'pod-security.kubernetes.io/enforce-version': 'latest' } } } },
    k8s.setHeaderOptions('Content-Type', k8s.PatchStrategy.MergePatch),
  );
  const id = namespace.split('-').pop() as string;
  const release = `knr-${id}`;
  const fullname = `${release}-kube-node-ready`;
  // Everything this release acts on is unique to it, so tests running beside it are untouched.
  const taint = { key: `ts-${id}.kube-node-ready.io/unverified`, value: 'true', effect: 'NoSchedule' };
  const label = { key: `ts-${id}.kube-node-ready.io/verified`, value: 'true' };
  const conditionType = `ts-${id}.kube-node-ready.io/NetworkVerified`;
  const placement = { [`ts-${id}.kube-node-ready.io/controller`]: 'true' };
  const pool = `ts-${id}`;
  // The pool's own taint keeps other tests' pending pods off its nodes; the worker tolerates it.
  const dedicated = { key: 'test.kube-node-ready.io/pool', value: pool, effect: 'NoSchedule' };
  const values = {
    image: { repository: 'kube-node-ready', tag: 'dev' },
    controller: { nodeSelector: placement, priorityClassName: '' },
    config: {
      worker: {
        priorityClassName: '',
        timeout: '20s',
        scheduleTimeout: '20s',
        startTimeout: '20s',
        // The chart's default names, derived from this release as the defaults are from "kube-node-ready".
        serviceAccountName: `${fullname}-worker`,
        configMapName: `${fullname}-worker`,
        keepFailedPods: 1,
        tolerations: [{ key: dedicated.key, operator: 'Equal', value: pool, effect: 'NoSchedule' }],
      },
      // Two attempts, a second apart: the failing node is Failed (retries exhausted) within seconds.
      reconciliation: { maxRetries: 1, initialBackoff: '1s', maxBackoff: '2s', resyncInterval: '30s' },
      nodeManagement: { taints: [taint], verifiedLabel: label, condition: { type: conditionType } },
      leaderElection: { leaseName: `${fullname}-controller`, leaseDuration: '4s', renewDeadline: '3s', retryPeriod: '1s' },
    },
  };
  describeNodesOnTimeout(`karpenter.sh/nodepool=${pool}`);
  step(`namespace ${namespace}, release ${release}`);
  for (let i = 0; i < 2; i++) nodes.push(await addNode({ prefix: `ts-ctl-${id}`, labels: placement }));
  const dir = mkdtempSync(join(tmpdir(), 'knr-ts-'));
  try {
    writeFileSync(join(dir, 'values.json'), JSON.stringify(values));
    const install = await helm(['install', release, CHART_DIR, '--namespace', namespace, '--values', join(dir, 'values.json')]);
    expect(install.code, install.stderr).toBe(0);
  } finally {
    rmSync(dir, { recursive: true, force: true });
  }
  step('installed');
  const partial = { namespace, release, fullname, taint, label, conditionType, pool, verified: '', failing: '', workerPod: '', workerAttempt: '', controllerPods: [] as string[] };
  ctx = partial;

  const apps = sandbox().kc.makeApiClient(k8s.AppsV1Api);
  await waitWithLogs(
    async () => {
      const d = await apps.readNamespacedDeployment({ name: `${fullname}-controller`, namespace });
      return (d.status?.availableReplicas ?? 0) >= (d.spec?.replicas ?? 1);
    },
    `the Deployment ${fullname}-controller to be available`,
    120_000,
  );
  step('controller Deployment available');
  partial.controllerPods = (await core().listNamespacedPod({ namespace, labelSelector: 'app.kubernetes.io/component=controller' })).items.map((p) => p.metadata!.name!).sort();
  await waitWithLogs(
    async () => (await sandbox().kc.makeApiClient(k8s.CoordinationV1Api).readNamespacedLease({ namespace, name: `${fullname}-controller` })).spec?.holderIdentity,
    'a leader',
    60_000,
  );

  step('a leader');
  // The failing node: tainted as a kubelet registers it, its pods' nameserver dead.
  partial.failing = await addNode({ prefix: `ts-bad-${id}`, taints: [taint], faults: { dns: 'dead' } });
  nodes.push(partial.failing);

  // The verified node: real Karpenter launches it for a pending pod; registration adds the taint.
  await createNodePool(sandbox().kc, { name: pool, taints: [dedicated], startupTaints: [taint] });
  appsNamespace = namespace;
  await pendingWorkloadFor(pool, namespace, dedicated);
  const claim = await waitWithLogs(async () => (await listNodeClaims(sandbox().kc, pool)).find((x) => x.status?.nodeName), `Karpenter to launch a node in ${pool}`, 120_000);
  partial.verified = claim.status!.nodeName!;
  step(`Karpenter launched ${partial.verified}`);

  // Outcomes: the Karpenter node verified and opened, the failing node failed for good.
  await waitWithLogs(
    async () => {
      const n = await core().readNode({ name: partial.verified });
      const tainted = (n.spec?.taints ?? []).some((t) => t.key === taint.key);
      const cond = n.status?.conditions?.find((x) => x.type === conditionType);
      return !tainted && n.metadata?.labels?.[label.key] === 'true' && cond?.status === 'True';
    },
    `node ${partial.verified} (Karpenter) verified and opened`,
    120_000,
  );
  step(`${partial.verified} verified`);
  await waitWithLogs(
    async () => {
      const n = await core().readNode({ name: partial.failing });
      const cond = n.status?.conditions?.find((x) => x.type === conditionType);
      return (await readVerification(partial.failing))?.status?.phase === 'Failed' && cond?.status === 'False';
    },
    `node ${partial.failing} to fail (retries exhausted)`,
    120_000,
  );
  step(`${partial.failing} failed`);
  // Its first attempt's pod deleted, the last one kept (keepFailedPods: 1).
  const kept = await waitWithLogs(
    async () => {
      const pods = (await core().listNamespacedPod({ namespace: `${fullname}-worker`, labelSelector: `app.kubernetes.io/component=worker,kube-node-ready.io/node=${partial.failing}` })).items;
      return pods.length === 1 && pods[0]!.status?.phase === 'Failed' ? pods[0] : undefined;
    },
    `one failed worker pod kept for ${partial.failing}`,
    60_000,
  );
  partial.workerPod = kept.metadata!.name!;
  partial.workerAttempt = kept.metadata!.labels!['kube-node-ready.io/attempt']!;
  // The Events the doc lists (written a few at a time, after the NodeVerification's status).
  for (const role of ['failing', 'verified'] as const) {
    const name = nodeName(partial, role);
    await waitWithLogs(
      async () => {
        const events = (await core().listNamespacedEvent({ namespace: 'default', fieldSelector: `involvedObject.kind=Node,involvedObject.name=${name}` })).items;
        return EVENTS[role].every((r) => events.some((e) => e.reason === r));
      },
      `the Events of ${name}`,
      30_000,
    );
  }
  step('ready');
  return partial;
}

/** A node's Events, a line each (for failure messages). */
async function nodeEventLines(name: string): Promise<string> {
  const events = await core()
    .listNamespacedEvent({ namespace: 'default', fieldSelector: `involvedObject.kind=Node,involvedObject.name=${name}` })
    .catch((err: unknown) => ({ items: [] as k8s.CoreV1Event[], err }));
  return events.items.map((e) => `  ${e.lastTimestamp?.toISOString?.() ?? ''} ${e.source?.component ?? ''} ${e.reason}: ${e.message}`).join('\n') || '  (none)';
}

// ---------------------------------------------------------------------------------------------

describe('docs/troubleshooting.md', () => {
  it('every kubectl and helm command in it is run by this test or allow-listed with a reason, and every entry is still in it', () => {
    const texts = FOUND.map((f) => f.text);
    expect(texts.length).toBeGreaterThan(20);
    const unknown = FOUND.filter((f) => !(f.text in COMMANDS) && !(f.text in ALLOWED)).map((f) => `  ${f.text}    [${f.where.join('; ')}]`);
    expect(unknown, `commands in docs/troubleshooting.md that this test neither runs (COMMANDS) nor allow-lists (ALLOWED):\n${unknown.join('\n')}`).toEqual([]);
    const stale = [...Object.keys(COMMANDS), ...Object.keys(ALLOWED)].filter((k) => !texts.includes(k));
    expect(stale, 'entries for commands docs/troubleshooting.md no longer has').toEqual([]);
  });

  describe('against the sandbox (chart installed, one node verified by Karpenter, one failing)', () => {
    beforeAll(async () => {
      ctx = await setUp();
    }, 660_000);

    afterAll(async () => {
      const c = ctx;
      if (c) await helm(['uninstall', c.release, '--namespace', c.namespace]);
      if (appsNamespace) await sandbox().kc.makeApiClient(k8s.AppsV1Api).deleteNamespacedDeployment({ namespace: appsNamespace, name: 'app' }).catch(() => undefined);
      if (c) await deleteNodePool(sandbox().kc, c.pool);
      await Promise.all(nodes.map((n) => deleteNode(n)));
      if (c) await core().deleteNamespace({ name: c.namespace }).catch(() => undefined);
    }, 120_000);

    for (const f of FOUND.filter((x) => x.text in ALLOWED)) {
      const entry = ALLOWED[f.text]!;
      it(`${f.text}  [allow-listed: ${entry.reason}]`, async () => {
        if (entry.check) await entry.check(ctx!, f.text);
      });
    }

    it('"Useful selectors" select what they say', async () => {
      const c = ctx!;
      // The controller pods in the release namespace, the workers in the worker namespace.
      const names = async (selector: string) =>
        (await Promise.all([c.namespace, `${c.fullname}-worker`].map(async (namespace) => (await core().listNamespacedPod({ namespace, labelSelector: selector })).items)))
          .flat()
          .map((p) => p.metadata!.name!)
          .sort();
      const rows = [...DOC.matchAll(/^\| ([^|]+) \| `(-l [^`]+|\.\.\. ,[^`]+)` \|$/gm)].map((m) => ({ what: m[1]!.trim(), selector: m[2]! }));
      expect(rows.map((r) => r.what)).toEqual(['controller pods', 'all worker pods', 'the worker pods of one node', 'one attempt']);
      let previous = '';
      for (const row of rows) {
        let selector = row.selector.startsWith('... ,') ? `${previous},${row.selector.slice('... ,'.length)}` : row.selector.slice('-l '.length);
        previous = selector;
        selector = selector.replaceAll('<node>', c.failing).replaceAll('<n>', c.workerAttempt);
        const found = await names(selector);
        if (row.what === 'controller pods') expect(found, selector).toEqual(c.controllerPods);
        else expect(found, selector).toEqual([c.workerPod]);
      }
    });

    // Then the commands, in the doc's order; the ones that need restarted controllers and the
    // destructive one (deleting the kept worker pod) last.
    const planned = FOUND.filter((f) => f.text in COMMANDS);
    const order = { main: 0, restarted: 1, last: 2 } as const;
    planned.sort((a, b) => order[COMMANDS[a.text]!.phase ?? 'main'] - order[COMMANDS[b.text]!.phase ?? 'main']);
    for (const f of planned) {
      const entry = COMMANDS[f.text]!;
      const roles: Array<Role | undefined> = entry.nodes ?? (f.text.includes('<node>') || f.text.includes('$NODE') ? ['failing'] : [undefined]);
      for (const role of roles) {
        it(`${f.text}${role ? `  [<node>: the ${role} node]` : ''}`, async () => {
          const c = ctx!;
          if (entry.phase === 'restarted') {
            restarted ??= restartEveryController(c);
            await restarted;
          }
          const r = await runCommand(f.text, entry, c, role);
          try {
            expect(r.code, `${r.cmd}\nexit ${r.code}\n${r.stderr}`).toBe(0);
            await entry.check(r, c, role);
          } catch (err) {
            (err as Error).message += `\n--- ran: ${r.cmd}\n--- stdout:\n${r.stdout.slice(0, 6000)}\n--- stderr:\n${r.stderr.slice(0, 2000)}`;
            if (role) (err as Error).message += `\n--- Events of the ${role} node:\n${await nodeEventLines(nodeName(c, role))}`;
            throw err;
          } finally {
            rmSync(r.dir, { recursive: true, force: true });
          }
        }, entry.phase === 'restarted' ? 420_000 : 120_000);
      }
    }
  });
});
