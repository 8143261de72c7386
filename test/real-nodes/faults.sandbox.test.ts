// Real nodes broken the way production breaks them (real-node-faults.ts), and what the product
// reports for each: a link that carries smaller packets than the pods send, a path that loses large
// DNS answers, a kubelet that died.
import { describe, expect, it } from 'vitest';
import { sandboxControl } from '@kube-node-ready/sandbox';
import { readNode } from '../../packages/controller/test/harness.js';
import { OUTSIDE } from '../../packages/sandbox/src/outside.js';
import { core, sandbox, uniqueName, verificationInPhase, waitFor } from '../sandbox.js';
import { realNodeSuite } from './real-nodes.js';

const suite = realNodeSuite('realfault');
const { addRealNode } = suite;

/** The suite's controller, its worker with a whole-attempt timeout for a loaded machine (mtu alone waits up to its 10 s check timeout). */
async function startController(checks: Record<string, unknown> = {}): Promise<void> {
  await suite.startController({ timeout: '60s', checks: { checkTimeout: '10s', ...checks } });
}

function checksOf(status: unknown): Map<string, { name: string; ok: boolean; error?: string }> {
  const checks = (status as { lastAttempt?: { checks?: Array<{ name: string; ok: boolean; error?: string }> } } | undefined)?.lastAttempt?.checks ?? [];
  return new Map(checks.map((c) => [c.name, c]));
}

describe('a real node with a broken component', () => {
  it('a node whose link carries 1400-byte packets while its pods send 1500 fails mtu, and the checks with small packets pass', async () => {
    await startController();
    const broken = await addRealNode('real-mtu', ['pod-mtu=1400']);
    const failed = await verificationInPhase(broken, 'Failed', 240_000);
    const checks = checksOf(failed.status);
    const context = JSON.stringify(failed.status);
    expect(checks.get('mtu')?.ok, context).toBe(false);
    expect(checks.get('mtu')?.error, context).toMatch(/1500/);
    for (const small of ['dns', 'api', 'tcp']) expect(checks.get(small)?.ok, `${small}: ${context}`).toBe(true);
  }, 420_000);

  it('a node whose kubelet is killed goes NotReady when its Lease expires, its pods running on; started again, it is Ready', async () => {
    const name = await addRealNode('real-nokubelet');
    // Opened by nobody (no controller here): Ready is the kubelet's own report.
    const isReady = async (status: string) => (await readNode(name))?.status?.conditions?.find((c) => c.type === 'Ready')?.status === status;
    await waitFor(() => isReady('True'), `real node ${name} to be Ready`, 120_000);
    await sandboxControl(sandbox().state.dir, 'POST', `/real-node-fault/${name}?fault=kubelet-stopped&on=true`);
    // The node-lifecycle controller marks it Unknown once its Lease is older than the grace period.
    const unknown = await waitFor(
      async () => {
        const c = (await readNode(name))?.status?.conditions?.find((x) => x.type === 'Ready');
        return c?.status === 'Unknown' ? c : undefined;
      },
      `real node ${name} to go NotReady (Unknown) with its kubelet stopped`,
      180_000,
    );
    expect(unknown.reason).toBe('NodeStatusUnknown');
    expect(unknown.message).toMatch(/Kubelet stopped posting node status/);
    await sandboxControl(sandbox().state.dir, 'POST', `/real-node-fault/${name}?fault=kubelet-stopped&on=false`);
    await waitFor(() => isReady('True'), `real node ${name} to be Ready again with its kubelet started`, 120_000);
  }, 420_000);
});

describe('a real node whose pods cannot leave the cluster', () => {
  it('fails egress to a name outside the cluster, while a healthy node beside it reaches it and opens', async () => {
    // OUTSIDE (outside.ts): an HTTPS server at 203.0.113.10 in the sandbox's namespace, which the
    // real nodes' CoreDNS names.
    await startController({ dns: { externalNames: [OUTSIDE.name] }, egress: { port: OUTSIDE.port } });
    const [broken, healthy] = [await addRealNode('real-noegress', ['egress-blocked']), await addRealNode('real-egress')];
    await suite.h.waitForOpen([healthy], `the healthy real node ${healthy} to reach ${OUTSIDE.name} and open`, 240_000);
    const failed = await verificationInPhase(broken, 'Failed', 240_000);
    const checks = checksOf(failed.status);
    const context = JSON.stringify(failed.status);
    expect(checks.get('egress')?.ok, context).toBe(false);
    expect(checks.get('egress')?.error, context).toContain(`${OUTSIDE.ip}:${OUTSIDE.port}`);
    // Inside the cluster everything answers: the name resolves, the API and Services connect.
    for (const inside of ['dns', 'api', 'tcp', 'service']) expect(checks.get(inside)?.ok, `${inside}: ${context}`).toBe(true);
  }, 420_000);
});

describe('a real node that loses large DNS answers', () => {
  it('passes dns with small answers and fails mtu saying large DNS answers are lost', async () => {
    // A headless Service whose A answer is over 1500 bytes: 120 endpoints from TEST-NET-1
    // (nothing connects to them; they exist only as DNS records).
    const service = uniqueName('large');
    await core().createNamespacedService({ namespace: suite.h.namespace, body: { metadata: { name: service }, spec: { clusterIP: 'None', ports: [{ name: 'p', port: 9, protocol: 'TCP' }] } } });
    await sandbox()
      .kc.makeApiClient((await import('@kubernetes/client-node')).DiscoveryV1Api)
      .createNamespacedEndpointSlice({
        namespace: suite.h.namespace,
        body: {
          metadata: { name: service, labels: { 'kubernetes.io/service-name': service, 'endpointslice.kubernetes.io/managed-by': 'kube-node-ready-test' } },
          addressType: 'IPv4',
          ports: [{ name: 'p', port: 9, protocol: 'TCP' }],
          endpoints: Array.from({ length: 120 }, (_, i) => ({ addresses: [`192.0.2.${i + 1}`], conditions: { ready: true } })),
        },
      });
    await startController({ mtu: { largeName: `${service}.${suite.h.namespace}.svc.${sandbox().layout.clusterDomain}` } });
    const broken = await addRealNode('real-dnslarge', ['dns-large-dropped']);
    const failed = await verificationInPhase(broken, 'Failed', 240_000);
    const checks = checksOf(failed.status);
    const context = JSON.stringify(failed.status);
    expect(checks.get('dns')?.ok, context).toBe(true);
    expect(checks.get('mtu')?.ok, context).toBe(false);
    expect(checks.get('mtu')?.error, context).toMatch(/large DNS answers/i);
  }, 420_000);
});
