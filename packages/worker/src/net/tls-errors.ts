/**
 * TLS handshake failures in the worker's own words, shared by the checks that verify a server
 * certificate (api, http).
 */

const TLS_CODES = new Set([
  'UNABLE_TO_VERIFY_LEAF_SIGNATURE',
  'UNABLE_TO_GET_ISSUER_CERT',
  'UNABLE_TO_GET_ISSUER_CERT_LOCALLY',
  'SELF_SIGNED_CERT_IN_CHAIN',
  'DEPTH_ZERO_SELF_SIGNED_CERT',
  'CERT_HAS_EXPIRED',
  'CERT_NOT_YET_VALID',
  'CERT_SIGNATURE_FAILURE',
  'CERT_UNTRUSTED',
  'CERT_REJECTED',
  'ERR_TLS_CERT_ALTNAME_INVALID',
]);

/**
 * What went wrong in a TLS handshake, in words that hold for the worker: OpenSSL's and Node's own
 * texts can carry advice for Node.js users (such as running it with --use-system-ca) that means
 * nothing to the reader of a node's status.
 */
export function tlsReason(code: string, err: Error): string {
  const known = TLS_REASONS[code];
  if (known) return `${known} (${code})`;
  // "write EPROTO 40...:error:0A00010B:SSL routines:tls_validate_record_header:wrong version number:../deps/openssl/...":
  // OpenSSL's reason alone, without the addresses and source paths around it.
  const openssl = /SSL routines:[^:]*:([^:]+)/.exec(err.message)?.[1]?.trim();
  if (openssl) {
    const words = OPENSSL_REASONS[openssl];
    return words ? `${words} (${code ? `${code}: ` : ''}${openssl})` : `${openssl}${code ? ` (${code})` : ''}`;
  }
  const text = err.message
    .split(';')
    .map((part) => part.trim())
    .filter((part) => part !== '' && !/Node\.js|--[a-z]/.test(part))
    .join('; ');
  return `${text || 'the handshake failed'}${code && !text.includes(code) ? ` (${code})` : ''}`;
}

const TLS_REASONS: Record<string, string> = {
  UNABLE_TO_VERIFY_LEAF_SIGNATURE: 'the certificate is not signed by a trusted CA',
  UNABLE_TO_GET_ISSUER_CERT: 'the issuer of the certificate is not a trusted CA',
  UNABLE_TO_GET_ISSUER_CERT_LOCALLY: 'the issuer of the certificate is not a trusted CA',
  SELF_SIGNED_CERT_IN_CHAIN: 'the certificate chain ends in an untrusted self-signed CA',
  DEPTH_ZERO_SELF_SIGNED_CERT: 'the certificate is self-signed and not trusted',
  CERT_HAS_EXPIRED: 'the certificate has expired',
  CERT_NOT_YET_VALID: 'the certificate is not valid yet (or this node\'s clock is behind)',
  CERT_SIGNATURE_FAILURE: 'the certificate signature is invalid',
  CERT_UNTRUSTED: 'the certificate is not trusted',
  CERT_REJECTED: 'the certificate was rejected',
  ERR_TLS_CERT_ALTNAME_INVALID: 'the certificate is not issued for this address',
};

const OPENSSL_REASONS: Record<string, string> = {
  'wrong version number': 'the server did not answer with TLS (is it plain HTTP on that port?)',
  'sslv3 alert handshake failure': 'the server refused the handshake (no common protocol version or cipher, or it wants a client certificate)',
  'tlsv1 alert internal error': 'the server broke off the handshake (often: it has no certificate for the name asked)',
  'tlsv1 unrecognized name': 'the server has no certificate for the name asked (SNI)',
};

export function isTlsError(code: string, err: Error): boolean {
  return TLS_CODES.has(code) || code.startsWith('ERR_SSL_') || code.startsWith('ERR_TLS_') || /certificate|SSL routines/i.test(err.message);
}
