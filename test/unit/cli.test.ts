import { describe, expect, it } from 'vitest';
import { commandHelp, COMMANDS, parseCommandLine, UsageError } from '../../src/cli/cli.args.js';
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
