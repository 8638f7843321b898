// Copies the Lua scripts next to the compiled JavaScript that loads them.
// Usage: node scripts/copy-lua.mjs [targetDir]   (default: dist)
import { cpSync } from 'node:fs';
import { fileURLToPath } from 'node:url';

const root = fileURLToPath(new URL('..', import.meta.url));
const target = process.argv[2] ?? 'dist';
cpSync(`${root}/src/leasing/lua`, `${root}/${target}/leasing/lua`, { recursive: true });
