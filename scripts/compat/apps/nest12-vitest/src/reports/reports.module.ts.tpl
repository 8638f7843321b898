import { Module } from '@nestjs/common';
import { InfraModule } from '../infra/infra.module.js';
import { ReportsService } from './reports.service.js';

@Module({
  imports: [InfraModule],
  providers: [ReportsService],
})
export class ReportsModule {}
