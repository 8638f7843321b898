export { DistributedCronDashboardModule } from './dashboard.module.js';
export { DistributedCronDashboardConfigError, type DashboardRequest, type DistributedCronDashboardOptions } from './dashboard.options.js';
