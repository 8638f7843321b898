import type { JobConfig } from '../config/job.config.js';
import { PROGRAM, UsageError } from './cli.args.js';
import { queueModeRefusal } from './slot.commands.js';

/** The container of each CronJob's pod; its exit codes drive the pod failure policy. */
export const CONTAINER_NAME = 'job';
/** Kubernetes names a CronJob's Jobs `<name>-<minutes>`: the CronJob's own name may be 52 characters. */
const MAX_NAME = 52;
/** The CronJob controller looks every 10 s: a shorter starting deadline may skip slots. */
const MIN_DEADLINE_S = 10;
const NONE_DEADLINE_MAX_S = 60;

// Kubernetes (robfig/cron) knows @yearly, @annually, @monthly, @weekly, @daily, @midnight and @hourly.
const MACROS: Readonly<Record<string, string>> = {
  '@minutely': '* * * * *',
  '@weekdays': '0 0 * * 1-5',
  '@weekends': '0 0 * * 0,6',
};

export interface ManifestOptions {
  modulePath: string;
  image: string | undefined;
  namespace: string | undefined;
}

/** The expression as a Kubernetes CronJob schedule (5 fields, no seconds), or why it cannot be one. */
export function kubernetesSchedule(expression: string): { schedule: string } | { problem: string } {
  const trimmed = expression.trim();
  if (trimmed.startsWith('@')) {
    if (trimmed === '@secondly') return { problem: `'${expression}' fires every second` };
    return { schedule: MACROS[trimmed] ?? trimmed };
  }
  const fields = trimmed.split(/\s+/);
  if (fields.length === 5) return { schedule: fields.join(' ') };
  if (/^0+$/.test(fields[0]!)) return { schedule: fields.slice(1).join(' ') };
  return { problem: `'${expression}' fires at second ${fields[0]} of a minute` };
}

/** `daily-report` → `daily-report`; `Reports.generate` → `reports-generate`: a DNS-1123 label. */
function kubernetesName(jobName: string, taken: Set<string>): string {
  const base =
    jobName
      .toLowerCase()
      .replace(/[^a-z0-9-]+/g, '-')
      .replace(/^-+|-+$/g, '')
      .slice(0, MAX_NAME - 3)
      .replace(/-+$/, '') || 'job';
  let name = base;
  for (let n = 2; taken.has(name); n++) name = `${base}-${n}`;
  taken.add(name);
  return name;
}

/** How late the controller may still start a slot: the job's catch-up window, as the in-app catch-up bounds it. */
function startingDeadlineSeconds(job: JobConfig): number {
  if (job.catchUp.policy === 'none') {
    return Math.max(MIN_DEADLINE_S, Math.min(NONE_DEADLINE_MAX_S, Math.floor(job.schedule.minPeriodMs / 2_000)));
  }
  return Math.max(MIN_DEADLINE_S, Math.floor(job.catchUp.windowMs / 1_000));
}

const q = (text: string): string => JSON.stringify(text);

function cronJob(job: JobConfig, schedule: string, name: string, options: ManifestOptions): string {
  const deadline = startingDeadlineSeconds(job);
  const comments = [
    `# job '${job.name}' (${job.source}): '${job.expression}' in ${job.timeZone}`,
    job.catchUp.policy === 'none'
      ? `# catchUp 'none': a slot the controller cannot start within ${deadline} s is skipped`
      : `# catchUp '${job.catchUp.policy}': a missed slot still starts within ${deadline} s (the catch-up window)` +
        (job.catchUp.policy === 'all' ? '; Kubernetes starts only the latest missed slot' : ''),
    '# exit 75: another pod holds this slot; the pod is replaced (not counted) until the slot has ended',
    ...(job.disabled ? ['# the job is disabled (`disabled`): the CronJob is suspended'] : []),
  ];
  const command = ['npx', '--no-install', PROGRAM, 'run', job.name, '--module', options.modulePath];
  return `${comments.join('\n')}
apiVersion: batch/v1
kind: CronJob
metadata:
  name: ${name}
  namespace: ${q(options.namespace ?? '<namespace>')}
  labels:
    app.kubernetes.io/managed-by: ${PROGRAM}
spec:
  schedule: ${q(schedule)}
  timeZone: ${q(job.timeZone)}
  concurrencyPolicy: Forbid
  startingDeadlineSeconds: ${deadline}
  suspend: ${job.disabled}
  jobTemplate:
    spec:
      # Retries are the job's own \`retry\` option, run by the pod that ran the slot.
      backoffLimit: 0
      podFailurePolicy:
        rules:
          - action: Ignore
            onExitCodes:
              containerName: ${CONTAINER_NAME}
              operator: In
              values: [75]
      template:
        spec:
          restartPolicy: Never
          containers:
            - name: ${CONTAINER_NAME}
              image: ${q(options.image ?? '<image>')}
              command: [${command.map(q).join(', ')}]
`;
}

/**
 * One CronJob per job (or for `only`), as YAML documents. A job whose schedule needs seconds
 * cannot be a CronJob: it is left out with a comment saying so, or refused when asked for by name.
 */
export function manifest(jobs: readonly JobConfig[], options: ManifestOptions, only?: string): { yaml: string; skipped: string[] } {
  const chosen = only === undefined ? jobs : jobs.filter((job) => job.name === only);
  if (only !== undefined && chosen.length === 0) {
    throw new UsageError(`--job: no job named '${only}' (known: ${jobs.map((job) => job.name).join(', ') || 'none'})`);
  }
  const taken = new Set<string>();
  const documents: string[] = [];
  const skipped: string[] = [];
  for (const job of chosen) {
    const converted = kubernetesSchedule(job.expression);
    if ('problem' in converted || job.queue !== undefined) {
      const why =
        'problem' in converted
          ? `job '${job.name}' cannot be a Kubernetes CronJob: ${converted.problem}, and a CronJob schedule has no seconds field (run it in-app, or use a 5-field expression)`
          : queueModeRefusal(job);
      if (only !== undefined) throw new UsageError(why);
      skipped.push(why);
      continue;
    }
    documents.push(cronJob(job, converted.schedule, kubernetesName(job.name, taken), options));
  }
  const header = skipped.map((why) => `# ${why}\n`).join('');
  return { yaml: header + documents.join('---\n'), skipped };
}
