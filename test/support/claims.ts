import type { ClaimRequest } from '../../src/leasing/lease.store.js';

/** A claim of slot `executionId` of `jobName` (the slot at 0, its slot window 5 s past the lease). */
export function claimRequest(
  jobName: string,
  executionId: string,
  overlap: ClaimRequest['overlap'] = 'skip',
  leaseMs = 10_000,
): ClaimRequest {
  return {
    jobName,
    executionId,
    overlap,
    leaseMs,
    slotMs: leaseMs + 5_000,
    queued: { executionId, scheduledAt: 0, businessDate: '2026-01-01' },
  };
}
