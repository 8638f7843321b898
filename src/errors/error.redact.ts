import { types } from 'node:util';

const DEFAULT_MAX_LENGTH = 2000;
const MASK = '***';

// Redacting is linear in the input, but an error can carry megabytes (a response body, a dumped
// row). Only the head survives trimming anyway, so redact just the head plus this much slack.
const PRE_CUT_SLACK = 4096;
// Back off to whitespace when pre-cutting so a secret is not split into a tail the patterns no
// longer recognise.
const PRE_CUT_WHITESPACE_WINDOW = 256;

const MAX_DEPTH = 4;
const MAX_ENTRIES = 50;
const MAX_CAUSES = 3;

const PEM_PRIVATE_KEY = /-----BEGIN [A-Z0-9 ]*PRIVATE KEY-----[\s\S]*?(?:-----END [A-Z0-9 ]*PRIVATE KEY-----|$)/g;
const SLACK_WEBHOOK = /((?:https?:\/\/)?hooks\.slack(?:-gov)?\.com\/(?:services|workflows|triggers)\/)[^\s"'`<>|\\)\]}]+/gi;
// The password may contain '@' (drivers accept it unencoded), so it runs to the last '@' of the
// authority, which ends at the first '/', '?', '#', whitespace or quote.
const URL_CREDENTIALS = /(?<![\w+.-])([a-z][a-z0-9+.-]*:\/\/)([^\s:/?#@"'`<>]*):([^\s/?#"'`<>]*)@/gi;
const SLACK_TOKEN = /\b(xox[abprs]-)[A-Za-z0-9-]+/g;
const AWS_ACCESS_KEY_ID = /\b(AKIA|ASIA|ABIA|ACCA)[A-Z0-9]{16}\b/g;
const BEARER = /\b(Bearer)\s+[A-Za-z0-9\-._~+/]+=*/gi;
const BASIC = /\b(Basic)\s+([A-Za-z0-9+/]{8,}={0,2})(?![A-Za-z0-9+/=])/gi;
// Matches only at token starts (the lookbehind) so a long identifier-like run costs linear time.
const KEY_CANDIDATE = /(?<![\w.-])(\\?["'`]?)([A-Za-z_][\w.-]*)\1[ \t]*(?::=|=>|[:=])[ \t]*/g;
const AUTH_SCHEME = /^(?:Bearer|Basic|Token|Digest|Negotiate|Bot)[ \t]+/i;
const UNQUOTED_VALUE = /^[^\s,;&"'`<>(){}[\]]+/;

// Long, unambiguous words: a substring match is safe (db_password, accessToken, x-api-key).
const SECRET_KEY_PARTS = [
  'password',
  'passwd',
  'passphrase',
  'secret',
  'token',
  'apikey',
  'accesskey',
  'privatekey',
  'authorization',
  'credential',
];
// Short words that also occur inside harmless keys ('auth' in 'author'), so they must be a whole
// segment of the key: auth, x-auth, basicAuth, DB_PWD.
const SECRET_KEY_SEGMENTS = new Set(['pwd', 'auth', 'pass']);

/**
 * Redacts credentials: the password in URLs (postgres://user:secret@host/db →
 * postgres://user:***@host/db, also redis://:secret@h, https://u:p@h), Bearer/Basic tokens
 * (Bearer abc.def → Bearer ***), key=value / key: value pairs whose key looks secret (password,
 * passwd, pwd, secret, token, api_key, apikey, access_key, auth, authorization, private_key,
 * client_secret — case-insensitive, quoted or not, JSON style "password":"x" too), AWS access key
 * IDs (AKIA...), Slack webhook URLs (hooks.slack.com/services/...), xox[abprs]- Slack tokens and
 * PEM private key blocks. Idempotent: redacting twice gives the same text.
 */
export function redactSecrets(text: string): string {
  let out = typeof text === 'string' ? text : String(text);
  out = out.replace(PEM_PRIVATE_KEY, '[redacted private key]');
  out = out.replace(SLACK_WEBHOOK, `$1${MASK}`);
  out = out.replace(URL_CREDENTIALS, `$1$2:${MASK}@`);
  out = out.replace(SLACK_TOKEN, `$1${MASK}`);
  out = out.replace(AWS_ACCESS_KEY_ID, `$1${MASK}`);
  out = out.replace(BEARER, `$1 ${MASK}`);
  out = out.replace(BASIC, (match: string, scheme: string, token: string) =>
    looksLikeBase64Credential(token) ? `${scheme} ${MASK}` : match,
  );
  return redactKeyValues(out);
}

/**
 * Returns the error as text: message (and for non-Error values a safe string), secrets redacted,
 * trimmed to maxLength chars with a '…[trimmed N chars]' marker. Never throws, even for objects
 * with throwing getters or circular structures.
 *
 * Errors other than a plain `Error` are prefixed with their name ("TypeError: …"), and a `cause`
 * chain or `AggregateError.errors` is appended, because Node's network errors put the useful part
 * there ("fetch failed — caused by: connect ECONNREFUSED …").
 *
 * @param maxLength @default 2000
 */
export function describeError(error: unknown, maxLength: number = DEFAULT_MAX_LENGTH): string {
  const limit = typeof maxLength === 'number' && maxLength >= 0 && !Number.isNaN(maxLength) ? Math.floor(maxLength) : DEFAULT_MAX_LENGTH;
  let text: string;
  try {
    text = stringify(error, 0);
  } catch {
    text = '[unprintable value]';
  }
  try {
    let dropped = 0;
    if (Number.isFinite(limit) && text.length > limit + PRE_CUT_SLACK) {
      const cut = preCutIndex(text, limit + PRE_CUT_SLACK);
      dropped = text.length - cut;
      text = text.slice(0, cut);
    }
    return trimWithMarker(redactSecrets(text), limit, dropped);
  } catch {
    return '[unprintable value]';
  }
}

function looksLikeBase64Credential(token: string): boolean {
  // "Basic" is also an English word ("Basic validation failed"); a real base64 'user:pass' has
  // digits, '+', '/', '=' or inner capitals, prose does not.
  return /[0-9+/=]/.test(token) || /[A-Z]/.test(token.slice(1));
}

function isSecretKey(key: string): boolean {
  const compact = key.toLowerCase().replace(/[_.-]/g, '');
  if (SECRET_KEY_PARTS.some((part) => compact.includes(part))) return true;
  return key
    .replace(/([a-z0-9])([A-Z])/g, '$1 $2')
    .toLowerCase()
    .split(/[\s_.-]+/)
    .some((segment) => SECRET_KEY_SEGMENTS.has(segment));
}

function redactKeyValues(text: string): string {
  const pattern = new RegExp(KEY_CANDIDATE.source, 'g');
  let out = '';
  let copiedUpTo = 0;
  let match: RegExpExecArray | null;
  while ((match = pattern.exec(text)) !== null) {
    const key = match[2] ?? '';
    if (!isSecretKey(key)) continue;
    const valueStart = match.index + match[0].length;
    const value = locateValue(text, valueStart);
    if (!value) continue;
    out += text.slice(copiedUpTo, value.start) + MASK;
    copiedUpTo = value.end;
    pattern.lastIndex = Math.max(value.end, pattern.lastIndex);
  }
  return copiedUpTo === 0 ? text : out + text.slice(copiedUpTo);
}

/** Span of the secret part of a value, or undefined when there is nothing (left) to hide. */
function locateValue(text: string, from: number): { start: number; end: number } | undefined {
  const rest = text.slice(from);
  let quote: string | undefined;
  for (const candidate of ['\\"', "\\'", '"', "'", '`']) {
    if (rest.startsWith(candidate)) {
      quote = candidate;
      break;
    }
  }
  if (quote) {
    const start = from + quote.length;
    let end = findClosingQuote(text, start, quote);
    if (end === -1) {
      // An unterminated quote (the message was cut) hides the rest of the line rather than
      // guessing where the secret ends.
      const newline = text.indexOf('\n', start);
      end = newline === -1 ? text.length : newline;
    }
    return spanUnlessMasked(text, start, end);
  }
  const scheme = AUTH_SCHEME.exec(rest);
  const start = from + (scheme ? scheme[0].length : 0);
  const token = UNQUOTED_VALUE.exec(text.slice(start));
  if (!token) return undefined;
  return spanUnlessMasked(text, start, start + token[0].length);
}

function spanUnlessMasked(text: string, start: number, end: number): { start: number; end: number } | undefined {
  if (end <= start || text.startsWith(MASK, start)) return undefined;
  return { start, end };
}

function findClosingQuote(text: string, from: number, quote: string): number {
  for (let index = text.indexOf(quote, from); index !== -1; index = text.indexOf(quote, index + 1)) {
    if (quote.length === 2) return index;
    let backslashes = 0;
    for (let k = index - 1; k >= from && text[k] === '\\'; k--) backslashes++;
    if (backslashes % 2 === 0) return index;
  }
  return -1;
}

function preCutIndex(text: string, at: number): number {
  const window = text.slice(at - PRE_CUT_WHITESPACE_WINDOW, at);
  const lastSpace = window.search(/\s\S*$/);
  let cut = lastSpace === -1 ? at : at - PRE_CUT_WHITESPACE_WINDOW + lastSpace;
  if (isHighSurrogate(text.charCodeAt(cut - 1))) cut--;
  return cut;
}

function trimWithMarker(text: string, maxLength: number, alreadyDropped: number): string {
  if (alreadyDropped === 0 && text.length <= maxLength) return text;
  const total = text.length + alreadyDropped;
  let keep = Math.min(text.length, maxLength);
  // The marker's length depends on the count it reports, which depends on how much is kept.
  for (let i = 0; i < 8; i++) {
    const next = maxLength - marker(total - keep).length;
    if (next >= keep) break;
    keep = next;
  }
  if (keep < 0) return text.slice(0, maxLength);
  if (keep > 0 && isHighSurrogate(text.charCodeAt(keep - 1))) keep--;
  return text.slice(0, keep) + marker(total - keep);
}

function marker(trimmed: number): string {
  return `…[trimmed ${trimmed} chars]`;
}

function isHighSurrogate(code: number): boolean {
  return code >= 0xd800 && code <= 0xdbff;
}

function isError(value: unknown): value is Error {
  return value instanceof Error || types.isNativeError(value);
}

function stringify(value: unknown, causeDepth: number): string {
  if (typeof value === 'string') return value;
  if (value === null || value === undefined) return String(value);
  if (isError(value)) return errorText(value, causeDepth);
  if (typeof value === 'object' || typeof value === 'function') {
    return serialize(value, 0, new Set());
  }
  return String(value);
}

function errorText(error: Error, causeDepth: number): string {
  const name = safeGet(error, 'name');
  // An error can reach itself through cause, errors or even message; stop instead of recursing.
  if (causeDepth > MAX_CAUSES) return typeof name === 'string' && name ? name : 'Error';
  const rawMessage = safeGet(error, 'message');
  let message =
    typeof rawMessage === 'string'
      ? rawMessage
      : rawMessage === undefined || rawMessage === null
        ? ''
        : stringifySafely(rawMessage, causeDepth + 1);
  if (!message) {
    const code = safeGet(error, 'code');
    message = typeof code === 'string' ? code : '';
  }
  const label = typeof name === 'string' && name && name !== 'Error' ? name : '';
  let text = label && message ? `${label}: ${message}` : label || message || 'Error';

  const inner = safeGet(error, 'errors');
  if (Array.isArray(inner) && inner.length > 0) {
    const parts = inner.slice(0, 5).map((item) => stringifySafely(item, causeDepth + 1));
    text += ` [${parts.join('; ')}${inner.length > 5 ? `; …${inner.length - 5} more` : ''}]`;
  }
  const cause = safeGet(error, 'cause');
  if (cause !== undefined && causeDepth < MAX_CAUSES) {
    text += ` — caused by: ${stringifySafely(cause, causeDepth + 1)}`;
  }
  return text;
}

function stringifySafely(value: unknown, causeDepth = 0): string {
  try {
    return stringify(value, causeDepth);
  } catch {
    return '[unprintable value]';
  }
}

function safeGet(target: object, key: string): unknown {
  try {
    return (target as Record<string, unknown>)[key];
  } catch {
    return undefined;
  }
}

/** JSON-like rendering that reads every property defensively and marks cycles. */
function serialize(value: unknown, depth: number, ancestors: Set<object>): string {
  if (value === null) return 'null';
  switch (typeof value) {
    case 'string':
      return JSON.stringify(value);
    case 'number':
    case 'boolean':
    case 'undefined':
      return String(value);
    case 'bigint':
      return `${value}n`;
    case 'symbol':
      return value.toString();
    case 'function':
      return `[Function ${(safeGet(value, 'name') as string) || 'anonymous'}]`;
  }
  const object = value as object;
  if (ancestors.has(object)) return '[Circular]';
  if (isError(object)) return JSON.stringify(errorText(object, MAX_CAUSES));
  if (object instanceof Date) {
    return Number.isNaN(object.getTime()) ? 'Invalid Date' : JSON.stringify(object.toISOString());
  }
  if (object instanceof Map) return `[Map(${object.size})]`;
  if (object instanceof Set) return `[Set(${object.size})]`;
  if (depth >= MAX_DEPTH) return Array.isArray(object) ? '[Array]' : '[Object]';

  ancestors.add(object);
  try {
    if (Array.isArray(object)) {
      const items = object.slice(0, MAX_ENTRIES).map((item) => serializeSafely(item, depth + 1, ancestors));
      if (object.length > MAX_ENTRIES) items.push(`…${object.length - MAX_ENTRIES} more`);
      return `[${items.join(',')}]`;
    }
    const keys = Object.keys(object);
    const entries = keys.slice(0, MAX_ENTRIES).map((key) => {
      let rendered: string;
      try {
        rendered = serialize((object as Record<string, unknown>)[key], depth + 1, ancestors);
      } catch {
        rendered = '[unreadable]';
      }
      return `${JSON.stringify(key)}:${rendered}`;
    });
    if (keys.length > MAX_ENTRIES) entries.push(`…${keys.length - MAX_ENTRIES} more`);
    return `{${entries.join(',')}}`;
  } finally {
    ancestors.delete(object);
  }
}

function serializeSafely(value: unknown, depth: number, ancestors: Set<object>): string {
  try {
    return serialize(value, depth, ancestors);
  } catch {
    return '[unreadable]';
  }
}
