import { afterAll, afterEach, beforeAll, describe, expect, it } from 'vitest';
import { aService } from '../testing/fake-api.js';
import { runCheck, startTestCluster, type TestCluster } from '../testing/harness.js';
import { closedPort, startBlackhole } from '../testing/blackhole.js';
import { tlsReason } from '../net/tls-errors.js';
import { aSlice } from '../testing/fake-api.js';

const SERVICE_PATH = '/api/v1/namespaces/default/services/kubernetes';

describe('api check against a local HTTPS API server', () => {
  const clusters: TestCluster[] = [];
  async function cluster(opts?: Parameters<typeof startTestCluster>[0]): Promise<TestCluster> {
    const c = await startTestCluster(opts);
    c.api.state.services.set('default/kubernetes', aService('default', 'kubernetes'));
    clusters.push(c);
    return c;
  }
  afterEach(async () => {
    await Promise.all(clusters.splice(0).map((c) => c.close()));
  });

  it('passes: TLS with the service-account CA, /version, and the authenticated read', async () => {
    const c = await cluster();
    const outcome = await runCheck('api', [], c.env);
    expect(outcome.error).toBeUndefined();
    expect(outcome.ok).toBe(true);
    expect(outcome.details).toMatchObject({
      server: `127.0.0.1:${c.api.port}`,
      tlsProtocol: expect.stringMatching(/^TLSv1\.[23]$/),
      version: 'v1.33.1',
      tlsMs: expect.any(Number),
      versionMs: expect.any(Number),
      authenticatedMs: expect.any(Number),
    });
    expect(c.api.state.requests).toEqual(['/version', SERVICE_PATH]);
  });

  it('fails with 401 when the token is rejected', async () => {
    const c = await cluster({ token: 'expired-token' });
    const outcome = await runCheck('api', [], c.env);
    expect(outcome.ok).toBe(false);
    expect(outcome.target).toBe(`${c.env.KUBERNETES_SERVICE_HOST}:${c.env.KUBERNETES_SERVICE_PORT}`);
    expect(outcome.error).toBe(
      'GET /version: 401 Unauthorized: Unauthorized (the service-account token was rejected: expired, revoked, or issued by another cluster)',
    );
  });

  it('fails with the 403 Status message when RBAC denies the read', async () => {
    const c = await cluster();
    c.api.state.forbidden.add(SERVICE_PATH);
    const outcome = await runCheck('api', [], c.env);
    expect(outcome.ok).toBe(false);
    expect(outcome.error).toMatch(
      /^GET \/api\/v1\/namespaces\/default\/services\/kubernetes: 403 Forbidden: services "kubernetes" is forbidden: User "system:serviceaccount:kube-system:kube-node-ready-worker" cannot get resource "services" in API group "" in the namespace "default"/,
    );
    expect(outcome.details).toMatchObject({ version: 'v1.33.1' });
  });

  it('fails naming the HTTP status when the API answers 503 or 429 (httpStatus: the API refused, the node reached it)', async () => {
    const c = await cluster();
    c.api.state.failing.set('/version', 503);
    const outcome = await runCheck('api', [], c.env);
    expect(outcome.ok).toBe(false);
    expect(outcome.httpStatus).toBe(503);
    expect(outcome.error).toMatch(/^GET \/version: 503 Service Unavailable/);
    c.api.state.failing.set('/version', 429);
    expect((await runCheck('api', [], c.env)).httpStatus).toBe(429);
  });

  it('every HTTP error answer carries its status (the controller judges which are the API\'s fault)', async () => {
    const c = await cluster({ token: 'expired-token' });
    expect((await runCheck('api', [], c.env)).httpStatus).toBe(401);
  });

  it('fails with a TLS error when the server certificate is not signed by the service-account CA', async () => {
    const c = await cluster({ saCa: 'wrong' });
    const outcome = await runCheck('api', [], c.env);
    expect(outcome.ok).toBe(false);
    expect(outcome.error).toMatch(/^TLS error: .*(unable to verify|self.signed|certificate)/i);
    expect(outcome.error).toContain('service-account CA');
    expect(c.api.state.requests).toEqual([]);
  });

  it('fails clearly outside a pod (no KUBERNETES_SERVICE_HOST)', async () => {
    const outcome = await runCheck('api', [], {});
    expect(outcome.error).toMatch(/^KUBERNETES_SERVICE_HOST is not set: the worker is not running in a pod/);
  });

  it('fails clearly when the service-account token is not mounted', async () => {
    const c = await cluster();
    const outcome = await runCheck('api', [], { ...c.env, KNR_SERVICEACCOUNT_DIR: '/nonexistent/sa' });
    expect(outcome.error).toMatch(/^cannot read the service-account token at \/nonexistent\/sa\/token: .*ENOENT/);
  });

  it('reports connection refused when nothing listens at the API address', async () => {
    const c = await cluster();
    const port = await closedPort();
    const outcome = await runCheck('api', [], { ...c.env, KUBERNETES_SERVICE_PORT: String(port.port) });
    expect(outcome.error).toBe(`connection refused by 127.0.0.1:${port.port}`);
    expect(outcome.httpStatus).toBeUndefined();
  });
});

describe('the API data is fetched once and shared by the checks', () => {
  let c: TestCluster;
  beforeAll(async () => {
    c = await startTestCluster();
    c.api.state.services.set('default/kubernetes', aService('default', 'kubernetes', { clusterIP: '127.0.0.1', port: c.api.port }));
  });
  afterAll(() => c.close());

  it('reads default/kubernetes a single time for api and tcp together', async () => {
    const outcome = await runCheck('api', ['--checks', 'api,tcp'], c.env);
    expect(outcome.ok).toBe(true);
    expect(c.api.state.requests.filter((r) => r === SERVICE_PATH)).toHaveLength(1);
  });
});

describe('TLS errors in words that hold for the worker', () => {
  it('leaves out the advice Node.js adds for its own users', () => {
    const err = Object.assign(new Error('unable to get local issuer certificate; if the root CA is installed locally, try running Node.js with --use-system-ca'), {
      code: 'UNABLE_TO_GET_ISSUER_CERT_LOCALLY',
    });
    expect(tlsReason('UNABLE_TO_GET_ISSUER_CERT_LOCALLY', err)).toBe('the issuer of the certificate is not a trusted CA (UNABLE_TO_GET_ISSUER_CERT_LOCALLY)');
    const unknown = Object.assign(new Error('something odd; try running Node.js with --use-openssl-ca'), { code: 'ERR_SSL_ODD' });
    expect(tlsReason('ERR_SSL_ODD', unknown)).toBe('something odd (ERR_SSL_ODD)');
  });

  it("keeps OpenSSL's reason alone, without addresses and source paths", () => {
    const err = Object.assign(
      new Error('write EPROTO 407D82DED37F0000:error:0A00010B:SSL routines:tls_validate_record_header:wrong version number:../deps/openssl/openssl/ssl/record/methods/tlsany_meth.c:77:'),
      { code: 'EPROTO' },
    );
    expect(tlsReason('EPROTO', err)).toBe('the server did not answer with TLS (is it plain HTTP on that port?) (EPROTO: wrong version number)');
    const other = Object.assign(new Error('C0:error:0A000412:SSL routines:ssl3_read_bytes:sslv3 alert bad certificate:../deps/openssl/x.c:1:SSL alert number 42'), { code: 'ERR_SSL_SSLV3_ALERT_BAD_CERTIFICATE' });
    expect(tlsReason('ERR_SSL_SSLV3_ALERT_BAD_CERTIFICATE', other)).toBe('sslv3 alert bad certificate (ERR_SSL_SSLV3_ALERT_BAD_CERTIFICATE)');
  });
});

describe('the kubernetes Service does not connect but the API server does (kube-proxy on this node)', () => {
  it('reads the API through api.endpoints, says "kube-proxy (Service routing) on this node" once in api, and the other checks still work', async () => {
    const c = await startTestCluster();
    const hole = await startBlackhole();
    try {
      const port = c.api.port;
      // KUBERNETES_SERVICE_HOST:PORT is a blackholed "ClusterIP"; the API server itself is the endpoint.
      c.api.state.services.set('default/kubernetes', aService('default', 'kubernetes', { clusterIP: '127.0.0.1', port: hole.target.port }));
      c.api.state.slices.set('default/kubernetes', [aSlice('kubernetes', [{ address: '127.0.0.1', ready: true }], { name: 'https', port })]);
      const env = { ...c.env, KUBERNETES_SERVICE_PORT: String(hole.target.port) };
      const argv = ['--checks', 'api,tcp,service', '--service', 'default/kubernetes', '--dns-service', 'default/kubernetes', '--api-endpoints', `127.0.0.1:${port}`, '--check-timeout', '4s'];
      const { runChecks, CHECKS } = await import('../run.js');
      const { configOf } = await import('../testing/harness.js');
      const { silentLogger } = await import('@kube-node-ready/core');
      const { outcomes } = await runChecks(configOf([...argv, '--dns-server', '127.0.0.1:1'], env), silentLogger(), CHECKS);
      const byName = Object.fromEntries(outcomes.map((o) => [o.name, o]));
      expect(byName.api?.error).toBe(
        `kube-proxy (Service routing) on this node: the kubernetes Service 127.0.0.1:${hole.target.port} does not connect (timeout: no connection within 2s (API route probe)) but the API server answers directly at 127.0.0.1:${port}`,
      );
      expect(byName.api?.details).toMatchObject({ version: 'v1.33.1', route: { via: 'endpoint', endpoint: `127.0.0.1:${port}` } });
      expect(byName.tcp?.error).toBe(
        `kubernetes Service 127.0.0.1:${hole.target.port}: timeout: no connection within 4s (tcp check timeout) (the API endpoints connect: kube-proxy (Service routing) on this node)`,
      );
      expect(byName.tcp?.details?.connections).toContainEqual(expect.objectContaining({ via: 'API endpoint', ok: true }));
      // The Service and its endpoints were read through the endpoint: no API timeout.
      expect(byName.service?.error ?? '').not.toMatch(/timeout/);
    } finally {
      hole.close();
      await c.close();
    }
  }, 15_000);

  it('without api.endpoints the API is read through the Service address as before', async () => {
    const c = await startTestCluster();
    try {
      c.api.state.services.set('default/kubernetes', aService('default', 'kubernetes'));
      const outcome = await runCheck('api', [], c.env);
      expect(outcome.ok).toBe(true);
      expect(outcome.details?.route).toBeUndefined();
    } finally {
      await c.close();
    }
  });
});
