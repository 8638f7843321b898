import { describe, expect, it } from 'vitest';
import { describeError, redactSecrets } from '../../src/errors/error.redact.js';

describe('redactSecrets', () => {
  it.each([
    // URL credentials
    ['postgres://user:secret@host/db', 'postgres://user:***@host/db'],
    ['redis://:secret@h:6379/0', 'redis://:***@h:6379/0'],
    ['GET https://u:p@h/path failed', 'GET https://u:***@h/path failed'],
    ['mysql://app:p@ss@db.internal:3306/x', 'mysql://app:***@db.internal:3306/x'],
    ['"url":"postgresql://me:s3cr3t@10.0.0.1/app"', '"url":"postgresql://me:***@10.0.0.1/app"'],
    // Authorization schemes
    ['Bearer abc.def', 'Bearer ***'],
    ['sent bearer eyJhbGciOi.eyJzdWIi.sig-_x=', 'sent bearer ***'],
    ['Authorization: Bearer abc.def', 'Authorization: Bearer ***'],
    ['Basic dXNlcjpwYXNz', 'Basic ***'],
    ['authorization=Basic YWxhZGRpbjpvcGVuc2VzYW1l', 'authorization=Basic ***'],
    // key=value / key: value, quoted or not, JSON style
    ['password=hunter2 retrying', 'password=*** retrying'],
    ['PASSWORD: hunter2', 'PASSWORD: ***'],
    ['passwd = "two words"', 'passwd = "***"'],
    ["pwd='x'", "pwd='***'"],
    ['DB_PWD=x', 'DB_PWD=***'],
    ['secret: s', 'secret: ***'],
    ['token=abc&page=2', 'token=***&page=2'],
    ['api_key=abc', 'api_key=***'],
    ['x-api-key: abc', 'x-api-key: ***'],
    ['apiKey: abc', 'apiKey: ***'],
    ['ApiKey=abc', 'ApiKey=***'],
    ['access_key=abc', 'access_key=***'],
    ['AWS_SECRET_ACCESS_KEY=wJalrXUtnFEMI/K7MDENG', 'AWS_SECRET_ACCESS_KEY=***'],
    ['auth=xyz', 'auth=***'],
    ['basicAuth: xyz', 'basicAuth: ***'],
    ['private_key: "-----"', 'private_key: "***"'],
    ['client_secret=zzz', 'client_secret=***'],
    ['accessToken=abc,', 'accessToken=***,'],
    ['{"password":"x","user":"bob"}', '{"password":"***","user":"bob"}'],
    ["{ 'token': 'a\\'b', 'n': 1 }", "{ 'token': '***', 'n': 1 }"],
    ['{\\"password\\":\\"x\\"}', '{\\"password\\":\\"***\\"}'],
    ['password => "x"', 'password => "***"'],
    ['error: password=x', 'error: password=***'],
    ['password="cut off at the end', 'password="***'],
    // Provider-specific tokens
    ['key AKIAIOSFODNN7EXAMPLE used', 'key AKIA*** used'],
    ['ASIAIOSFODNN7EXAMPLE', 'ASIA***'],
    ['posting to https://hooks.slack.com/services/T000/B000/XXXXXXXX failed', 'posting to https://hooks.slack.com/services/*** failed'],
    ['hooks.slack.com/services/T0/B0/X', 'hooks.slack.com/services/***'],
    ['xoxb-1234-5678-abcdEFGH', 'xoxb-***'],
    ['xoxp-1-2', 'xoxp-***'],
    ['xoxs-1 xoxa-2 xoxr-3', 'xoxs-*** xoxa-*** xoxr-***'],
    ['-----BEGIN RSA PRIVATE KEY-----\nMIIEowIBAAKCAQEA\n-----END RSA PRIVATE KEY----- loaded', '[redacted private key] loaded'],
  ])('%s', (input, expected) => {
    expect(redactSecrets(input)).toBe(expected);
  });

  it.each([
    'Job sendInvoices failed: connection refused (ECONNREFUSED 127.0.0.1:5432)',
    'author=jane count=3 status: failed',
    'Basic validation failed for field email',
    'see https://example.com/docs?page=2#retries',
    'Error: timeout after 5000 ms\n    at Object.<anonymous> (/app/src/job.ts:12:5)',
    'ssh://git@github.com/org/repo.git',
    '',
  ])('leaves text without secrets unchanged: %j', (input) => {
    expect(redactSecrets(input)).toBe(input);
  });

  it('is idempotent', () => {
    const once = redactSecrets('postgres://u:p@h/db Bearer abc.def password=x https://token:abc@host xoxb-1-2');
    expect(redactSecrets(once)).toBe(once);
    expect(once).not.toMatch(/abc\.def|password=x|xoxb-1-2|:p@|:abc@/);
  });

  it('redacts every occurrence, not just the first', () => {
    expect(redactSecrets('password=a; password=b; token: c')).toBe('password=***; password=***; token: ***');
  });

  it('stays fast on long secret-free input', () => {
    const input = 'a'.repeat(200_000) + ' ' + 'b.c-'.repeat(50_000);
    const started = performance.now();
    expect(redactSecrets(input)).toBe(input);
    expect(performance.now() - started).toBeLessThan(500);
  });
});

describe('describeError', () => {
  it('uses the message of a plain Error', () => {
    expect(describeError(new Error('boom'))).toBe('boom');
  });

  it('prefixes other error types with their name', () => {
    expect(describeError(new TypeError('x is not a function'))).toBe('TypeError: x is not a function');
  });

  it('appends the cause chain, where Node puts the network reason', () => {
    const error = new TypeError('fetch failed', {
      cause: new Error('connect ECONNREFUSED 127.0.0.1:5432'),
    });
    expect(describeError(error)).toBe('TypeError: fetch failed — caused by: connect ECONNREFUSED 127.0.0.1:5432');
  });

  it('stops at errors that refer to themselves', () => {
    const error = new Error('loop');
    Object.assign(error, { cause: error, errors: [error] });
    Object.defineProperty(error, 'message', { value: error });
    expect(() => describeError(error)).not.toThrow();
    expect(describeError(error)).not.toBe('[unprintable value]');
  });

  it('lists the inner errors of an AggregateError with an empty message', () => {
    const error = new AggregateError([new Error('a'), new Error('b')], '');
    expect(describeError(error)).toBe('AggregateError [a; b]');
  });

  it('falls back to the code when an error has no message', () => {
    const error = Object.assign(new Error(''), { code: 'ECONNRESET' });
    expect(describeError(error)).toBe('ECONNRESET');
  });

  it('returns strings as they are (redacted)', () => {
    expect(describeError('plain text')).toBe('plain text');
    expect(describeError('password=x')).toBe('password=***');
  });

  it('renders plain objects as JSON-like text', () => {
    expect(describeError({ code: 42, why: 'bad', list: [1, 'two'] })).toBe('{"code":42,"why":"bad","list":[1,"two"]}');
  });

  it('marks circular references instead of throwing', () => {
    const node: Record<string, unknown> = { name: 'a' };
    node.self = node;
    node.list = [node];
    expect(describeError(node)).toBe('{"name":"a","self":[Circular],"list":[[Circular]]}');
  });

  it('shows an object reached twice without a cycle in full both times', () => {
    const shared = { v: 1 };
    expect(describeError({ a: shared, b: shared })).toBe('{"a":{"v":1},"b":{"v":1}}');
  });

  it('survives a throwing getter on an object', () => {
    const value = {
      ok: 1,
      get boom(): never {
        throw new Error('getter exploded');
      },
    };
    expect(describeError(value)).toBe('{"ok":1,"boom":[unreadable]}');
  });

  it('survives an Error whose message getter throws', () => {
    const error = new RangeError('hidden');
    Object.defineProperty(error, 'message', {
      get(): never {
        throw new Error('nope');
      },
    });
    expect(describeError(error)).toBe('RangeError');
  });

  it('survives a proxy that throws on every trap', () => {
    const hostile = new Proxy(
      {},
      {
        get: () => {
          throw new Error('trap');
        },
        ownKeys: () => {
          throw new Error('trap');
        },
        getPrototypeOf: () => {
          throw new Error('trap');
        },
      },
    );
    expect(() => describeError(hostile)).not.toThrow();
    expect(typeof describeError(hostile)).toBe('string');
  });

  it.each([
    [null, 'null'],
    [undefined, 'undefined'],
    [42, '42'],
    [false, 'false'],
    [10n, '10'],
    [Symbol('s'), 'Symbol(s)'],
  ])('renders %s', (value, expected) => {
    expect(describeError(value)).toBe(expected);
  });

  it('redacts secrets in messages and nested values', () => {
    expect(describeError(new Error('connect postgres://app:secret@db/x failed'))).toBe('connect postgres://app:***@db/x failed');
    expect(describeError({ headers: { authorization: 'Bearer abc.def' } })).toBe('{"headers":{"authorization":"***"}}');
  });

  it('trims to 2000 chars by default with a marker counting the dropped chars', () => {
    const text = describeError('x'.repeat(5000));
    expect(text).toHaveLength(2000);
    const kept = text.indexOf('…');
    expect(text.slice(kept)).toBe(`…[trimmed ${5000 - kept} chars]`);
  });

  it('honours a custom maxLength and keeps short text intact', () => {
    const text = describeError('y'.repeat(500), 100);
    expect(text).toHaveLength(100);
    expect(text).toMatch(/^y+…\[trimmed 420 chars\]$/);
    expect(describeError('short', 100)).toBe('short');
    expect(describeError('z'.repeat(100), 100)).toBe('z'.repeat(100));
  });

  it('redacts before trimming, so a cut can never expose part of a secret', () => {
    const text = describeError(`${'a'.repeat(50)} postgres://u:supersecretvalue@h/db`, 80);
    expect(text).not.toContain('supersecret');
  });

  it('bounds the work and the output for huge errors', () => {
    const text = describeError(new Error('word '.repeat(1_000_000)), 200);
    expect(text.length).toBeLessThanOrEqual(200);
    expect(text).toMatch(/…\[trimmed \d+ chars\]$/);
    const dropped = Number(/trimmed (\d+) chars/.exec(text)?.[1]);
    expect(dropped + text.indexOf('…')).toBe(5_000_000);
  });

  it('does not split a surrogate pair at the cut', () => {
    const text = describeError('😀'.repeat(100), 50);
    expect(text.length).toBeLessThanOrEqual(50);
    expect(() => encodeURIComponent(text)).not.toThrow();
  });
});
