/**
 * The dashboard's defences: the access decision of its options (deny by default), a CSRF check on
 * every action (double-submit: a random cookie that a cross-site page can neither read nor set,
 * echoed in a header it cannot send), a per-client rate limit on actions, and response headers
 * that keep the page from running any script but its own.
 */
import { ForbiddenException, HttpException, HttpStatus, Inject, Injectable, type CanActivate, type ExecutionContext } from '@nestjs/common';
import { randomBytes, timingSafeEqual } from 'node:crypto';
import { DASHBOARD_OPTIONS, type DashboardRequest, type ResolvedDashboardOptions } from './dashboard.options.js';

export const CSRF_COOKIE = 'dcron_csrf';
export const CSRF_HEADER = 'x-csrf-token';
const TOKEN_PATTERN = /^[A-Za-z0-9_-]{32,64}$/;

/** Content-Security-Policy: only the dashboard's own files run; nothing is framed or posted elsewhere. */
export const SECURITY_HEADERS: Readonly<Record<string, string>> = {
  'content-security-policy':
    "default-src 'none'; script-src 'self'; style-src 'self'; img-src 'self' data:; connect-src 'self'; " +
    "base-uri 'none'; form-action 'none'; frame-ancestors 'none'",
  'x-content-type-options': 'nosniff',
  'referrer-policy': 'no-referrer',
  'x-frame-options': 'DENY',
  'cache-control': 'no-store',
};

/** Runs the `canActivate` function of the options (a guard class is applied beside this one). */
@Injectable()
export class DashboardAccessGuard implements CanActivate {
  constructor(@Inject(DASHBOARD_OPTIONS) private readonly options: ResolvedDashboardOptions) {}

  async canActivate(context: ExecutionContext): Promise<boolean> {
    const decide = this.options.canActivate;
    if (decide === undefined) return true;
    const request = context.switchToHttp().getRequest<DashboardRequest>();
    if ((await decide(request)) !== true) throw new ForbiddenException('Access to the cron dashboard is denied');
    return true;
  }
}

export function cookie(request: DashboardRequest, name: string): string | undefined {
  const header = request.headers.cookie;
  const text = Array.isArray(header) ? header.join('; ') : (header ?? '');
  for (const part of text.split(';')) {
    const eq = part.indexOf('=');
    if (eq > 0 && part.slice(0, eq).trim() === name) return part.slice(eq + 1).trim();
  }
  return undefined;
}

function header(request: DashboardRequest, name: string): string | undefined {
  const value = request.headers[name];
  return Array.isArray(value) ? value[0] : value;
}

/** The client's CSRF token (from its cookie) or a new one; `set` tells whether to send the cookie. */
export function csrfToken(request: DashboardRequest): { token: string; set: boolean } {
  const existing = cookie(request, CSRF_COOKIE);
  if (existing !== undefined && TOKEN_PATTERN.test(existing)) return { token: existing, set: false };
  return { token: randomBytes(24).toString('base64url'), set: true };
}

export function csrfCookie(token: string, path: string, secure: boolean): string {
  return `${CSRF_COOKIE}=${token}; Path=${path}; HttpOnly; SameSite=Strict${secure ? '; Secure' : ''}`;
}

/** Throws 403 unless the request carries the CSRF header matching its cookie and is not cross-site. */
export function checkCsrf(request: DashboardRequest): void {
  const site = header(request, 'sec-fetch-site');
  if (site !== undefined && site !== 'same-origin' && site !== 'none') throw new ForbiddenException('Cross-site action refused');
  const fromCookie = cookie(request, CSRF_COOKIE);
  const fromHeader = header(request, CSRF_HEADER);
  if (fromCookie === undefined || fromHeader === undefined || !TOKEN_PATTERN.test(fromCookie)) {
    throw new ForbiddenException(`Missing CSRF token: send the ${CSRF_HEADER} header the dashboard page gives`);
  }
  const a = Buffer.from(fromCookie);
  const b = Buffer.from(fromHeader);
  if (a.length !== b.length || !timingSafeEqual(a, b)) throw new ForbiddenException('Wrong CSRF token: reload the dashboard page');
}

/** At most `perMinute` actions per client per sliding minute, on this instance. */
export class ActionRateLimit {
  private readonly recent = new Map<string, number[]>();

  constructor(
    private readonly perMinute: number,
    private readonly now: () => number = Date.now,
  ) {}

  take(client: string): void {
    const now = this.now();
    const since = now - 60_000;
    const times = (this.recent.get(client) ?? []).filter((at) => at > since);
    if (times.length >= this.perMinute) {
      this.recent.set(client, times);
      throw new HttpException(`Too many actions: at most ${this.perMinute} a minute`, HttpStatus.TOO_MANY_REQUESTS);
    }
    times.push(now);
    this.recent.set(client, times);
    // Forget idle clients so the map stays small.
    if (this.recent.size > 1_000) {
      for (const [key, list] of this.recent) if (list.every((at) => at <= since)) this.recent.delete(key);
    }
  }
}
