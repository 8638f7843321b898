import { Injectable } from '@nestjs/common';
import { DistributedCronExplorer } from '../nest/distributed-cron.explorer.js';

/**
 * Mounts the `@DistributedCron` methods as the real explorer does (same validation, same
 * executors), but starts no timer and no sweep: slots run when a test says so.
 */
@Injectable()
export class TestingExplorer extends DistributedCronExplorer {
  private mounted = false;

  /** Idempotent, so the controller can mount jobs of a module that was compiled but not initialised. */
  override onModuleInit(): void {
    if (this.mounted) return;
    this.mounted = true;
    super.onModuleInit();
  }

  mount(): void {
    this.onModuleInit();
  }

  override async onApplicationBootstrap(): Promise<void> {}
}
