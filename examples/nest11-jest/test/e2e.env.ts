// Loaded before each e2e file (jest-e2e.json `setupFiles`): the order-stats job runs every
// second here, so that the test sees several real slots in a few seconds.
process.env.ORDER_STATS_CRON = '* * * * * *';
