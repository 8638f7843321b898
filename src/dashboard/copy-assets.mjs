// Copies the dashboard's page files, and the front-end libraries it serves, next to the compiled
// JavaScript, so the published package needs no build step and no front-end dependency.
// Usage: node src/dashboard/copy-assets.mjs [targetDir]   (default: dist)
import { cpSync, existsSync, mkdirSync } from 'node:fs';
import { dirname, join, resolve } from 'node:path';
import { fileURLToPath } from 'node:url';

const root = fileURLToPath(new URL('../..', import.meta.url));
const target = join(resolve(root, process.argv[2] ?? 'dist'), 'dashboard', 'assets');
// Served name -> file in its npm package (as VENDOR_FILES in dashboard.assets.ts).
const vendor = {
  'preact-htm.js': 'htm/preact/standalone.module.js',
  'chart.js': 'chart.js/dist/chart.umd.min.js',
  'cronstrue.js': 'cronstrue/dist/cronstrue.min.js',
};
/** The file in the nearest node_modules holding it (the packages are devDependencies). */
const installed = (file) => {
  for (let dir = root; ; dir = dirname(dir)) {
    if (existsSync(join(dir, 'node_modules', file))) return join(dir, 'node_modules', file);
    if (dirname(dir) === dir) throw new Error(`copy-assets: ${file} is not installed (npm ci)`);
  }
};
cpSync(`${root}/src/dashboard/assets`, target, { recursive: true });
mkdirSync(`${target}/vendor`, { recursive: true });
for (const [name, file] of Object.entries(vendor)) {
  cpSync(installed(file), `${target}/vendor/${name}`);
  // Each library's licence travels with its code.
  const pkg = file.split('/')[0];
  const licence = ['LICENSE', 'LICENSE.md', 'LICENSE.txt']
    .map((f) => `${pkg}/${f}`)
    .find((f) => {
      try {
        return Boolean(installed(f));
      } catch {
        return false;
      }
    });
  if (licence) cpSync(installed(licence), `${target}/vendor/${name.replace(/\.js$/, '')}.LICENSE.txt`);
}
