import { describe, expect, it } from 'vitest';
import { commandHelp, COMMANDS, EXIT, mainHelp, parseCommandLine, UsageError } from '../../src/cli/cli.args.js';
import { scheduleTriggerExit } from '../../src/cli/schedule.commands.js';
import type { RunRecord, RunStatus } from '../../src/distributed-cron.interfaces.js';
import { kubernetesSchedule } from '../../src/cli/manifest.js';
import { table } from '../../src/cli/operator.commands.js';

describe('kubernetesSchedule', () => {
  it('keeps 5-field expressions and the macros Kubernetes knows', () => {
    expect(kubernetesSchedule('30 6 * * 1-5')).toEqual({ schedule: '30 6 * * 1-5' });
    expect(kubernetesSchedule('@daily')).toEqual({ schedule: '@daily' });
  });

  it('drops a seconds field that is always 0, and spells out the macros Kubernetes does not know', () => {
    expect(kubernetesSchedule('0 */15 * * * *')).toEqual({ schedule: '*/15 * * * *' });
    expect(kubernetesSchedule('00 0 3 * * *')).toEqual({ schedule: '0 3 * * *' });
    expect(kubernetesSchedule('@weekdays')).toEqual({ schedule: '0 0 * * 1-5' });
  });

  it('refuses a schedule that fires at other seconds, naming the seconds', () => {
    expect(kubernetesSchedule('*/10 * * * * *')).toEqual({ problem: "'*/10 * * * * *' fires at second */10 of a minute" });
    expect(kubernetesSchedule('30 0 3 * * *')).toHaveProperty('problem', "'30 0 3 * * *' fires at second 30 of a minute");
    expect(kubernetesSchedule('@secondly')).toHaveProperty('problem', "'@secondly' fires every second");
  });
});

describe('parseCommandLine', () => {
  it('reads a command, its target and its options', () => {
    const line = parseCommandLine(['run', 'daily-report', '--module', 'dist/app.module.js#AppModule', '--slot', '2026-11-30T06:00:00Z']);
    expect(line).toMatchObject({
      command: 'run',
      target: 'daily-report',
      modulePath: 'dist/app.module.js#AppModule',
      values: { slot: '2026-11-30T06:00:00Z' },
    });
    expect(
      parseCommandLine(['history', '-m', 'app.js', '--status', 'failed,dead', '--status', 'timed_out', '--timeout', '30s']),
    ).toMatchObject({
      target: undefined,
      timeoutMs: 30_000,
      values: { status: ['failed,dead', 'timed_out'] },
    });
  });

  it('refuses unknown commands and options, a missing job and a bad timeout', () => {
    expect(() => parseCommandLine(['runn', 'x'])).toThrow(/unknown command 'runn'; commands: run, trigger, replay/);
    expect(() => parseCommandLine(['jobs', '--jsn'])).toThrow(UsageError);
    expect(() => parseCommandLine(['run', '--module', 'a.js'])).toThrow('run takes one <job>, got 0');
    expect(() => parseCommandLine(['jobs', 'extra'])).toThrow("jobs takes no arguments, got 'extra'");
    expect(() => parseCommandLine(['jobs', '--timeout', '1500'])).toThrow(/--timeout/);
  });

  it('has --help for every command, naming its options', () => {
    expect(parseCommandLine(['pause', '--help']).help).toBe(true);
    for (const [name, spec] of Object.entries(COMMANDS)) {
      if (!spec.standalone) expect(commandHelp(name)).toMatch(/--module <file>\[#Export\][\s\S]*--timeout/);
    }
    // `prisma` boots no app: its own options, no --module.
    expect(commandHelp('prisma')).toMatch(/--schema <file\|dir>[\s\S]*--migrations <dir>[\s\S]*--check/);
    expect(commandHelp('prisma')).not.toContain('--module');
    expect(() => parseCommandLine(['prisma', '--module', 'x.js'])).toThrow(/Unknown option '--module'/);
    expect(commandHelp('run')).toMatch(/75 another process/);
  });
});

describe('schedules commands', () => {
  it('reads `schedules <command>` as one command, with its id and options', () => {
    expect(
      parseCommandLine([
        'schedules',
        'list',
        '-m',
        'app.js',
        '--handler',
        'tenant-report',
        '--search',
        'acme',
        '--paused',
        '--limit',
        '10',
      ]),
    ).toMatchObject({
      command: 'schedules list',
      target: undefined,
      values: { handler: 'tenant-report', search: 'acme', paused: true, limit: '10' },
    });
    expect(parseCommandLine(['schedules', 'pause', 'report:acme', '-m', 'app.js', '--note', 'asked'])).toMatchObject({
      command: 'schedules pause',
      target: 'report:acme',
      values: { note: 'asked' },
    });
    expect(parseCommandLine(['history', '-m', 'app.js', '--schedule', 'report:acme']).values).toMatchObject({ schedule: 'report:acme' });
  });

  it('refuses an unknown schedules command, a missing id, an option of another command', () => {
    expect(() => parseCommandLine(['schedules', 'delete', 'x'])).toThrow(
      "unknown command 'schedules delete'; schedules commands: list, get, pause, resume, trigger",
    );
    expect(() => parseCommandLine(['schedules', 'get', '-m', 'a.js'])).toThrow('schedules get takes one <id>, got 0');
    expect(() => parseCommandLine(['schedules', 'list', 'extra'])).toThrow("schedules list takes no arguments, got 'extra'");
    expect(() => parseCommandLine(['schedules', 'resume', 'x', '--note', 'n'])).toThrow(/Unknown option '--note'/);
    expect(() => parseCommandLine(['schedule', 'list'])).toThrow(/unknown command 'schedule'; commands: run, .*schedules/);
  });

  it('has help for the group and each command', () => {
    expect(parseCommandLine(['schedules'])).toMatchObject({ command: 'schedules', help: true });
    expect(parseCommandLine(['schedules', '--help'])).toMatchObject({ command: 'schedules', help: true });
    expect(parseCommandLine(['schedules', 'list', '--help'])).toMatchObject({ command: 'schedules list', help: true });
    expect(commandHelp('schedules')).toMatch(/list +the schedules created at run time[\s\S]*trigger +trigger the schedule's slot now/);
    expect(commandHelp('schedules list')).toMatch(/--handler <name>[\s\S]*--enabled \| --paused[\s\S]*--cursor <c>/);
    expect(mainHelp()).toContain('schedules pause');
  });

  it("a schedule's trigger exits as `trigger` does: by what it did and how its run ended", () => {
    const run = (status: RunStatus) => ({ status }) as RunRecord;
    expect(scheduleTriggerExit('ran', run('completed'))).toBe(EXIT.ok);
    expect(scheduleTriggerExit('ran', run('failed'))).toBe(EXIT.failed);
    expect(scheduleTriggerExit('ran', run('timed_out'))).toBe(EXIT.failed);
    expect(scheduleTriggerExit('already_done', undefined)).toBe(EXIT.ok);
    expect(scheduleTriggerExit('paused', undefined)).toBe(EXIT.ok);
    expect(scheduleTriggerExit('lost', undefined)).toBe(EXIT.tempfail);
    expect(scheduleTriggerExit('skipped_overlap', undefined)).toBe(EXIT.tempfail);
    expect(scheduleTriggerExit('unavailable', undefined)).toBe(EXIT.unavailable);
  });
});

describe('table', () => {
  it('aligns columns and says when there is nothing', () => {
    expect(
      table(
        ['JOB', 'STATUS'],
        [
          ['a', 'completed'],
          ['long-name', 'failed'],
        ],
      ),
    ).toBe('JOB        STATUS\na          completed\nlong-name  failed');
    expect(table(['JOB'], [])).toBe('JOB\n(none)');
  });
});
