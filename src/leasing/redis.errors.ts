/* The errors of a Redis call, and which of them a later call may not meet. */

/** Thrown when Redis does not answer within the configured time. */
export class LeaseStoreTimeoutError extends Error {
  constructor(operation: string, timeoutMs: number) {
    super(`Redis did not answer ${operation} within ${timeoutMs} ms`);
    this.name = 'LeaseStoreTimeoutError';
  }
}

/** Thrown without sending anything when the client is closed or does not connect in time. */
export class LeaseStoreUnavailableError extends Error {
  constructor(status: string) {
    super(`Redis connection is ${status}`);
    this.name = 'LeaseStoreUnavailableError';
  }
}

/** Redis replies that mean "not now" (loading, a replica during a failover), not "never". */
const TRANSIENT_REPLY = /^(LOADING|READONLY|MASTERDOWN|TRYAGAIN|CLUSTERDOWN)\b|Connection is closed|Stream isn't writeable/;
const TRANSIENT_CODE = /^(ECONNREFUSED|ECONNRESET|ECONNABORTED|EPIPE|ETIMEDOUT|EHOSTUNREACH|ENETUNREACH|EAI_AGAIN)$/;

/**
 * The same call may succeed once Redis is reachable again: a timeout, a lost or refused
 * connection, or a server not ready to write yet. A script error is none of these.
 */
export function isTransient(error: unknown): boolean {
  if (error instanceof LeaseStoreTimeoutError || error instanceof LeaseStoreUnavailableError) return true;
  const { name, code, message } = (error ?? {}) as { name?: unknown; code?: unknown; message?: unknown };
  if (name === 'MaxRetriesPerRequestError') return true;
  if (typeof code === 'string' && TRANSIENT_CODE.test(code)) return true;
  return TRANSIENT_REPLY.test(String(message));
}
