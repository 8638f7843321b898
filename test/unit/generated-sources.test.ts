/**
 * The Lua scripts and the dashboard's files reach both builds as text compiled into
 * src/leasing/lua/lua.sources.ts and src/dashboard/page.sources.ts. The files on disk are the
 * source of truth; these tests fail when a generated module no longer matches them.
 */
import { readdirSync, readFileSync } from 'node:fs';
import { join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { describe, expect, it } from 'vitest';
import { loadAssets } from '../../src/dashboard/dashboard.assets.js';
import { PAGE_FILES, VENDOR_SOURCES } from '../../src/dashboard/page.sources.js';
import { LUA_SOURCES } from '../../src/leasing/lua/lua.sources.js';
import { loadScript } from '../../src/leasing/redis-script.runner.js';

const ROOT = fileURLToPath(new URL('../..', import.meta.url));
const REGENERATE = 'out of date: run `node scripts/build-sources.mjs` (or `npm run build`)';

/** Every file of a folder with one of these extensions, by name, as text. */
function filesOf(dir: string, extension: RegExp): Record<string, string> {
  const names = readdirSync(join(ROOT, dir)).filter((name) => extension.test(name));
  return Object.fromEntries(names.map((name) => [name, readFileSync(join(ROOT, dir, name), 'utf8')]));
}

describe('generated sources', () => {
  it('carry every Lua script exactly as its .lua file', () => {
    expect(LUA_SOURCES, `src/leasing/lua/lua.sources.ts is ${REGENERATE}`).toEqual(filesOf('src/leasing/lua', /\.lua$/));
  });

  it("carry the dashboard's page files exactly as in src/dashboard/assets", () => {
    expect(PAGE_FILES, `src/dashboard/page.sources.ts is ${REGENERATE}`).toEqual(filesOf('src/dashboard/assets', /\.(js|css|html)$/));
  });

  it('carry the front-end libraries of the installed devDependencies', () => {
    const installed = {
      'preact-htm.js': 'htm/preact/standalone.module.js',
      'chart.js': 'chart.js/dist/chart.umd.min.js',
      'cronstrue.js': 'cronstrue/dist/cronstrue.min.js',
    };
    const expected = Object.fromEntries(
      Object.entries(installed).map(([name, file]) => [name, readFileSync(join(ROOT, 'node_modules', file), 'utf8')]),
    );
    expect(VENDOR_SOURCES, `src/dashboard/page.sources.ts is ${REGENERATE}`).toEqual(expected);
  });

  it('give each script its key count from its file name', () => {
    const claim = loadScript('claim-6.lua');
    expect(claim.keys).toBe(6);
    expect(claim.source).toBe(readFileSync(join(ROOT, 'src/leasing/lua/claim-6.lua'), 'utf8'));
    expect(() => loadScript('missing-1.lua')).toThrow(/no Lua script missing-1\.lua/);
  });

  it('serve the page and every file it links to', () => {
    const { page, files } = loadAssets();
    const linked = [...page.matchAll(/\{\{path\}\}\/assets\/([\w.-]+)/g)].map((match) => match[1]!);
    expect(linked.length).toBeGreaterThan(0);
    for (const name of linked) expect(files.get(name)?.body, name).toBeTruthy();
    expect(files.get('chart.js')?.type).toBe('text/javascript; charset=utf-8');
  });
});
