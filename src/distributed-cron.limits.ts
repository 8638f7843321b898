/** The largest signed 32-bit integer: the run history's INTEGER columns hold no more. */
export const INT_MAX = 2 ** 31 - 1;

/**
 * The longest delay Node.js can give setTimeout/setInterval (2^31-1 ms, about 24.8 days). A longer
 * one is not refused by Node: it fires after 1 ms with only a TimeoutOverflowWarning, so every
 * duration that becomes a timer is checked against this at bootstrap.
 */
export const MAX_TIMER_MS = INT_MAX;
