/**
 * The page's files, read once at bootstrap: the dashboard's own (assets/) and the front-end
 * libraries it uses, which `npm run build` copies into assets/vendor/ (see copy-assets.mjs); run
 * from the sources, they are read from the installed packages instead.
 */
import { existsSync, readFileSync } from 'node:fs';
import { dirname, join } from 'node:path';
import { fileURLToPath } from 'node:url';

/** Front-end libraries: served name → file in its npm package. */
export const VENDOR_FILES: Readonly<Record<string, string>> = {
  'preact-htm.js': 'htm/preact/standalone.module.js',
  'chart.js': 'chart.js/dist/chart.umd.min.js',
  'cronstrue.js': 'cronstrue/dist/cronstrue.min.js',
};

const OWN_FILES = ['lib.js', 'app.js', 'views.js', 'history.js', 'timeline.js', 'charts.js', 'style.css', 'views.css'];

const TYPES: Readonly<Record<string, string>> = {
  js: 'text/javascript; charset=utf-8',
  css: 'text/css; charset=utf-8',
  html: 'text/html; charset=utf-8',
};

export interface Asset {
  type: string;
  body: string;
}

function fromPackage(start: string, file: string): string | undefined {
  for (let dir = start; ; dir = dirname(dir)) {
    const candidate = join(dir, 'node_modules', file);
    if (existsSync(candidate)) return candidate;
    if (dirname(dir) === dir) return undefined;
  }
}

/** Reads every file of the page; throws naming a missing one. */
export function loadAssets(): { page: string; files: Map<string, Asset> } {
  const here = dirname(fileURLToPath(import.meta.url));
  const dir = join(here, 'assets');
  const read = (path: string | undefined, name: string): string => {
    if (path === undefined || !existsSync(path)) {
      throw new Error(`DistributedCronDashboardModule: the page file ${name} is missing (looked in ${dir}); reinstall the package`);
    }
    return readFileSync(path, 'utf8');
  };
  const files = new Map<string, Asset>();
  const type = (name: string): string => TYPES[name.slice(name.lastIndexOf('.') + 1)] ?? 'application/octet-stream';
  for (const name of OWN_FILES) files.set(name, { type: type(name), body: read(join(dir, name), name) });
  for (const [name, file] of Object.entries(VENDOR_FILES)) {
    const copied = join(dir, 'vendor', name);
    files.set(name, { type: type(name), body: read(existsSync(copied) ? copied : fromPackage(here, file), file) });
  }
  return { page: read(join(dir, 'index.html'), 'index.html'), files };
}

const HTML_ESCAPES: Readonly<Record<string, string>> = { '&': '&amp;', '<': '&lt;', '>': '&gt;', '"': '&quot;', "'": '&#39;' };

export function escapeHtml(value: string): string {
  return value.replace(/[&<>"']/g, (char) => HTML_ESCAPES[char]!);
}
