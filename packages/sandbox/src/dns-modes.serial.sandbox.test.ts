// Cluster-wide DNS failure modes (the ConfigMap kube-system/sandbox-dns). They break DNS for every
// pod, so they run in the serial project, on a sandbox of their own.
import { createRequire } from 'node:module';
import { describe, expect, it } from 'vitest';
import { core, sandbox, waitFor } from '../../../test/sandbox.js';
import { DNS_CONFIGMAP } from './dns.js';
import { execInSandbox } from './sandbox.js';

const require = createRequire(import.meta.url);
const NAME = 'kubernetes.default.svc.cluster.local';

const setMode = (mode: string) =>
  core().patchNamespacedConfigMap({ name: DNS_CONFIGMAP, namespace: 'kube-system', body: [{ op: 'replace', path: '/data/mode', value: mode }] });

/** One query over UDP and one over TCP with dns2, from inside the cluster network. */
async function query(server: string): Promise<{ udp?: { tc: number; rcode: number; answers: string[] }; tcp?: { tc: number; rcode: number; answers: string[] } }> {
  const script = `const dns2 = require('${require.resolve('dns2')}');
    const q = async (Client) => { const r = await Client({ dns: '${server}', port: 53, retryOverTCP: false, timeout: 2000 })('${NAME}');
      return { tc: r.header.tc, rcode: r.header.rcode, answers: r.answers.map((a) => a.address) }; };
    (async () => console.log(JSON.stringify({ udp: await q(dns2.UDPClient), tcp: await q(dns2.TCPClient) })))().catch(() => console.log('{}'));`;
  const out = await execInSandbox(sandbox().layout, [process.execPath, '-e', script]);
  return JSON.parse(out.stdout.trim() || '{}');
}

describe.sequential('cluster DNS modes', () => {
  it('truncate: UDP answers carry TC and no records, TCP answers in full', async () => {
    const L = sandbox().layout;
    await setMode('truncate');
    try {
      const result = await waitFor(async () => {
        const r = await query(L.clusterDnsIp);
        return r.udp?.tc === 1 ? r : undefined;
      }, 'a truncated UDP answer');
      expect(result.udp).toMatchObject({ tc: 1, answers: [] });
      expect(result.tcp).toMatchObject({ tc: 0, answers: [L.kubernetesServiceIp] });
    } finally {
      await setMode('ok');
    }
  });

  it('servfail, wrong and back to ok, on the ClusterIP and on each DNS pod', async () => {
    const L = sandbox().layout;
    try {
      await setMode('servfail');
      for (const server of [L.clusterDnsIp, ...L.dnsPodIps]) {
        await waitFor(async () => (await query(server)).udp?.rcode === 2, `SERVFAIL from ${server}`);
      }
      await setMode('wrong');
      const wrong = await waitFor(async () => {
        const r = await query(L.clusterDnsIp);
        return r.udp?.answers[0] === L.lyingAnswer ? r : undefined;
      }, 'a wrong answer');
      expect(wrong.tcp?.answers).toEqual([L.lyingAnswer]);
    } finally {
      await setMode('ok');
    }
    const ok = await waitFor(async () => {
      const r = await query(L.clusterDnsIp);
      return r.udp?.answers[0] === L.kubernetesServiceIp ? r : undefined;
    }, 'DNS to recover');
    expect(ok.udp).toMatchObject({ rcode: 0, answers: [L.kubernetesServiceIp] });
  });
});
