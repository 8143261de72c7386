import { ApiException } from '@kubernetes/client-node';

/** HTTP status of a client-node ApiException, or undefined for other errors (network, timeout). */
export function statusCode(err: unknown): number | undefined {
  if (err instanceof ApiException) return err.code;
  if (typeof err === 'object' && err !== null && typeof (err as { code?: unknown }).code === 'number') {
    return (err as { code: number }).code;
  }
  return undefined;
}

export const isNotFound = (err: unknown): boolean => statusCode(err) === 404;
/**
 * The API server said no to the request itself (admission webhook or policy, quota, Pod Security,
 * validation, a missing namespace): a 4xx other than a conflict, throttling or authentication.
 */
export const isRefusal = (err: unknown): boolean => {
  const code = statusCode(err);
  return code !== undefined && code >= 400 && code < 500 && code !== 401 && code !== 409 && code !== 429;
};
export const isAlreadyExists = (err: unknown): boolean => statusCode(err) === 409 && reasonOf(err) === 'AlreadyExists';
/**
 * A write refused because the object changed: 409 Conflict, or 422 from a JSON patch that did not
 * apply (a failed `test`, or a `remove` of an index that is gone). The apiserver does not say which
 * operation failed: it answers 422 Invalid with a generic message and no causes (checked against
 * 1.36), unlike a validation error, which names the invalid fields.
 */
export const isConflict = (err: unknown): boolean => {
  const code = statusCode(err);
  if (code === 409) return reasonOf(err) !== 'AlreadyExists';
  if (code !== 422) return false;
  const s = status(err);
  if (s.reason === 'Invalid' && s.message === PATCH_NOT_APPLIED && (s.details?.causes ?? []).length === 0) return true;
  return /test/i.test(messageOf(err));
};

/** The apiserver's message for a 422 without details (apimachinery NewGenericServerResponse). */
const PATCH_NOT_APPLIED = 'the server rejected our request due to an error in our request';
/** Worth retrying: throttling, server errors, timeouts and network errors. */
export const isTransient = (err: unknown): boolean => {
  const code = statusCode(err);
  return code === undefined || code === 429 || code >= 500;
};

interface Status {
  reason?: string;
  message?: string;
  details?: { causes?: unknown[] };
}

/** The Status object in an ApiException body (client-node keeps it as text or parsed JSON). */
function status(err: unknown): Status {
  if (!(err instanceof ApiException)) return {};
  const body: unknown = err.body;
  if (typeof body === 'string') {
    try {
      return JSON.parse(body) as Status;
    } catch {
      return { message: body };
    }
  }
  return typeof body === 'object' && body !== null ? (body as Status) : {};
}

export function reasonOf(err: unknown): string | undefined {
  return status(err).reason;
}

/** A one-line description of an API error: "409 Conflict: <message>". */
export function messageOf(err: unknown): string {
  if (err instanceof ApiException) {
    const s = status(err);
    return `${err.code}${s.reason ? ` ${s.reason}` : ''}: ${s.message ?? err.message}`;
  }
  if (!(err instanceof Error)) return String(err);
  // undici reports "fetch failed" and keeps the reason (ECONNREFUSED, a TLS error...) in `cause`.
  const cause = (err as { cause?: unknown }).cause;
  if (cause instanceof Error) {
    const code = (cause as { code?: unknown }).code;
    return `${err.message}: ${cause.message}${typeof code === 'string' && !cause.message.includes(code) ? ` (${code})` : ''}`;
  }
  return err.message;
}
