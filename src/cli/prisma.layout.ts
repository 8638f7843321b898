/* Where the app's Prisma files are: its schema (a file or a folder) and its migrations folder. */
import { existsSync, readdirSync, readFileSync, statSync } from 'node:fs';
import path from 'node:path';

/** A wrong command line or an app layout the command cannot work with; exits 2. */
export class PrismaLayoutError extends Error {
  override readonly name = 'PrismaLayoutError';
}

export interface SchemaLocation {
  readonly kind: 'file' | 'folder';
  readonly path: string;
  /** Where the location came from, for the output. */
  readonly from: string;
}

const CONFIG_FILES = [
  'prisma.config.ts',
  'prisma.config.mts',
  'prisma.config.cts',
  'prisma.config.js',
  'prisma.config.mjs',
  'prisma.config.cjs',
];

export interface PrismaConfig {
  readonly file: string;
  readonly schema: string | undefined;
  readonly migrations: string | undefined;
}

/** The `schema` and `migrations.path` of prisma.config.* when they are string literals. */
export function readPrismaConfig(cwd: string): PrismaConfig | undefined {
  for (const name of CONFIG_FILES) {
    const file = path.join(cwd, name);
    if (!existsSync(file)) continue;
    const text = readFileSync(file, 'utf8');
    const literal = (pattern: RegExp): string | undefined => pattern.exec(text)?.[2];
    return {
      file: name,
      schema: literal(/(?<![\w$])schema\s*:\s*(['"`])([^'"`$]+)\1/),
      migrations: literal(/(?<![\w$])migrations\s*:\s*\{[^}]*?(?<![\w$])path\s*:\s*(['"`])([^'"`$]+)\1/),
    };
  }
  return undefined;
}

export function locateSchema(cwd: string, flag: string | undefined, config: PrismaConfig | undefined): SchemaLocation {
  const at = (given: string, from: string, base = cwd): SchemaLocation => {
    const full = path.resolve(base, given);
    if (!existsSync(full)) throw new PrismaLayoutError(`${from} names ${given}, which does not exist (looked at ${full})`);
    return { kind: statSync(full).isDirectory() ? 'folder' : 'file', path: full, from };
  };
  if (flag !== undefined) return at(flag, '--schema');
  if (config?.schema !== undefined) return at(config.schema, `\`schema\` in ${config.file}`);
  const fromPackage = packageSchema(cwd);
  if (fromPackage !== undefined) return at(fromPackage, '"prisma.schema" in package.json');
  const file = path.join(cwd, 'prisma', 'schema.prisma');
  if (existsSync(file)) return { kind: 'file', path: file, from: 'the default location' };
  const folder = path.join(cwd, 'prisma', 'schema');
  if (existsSync(folder) && statSync(folder).isDirectory()) return { kind: 'folder', path: folder, from: 'the default location' };
  throw new PrismaLayoutError(
    `no Prisma schema found in ${cwd}: looked for --schema, \`schema\` in prisma.config.ts, "prisma.schema" in package.json, ` +
      `the file prisma/schema.prisma and the folder prisma/schema/. Pass --schema <file|dir> (run it in the app's folder).`,
  );
}

function packageSchema(cwd: string): string | undefined {
  const file = path.join(cwd, 'package.json');
  if (!existsSync(file)) return undefined;
  let pkg: unknown;
  try {
    pkg = JSON.parse(readFileSync(file, 'utf8'));
  } catch (error) {
    throw new PrismaLayoutError(`package.json is not valid JSON: ${(error as Error).message}`);
  }
  const schema = (pkg as { prisma?: { schema?: unknown } } | null)?.prisma?.schema;
  return typeof schema === 'string' ? schema : undefined;
}

/**
 * `--migrations`, else `migrations.path` of prisma.config, else `migrations` next to the schema:
 * beside the file, or in or beside the folder (whichever exists; else beside the file that holds
 * the datasource block, as Prisma 6 does for a schema folder).
 */
export function locateMigrations(cwd: string, flag: string | undefined, config: PrismaConfig | undefined, schema: SchemaLocation): string {
  if (flag !== undefined) return path.resolve(cwd, flag);
  if (config?.migrations !== undefined) return path.resolve(cwd, config.migrations);
  if (schema.kind === 'file') return path.join(path.dirname(schema.path), 'migrations');
  const candidates = [path.join(schema.path, 'migrations'), path.join(path.dirname(schema.path), 'migrations')];
  const existing = candidates.find((dir) => existsSync(dir));
  if (existing) return existing;
  const datasource = prismaFiles(schema.path).find((file) => /^\s*datasource\s+\w+\s*\{/m.test(readFileSync(file, 'utf8')));
  return path.join(datasource ? path.dirname(datasource) : schema.path, 'migrations');
}

/** The .prisma files of a schema folder, sub-folders included (but no migrations or node_modules). */
export function prismaFiles(dir: string): string[] {
  const files: string[] = [];
  for (const entry of readdirSync(dir, { withFileTypes: true }).sort((a, b) => a.name.localeCompare(b.name))) {
    const full = path.join(dir, entry.name);
    if (entry.isDirectory()) {
      if (entry.name !== 'migrations' && entry.name !== 'node_modules' && !entry.name.startsWith('.')) files.push(...prismaFiles(full));
    } else if (entry.name.endsWith('.prisma')) {
      files.push(full);
    }
  }
  return files;
}
