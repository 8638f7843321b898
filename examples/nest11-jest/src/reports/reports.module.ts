import { Module } from '@nestjs/common';
import { InfraModule } from '../infra/infra.module';
import { ReportsService } from './reports.service';

@Module({
  imports: [InfraModule],
  providers: [ReportsService],
})
export class ReportsModule {}
