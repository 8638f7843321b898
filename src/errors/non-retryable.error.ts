import { answerInstanceofAcrossCopies } from './error.brand.js';
/**
 * Throw from a handler when retrying cannot help (a 403, a validation error): the execution ends
 * `dead` at once, waiting for a person, instead of using up its retries.
 * @example throw new NonRetryableError('billing API refused the token (403)', { cause: error })
 */
export class NonRetryableError extends Error {
  static {
    answerInstanceofAcrossCopies(this, 'NonRetryableError');
  }

  constructor(message: string, options?: { cause?: unknown }) {
    super(message, options);
    this.name = 'NonRetryableError';
  }
}

/** True for a NonRetryableError, also one from another copy of this library (checked by name). */
export function isNonRetryable(error: unknown): boolean {
  return error instanceof NonRetryableError || (error instanceof Error && error.name === 'NonRetryableError');
}
