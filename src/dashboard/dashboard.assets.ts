/**
 * The page's files: the dashboard's own (assets/) and the front-end libraries it serves, carried
 * as text by page.sources.ts (generated from them by scripts/build-sources.mjs), so both builds
 * serve them without a file path and the published package needs no front-end dependency.
 */
import { PAGE_FILES, VENDOR_SOURCES } from './page.sources.js';

const OWN_FILES = ['lib.js', 'app.js', 'views.js', 'history.js', 'schedules.js', 'timeline.js', 'charts.js', 'style.css', 'views.css'];

const TYPES: Readonly<Record<string, string>> = {
  js: 'text/javascript; charset=utf-8',
  css: 'text/css; charset=utf-8',
  html: 'text/html; charset=utf-8',
};

export interface Asset {
  type: string;
  body: string;
}

/** Every file of the page; throws naming a missing one. */
export function loadAssets(): { page: string; files: Map<string, Asset> } {
  const read = (sources: Readonly<Record<string, string>>, name: string): string => {
    const body = sources[name];
    if (body === undefined) {
      throw new Error(`DistributedCronDashboardModule: the page file ${name} is missing from page.sources.ts; reinstall the package`);
    }
    return body;
  };
  const files = new Map<string, Asset>();
  const type = (name: string): string => TYPES[name.slice(name.lastIndexOf('.') + 1)] ?? 'application/octet-stream';
  for (const name of OWN_FILES) files.set(name, { type: type(name), body: read(PAGE_FILES, name) });
  for (const name of Object.keys(VENDOR_SOURCES)) files.set(name, { type: type(name), body: read(VENDOR_SOURCES, name) });
  return { page: read(PAGE_FILES, 'index.html'), files };
}

const HTML_ESCAPES: Readonly<Record<string, string>> = { '&': '&amp;', '<': '&lt;', '>': '&gt;', '"': '&quot;', "'": '&#39;' };

export function escapeHtml(value: string): string {
  return value.replace(/[&<>"']/g, (char) => HTML_ESCAPES[char]!);
}
