import { mkdirSync, mkdtempSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { parseSummary, type WorkerSummary } from '@kube-node-ready/core';
import { afterAll, afterEach, beforeAll, describe, expect, it } from 'vitest';
import { readPodLink } from '../net/pod-link.js';
import { bundleNetnsMain, createPair, exited, readyLine, type NetnsPair, type PairOptions } from '../testing/netns.js';

/**
 * The mtu check against a real packet path: the worker in one network namespace ("pod"), a DNS
 * server that fills answers to the EDNS buffer like CoreDNS in another ("node"), joined by a veth
 * pair whose MTUs and tc rules make large packets vanish in one direction while small ones pass.
 */
const LARGE = 'large.kube-node-ready.svc.cluster.local';
const LARGE_RECORDS = 100; // about 1.6 kB of answer

let bundle: Awaited<ReturnType<typeof bundleNetnsMain>>;
const dir = mkdtempSync(join(tmpdir(), 'knr-w16-mtu-'));
let pair: NetnsPair | undefined;
beforeAll(async () => {
  bundle = await bundleNetnsMain();
}, 60_000);
afterAll(() => {
  bundle.remove();
  rmSync(dir, { recursive: true, force: true });
});
afterEach(() => {
  pair?.cleanup();
  pair = undefined;
});

async function verify(
  options: PairOptions,
  extra: string[] = [],
  spawnOptions: { hostSysfs?: boolean } = {},
): Promise<{ summary: WorkerSummary; logs: Array<Record<string, unknown>> }> {
  pair = createPair(bundle.file, options);
  await readyLine(pair.spawnIn(pair.node, ['dns', pair.nodeIp, '53', LARGE, String(LARGE_RECORDS)]));
  const terminationLog = join(dir, `termination-${pair.pod}`);
  writeFileSync(terminationLog, '');
  const run = await exited(
    // 5 s: a probe over TCP slowed by a loaded machine must not read as lost packets.
    pair.spawnIn(pair.pod, ['worker', '--checks', 'dns,mtu', '--dns-server', pair.nodeIp, '--large-dns-name', LARGE, '--check-timeout', '5s', '--termination-log', terminationLog, ...extra], spawnOptions),
  );
  const parsed = parseSummary(readFileSync(terminationLog, 'utf8'));
  if (!parsed.ok) throw new Error(`no summary (exit ${String(run.code)}): ${parsed.reason}\n${run.stderr}\n${run.stdout}`);
  const logs = run.stdout.split('\n').filter(Boolean).map((l) => JSON.parse(l) as Record<string, unknown>);
  return { summary: parsed.summary, logs };
}

const check = (summary: WorkerSummary, name: string) => summary.checks.find((c) => c.name === name);
const details = (logs: Array<Record<string, unknown>>) => logs.find((l) => l.check === 'mtu')?.details as Record<string, unknown>;

describe('mtu check in network namespaces', () => {
  it('passes on a path that carries full-size packets both ways, and says which sizes got through', async () => {
    const { summary, logs } = await verify({ podMtu: 1500, nodeMtu: 1500 });
    expect(check(summary, 'mtu')).toMatchObject({ ok: true });
    const d = details(logs);
    // The MTU is read from the pod's default-route interface.
    expect(d).toMatchObject({ mtu: 1500, mtuFrom: '/sys/class/net/eth0/mtu' });
    const probes = (d.targets as Array<{ probes: Array<Record<string, unknown>> }>)[0]?.probes ?? [];
    expect(probes.map((p) => [p.probe, p.ok])).toEqual([
      ['a small query', true],
      ['a 1472-byte query (1500-byte packets, the pod MTU)', true],
      ['a query for the large answer over udp (1232-byte EDNS buffer)', true],
      ['a query for the large answer over udp (1472-byte EDNS buffer)', true],
      ['a query for the large answer over tcp', true],
    ]);
    expect(probes[1]).toMatchObject({ querySize: 1472 });
    expect(probes[2]?.answerSize).toBeGreaterThan(1200);
    expect(probes[2]?.answerSize).toBeLessThanOrEqual(1232);
    expect(probes[3]?.answerSize).toBeGreaterThan(1440);
    expect(probes[4]?.answerSize).toBeGreaterThan(1500);
  }, 30_000);

  it('fails when large packets from the pod are dropped (the node side carries only 1400 bytes), while small DNS passes', async () => {
    const { summary } = await verify({ podMtu: 1500, nodeMtu: 1400 });
    expect(check(summary, 'dns')).toMatchObject({ ok: true });
    expect(check(summary, 'mtu')?.ok).toBe(false);
    expect(check(summary, 'mtu')?.error).toMatch(
      /^nameserver 10\.216\.16\.2:53: 1500-byte packets from this pod are lost \(an overlay MTU larger than the path carries, or a path-MTU blackhole\): no reply to a 1472-byte query \(1500-byte packets, the pod MTU\) \(timeout: no answer over udp within 5s \(mtu check timeout\)\); replies to: a small query \(\d+ bytes\), a query for the large answer over udp \(1232-byte EDNS buffer\) \(\d+ bytes\)/,
    );
  }, 30_000);

  it('fails when large packets to the pod are dropped (node -> pod over 1100 bytes), naming the sizes that did and did not arrive', async () => {
    const { summary } = await verify({ podMtu: 1500, nodeMtu: 1500, nodeToPodMaxPacket: 1100 });
    expect(check(summary, 'dns')).toMatchObject({ ok: true });
    const error = check(summary, 'mtu')?.error ?? '';
    expect(error).toMatch(/^nameserver 10\.216\.16\.2:53: 1500-byte packets to this pod are lost/);
    expect(error).toContain(
      'no reply to a query for the large answer over udp (1232-byte EDNS buffer), a query for the large answer over udp (1472-byte EDNS buffer), a query for the large answer over tcp (timeout: no answer over udp within 5s (mtu check timeout); timeout: no answer over tcp within 5s (mtu check timeout))',
    );
    expect(error).toMatch(/replies to: a small query \(\d+ bytes\), a 1472-byte query \(1500-byte packets, the pod MTU\) \(1472 bytes\)$/);
  }, 30_000);

  it('fails saying that large DNS answers are lost when only large UDP answers to the pod are dropped while small ones and TCP get through', async () => {
    const { summary } = await verify({ podMtu: 1500, nodeMtu: 1500, podDropsUdpOver: 1100 });
    expect(check(summary, 'dns')).toMatchObject({ ok: true });
    const error = check(summary, 'mtu')?.error ?? '';
    expect(error).toMatch(
      /^nameserver 10\.216\.16\.2:53: large DNS answers \(1232 bytes over UDP\) are lost between the DNS server and this pod while small ones, and the same answer over TCP, arrive \(likely a path MTU smaller than the pod MTU of 1500 bytes, as when an overlay MTU is larger than the underlay carries: TCP adapts its segments to the path, UDP answers do not\): /,
    );
    expect(error).toContain('no reply to a query for the large answer over udp (1232-byte EDNS buffer), a query for the large answer over udp (1472-byte EDNS buffer) (timeout: no answer over udp within 5s (mtu check timeout))');
    // What did arrive, with its size: the TCP answer carries every record.
    expect(error).toMatch(/replies to: a small query \(\d+ bytes\), a 1472-byte query \(1500-byte packets, the pod MTU\) \(1472 bytes\), a query for the large answer over tcp \((\d+) bytes\)$/);
    expect(Number(/over tcp \((\d+) bytes\)$/.exec(error)?.[1])).toBeGreaterThan(1500);
  }, 30_000);

  it('when /sys belongs to another network namespace, tests 1500-byte packets and warns that the pod MTU was not read', async () => {
    const { summary, logs } = await verify({ podMtu: 1500, nodeMtu: 1500 }, [], { hostSysfs: true });
    expect(check(summary, 'mtu')).toMatchObject({ ok: true });
    expect(details(logs)).toMatchObject({ mtu: 1500, mtuFrom: 'fallback (the pod MTU could not be read)' });
    expect(summary.warnings).toEqual([expect.stringMatching(/^mtu: \/sys\/class\/net shows another network namespace \(eth0 is interface \d+ here, \d+ there\): cannot read the pod MTU \(set mtu\.mtu\); tested with 1500-byte packets$/)]);
  }, 30_000);

  it('with mtu.mtu set, pads to that size instead of the interface MTU', async () => {
    const { logs } = await verify({ podMtu: 1500, nodeMtu: 1500 }, ['--mtu', '1280']);
    expect(details(logs)).toMatchObject({ mtu: 1280, mtuFrom: 'mtu.mtu' });
  }, 30_000);
});

describe('readPodLink', () => {
  const fixture = mkdtempSync(join(tmpdir(), 'knr-w16-link-'));
  afterAll(() => rmSync(fixture, { recursive: true, force: true }));
  const write = (name: string, text: string) => {
    const path = join(fixture, name);
    writeFileSync(path, text);
    return path;
  };

  it('reads the MTU of the interface of the lowest-metric default route', () => {
    const procNetRoute = write(
      'route',
      'Iface\tDestination\tGateway\tFlags\tRefCnt\tUse\tMetric\tMask\tMTU\tWindow\tIRTT\n' +
        'eth1\t00000000\t0100A8C0\t0003\t0\t0\t200\t00000000\t0\t0\t0\n' +
        'eth0\t00000000\t0101A8C0\t0003\t0\t0\t100\t00000000\t0\t0\t0\n' +
        'eth0\t0001A8C0\t00000000\t0001\t0\t0\t0\t00FFFFFF\t0\t0\t0\n',
    );
    const sys = join(fixture, 'sys');
    for (const [name, mtu] of [['eth0', '8951'], ['eth1', '1500']]) {
      mkdirSync(join(sys, name as string), { recursive: true });
      writeFileSync(join(sys, name as string, 'mtu'), `${mtu}\n`);
    }
    const procNetIgmp = write('igmp', 'Idx\tDevice    : Count Querier\tGroup    Users Timer\tReporter\n1\tlo        :     1      V3\n\t\t\t\t010000E0     1 0:00000000\t\t0\n3\teth0      :     1      V3\n');
    writeFileSync(join(sys, 'eth0', 'ifindex'), '3\n');
    expect(readPodLink({ procNetRoute, procNetIpv6Route: '/nonexistent', sysClassNet: sys, procNetIgmp })).toEqual({ interface: 'eth0', mtu: 8951 });
    // sysfs mounted in another network namespace (nsenter --net keeps the host's /sys): its eth0 is another interface.
    writeFileSync(join(sys, 'eth0', 'ifindex'), '4\n');
    expect(readPodLink({ procNetRoute, procNetIpv6Route: '/nonexistent', sysClassNet: sys, procNetIgmp })).toEqual({
      error: `${sys} shows another network namespace (eth0 is interface 3 here, 4 there): cannot read the pod MTU (set mtu.mtu)`,
    });
  });

  it('says how to set it when there is no default route', () => {
    const procNetRoute = write('empty-route', 'Iface\tDestination\tGateway\tFlags\tRefCnt\tUse\tMetric\tMask\tMTU\tWindow\tIRTT\n');
    expect(readPodLink({ procNetRoute, procNetIpv6Route: '/nonexistent', sysClassNet: fixture, procNetIgmp: '/nonexistent' })).toEqual({
      error: `no default route in ${procNetRoute} or /nonexistent: cannot tell the pod's interface (set mtu.mtu)`,
    });
  });
});

