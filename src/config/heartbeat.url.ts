import type { HeartbeatOptions, ModuleHeartbeatOptions } from '../distributed-cron.interfaces.js';

/**
 * The ping URL of a job, or undefined; the problem goes to `fail(option, problem)`. A job's own
 * `heartbeat` wins over the module's template; `heartbeat: false` opts a job out of it.
 */
export function resolveHeartbeatUrl(
  jobName: string,
  own: HeartbeatOptions | false | undefined,
  module: ModuleHeartbeatOptions | undefined,
  fail: (option: string, problem: string) => never,
): string | undefined {
  if (own === false) return undefined;
  let url: unknown;
  let where = '';
  if (own !== undefined) {
    if (typeof own !== 'object' || own === null) return fail('heartbeat', 'must be { url } or false');
    url = own.url;
  } else if (module?.url !== undefined) {
    url = typeof module.url === 'string' ? module.url.replaceAll('{job}', encodeURIComponent(jobName)) : module.url;
    where = " (from the module's `heartbeat.url`)";
  } else {
    return undefined;
  }
  if (typeof url !== 'string') return fail('heartbeat.url', `must be an http(s) URL string, got ${typeof url}${where}`);
  let parsed: URL;
  try {
    parsed = new URL(url);
  } catch {
    return fail('heartbeat.url', `is not a valid URL: ${JSON.stringify(url)}${where}`);
  }
  if (parsed.protocol !== 'http:' && parsed.protocol !== 'https:') {
    return fail('heartbeat.url', `must use http or https, got ${parsed.protocol}${where}`);
  }
  if (parsed.username || parsed.password) return fail('heartbeat.url', `must not carry credentials${where}`);
  return parsed.toString();
}
