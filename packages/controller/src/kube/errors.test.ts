import { ApiException } from '@kubernetes/client-node';
import { describe, expect, it } from 'vitest';
import { isAlreadyExists, isConflict, isNotFound, isRefusal, isTransient, messageOf } from './errors.js';

const api = (code: number, body: object | string) => new ApiException(code, 'HTTP error', typeof body === 'string' ? body : JSON.stringify(body), {});

describe('API error helpers', () => {
  it('tells a refusal of the request itself (admission, quota, Pod Security) from conflicts, throttling and failures', () => {
    expect(isRefusal(api(403, { reason: 'Forbidden', message: 'pods "w" is forbidden: exceeded quota: pods' }))).toBe(true);
    expect(isRefusal(api(400, { reason: 'BadRequest', message: 'admission webhook "deny.example.com" denied the request' }))).toBe(true);
    expect(isRefusal(api(422, { reason: 'Invalid', message: 'ValidatingAdmissionPolicy denied request' }))).toBe(true);
    expect(isRefusal(api(404, { reason: 'NotFound', message: 'namespaces "x" not found' }))).toBe(true);
    for (const code of [401, 409, 429, 500, 503]) expect(isRefusal(api(code, { message: 'x' })), String(code)).toBe(false);
    expect(isRefusal(new Error('fetch failed'))).toBe(false);
  });

  it('tells conflicts (409, or 422 from a failed JSON-patch test) from AlreadyExists', () => {
    expect(isConflict(api(409, { reason: 'Conflict', message: 'the object has been modified' }))).toBe(true);
    expect(isConflict(api(422, { reason: 'Invalid', message: 'the server rejected our request due to an error in our request: testing value /metadata/uid failed: test failed' }))).toBe(true);
    expect(isConflict(api(422, { reason: 'Invalid', message: 'spec.taints[0].effect: Unsupported value' }))).toBe(false);
    // What kube-apiserver 1.36 answers to a JSON patch whose `test` fails (or whose `remove` finds no
    // element): no word of which operation, no causes. A validation error names its fields.
    const notApplied = {
      kind: 'Status',
      apiVersion: 'v1',
      metadata: {},
      status: 'Failure',
      message: 'the server rejected our request due to an error in our request',
      reason: 'Invalid',
      details: {},
      code: 422,
    };
    expect(isConflict(api(422, JSON.stringify(notApplied) + '\n'))).toBe(true);
    const invalid = {
      ...notApplied,
      message: 'Node "n" is invalid: metadata.taints[1].effect: Unsupported value: "Bogus"',
      details: { name: 'n', kind: 'Node', causes: [{ reason: 'FieldValueNotSupported', field: 'metadata.taints[1].effect' }] },
    };
    expect(isConflict(api(422, invalid))).toBe(false);
    expect(isConflict(api(422, { ...notApplied, details: { causes: [{ reason: 'FieldValueInvalid', field: 'metadata.annotations' }] } }))).toBe(false);
    expect(isConflict(api(409, { reason: 'AlreadyExists' }))).toBe(false);
    expect(isAlreadyExists(api(409, { reason: 'AlreadyExists' }))).toBe(true);
    expect(isNotFound(api(404, {}))).toBe(true);
  });

  it('retries only throttling, server and network errors', () => {
    expect(isTransient(api(429, {}))).toBe(true);
    expect(isTransient(api(503, {}))).toBe(true);
    expect(isTransient(new Error('fetch failed'))).toBe(true);
    expect(isTransient(api(403, {}))).toBe(false);
    expect(isTransient(api(409, {}))).toBe(false);
  });

  it('describes errors in one line, with the network cause', () => {
    expect(messageOf(api(403, { reason: 'Forbidden', message: 'nodes is forbidden' }))).toBe('403 Forbidden: nodes is forbidden');
    expect(messageOf(api(500, 'plain text body'))).toBe('500: plain text body');
    const cause = Object.assign(new Error('connect ECONNREFUSED 127.0.0.1:1'), { code: 'ECONNREFUSED' });
    expect(messageOf(new Error('fetch failed', { cause }))).toBe('fetch failed: connect ECONNREFUSED 127.0.0.1:1');
  });
});
