import type { LeaderElector } from '../leasing/leader.elector.js';

/**
 * This instance's part in the leader election (`mode: 'leader'`): empty until the orchestrator
 * starts firing slots, and always in the default mode. The service reads it (`isLeader`, `leader`).
 */
export interface LeadershipSeat {
  elector: LeaderElector | undefined;
}

/** Injection token of this module instance's `LeadershipSeat`. */
export const DISTRIBUTED_CRON_LEADERSHIP = 'nestjs-distributed-cron:leadership';
