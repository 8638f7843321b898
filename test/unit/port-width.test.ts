/**
 * Every interface a public entry point exports (the package, `/testing`, `/dashboard`, the
 * Terminus entry) has at most 10 methods, inherited ones counted: a user who implements one (a
 * store of their own, an alerter) writes a small slice, never a wide one. Read with the
 * TypeScript 6 compiler API that the lint tooling installs (TypeScript 7, the compiler, has no
 * JavaScript API), from the sources as the package build sees them.
 */
import { mkdirSync, rmSync, writeFileSync } from 'node:fs';
import { createRequire } from 'node:module';
import { join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { afterAll, describe, expect, it } from 'vitest';

/** The parts of the TypeScript 6 compiler API read here (the package's own types are TypeScript 7's, which has none). */
interface Node {
  kind: number;
}
interface TsSymbol {
  name: string;
  flags: number;
  valueDeclaration?: Node;
  declarations?: Node[];
}
interface TsType {
  flags: number;
  getCallSignatures(): readonly unknown[];
}
interface Checker {
  getSymbolAtLocation(node: Node): TsSymbol | undefined;
  getExportsOfModule(module: TsSymbol): TsSymbol[];
  getAliasedSymbol(symbol: TsSymbol): TsSymbol;
  getDeclaredTypeOfSymbol(symbol: TsSymbol): TsType;
  getPropertiesOfType(type: TsType): TsSymbol[];
  getTypeOfSymbol(symbol: TsSymbol): TsType;
  getNonNullableType(type: TsType): TsType;
}
interface TypeScript {
  sys: object;
  SymbolFlags: { Alias: number; Interface: number; TypeAlias: number };
  TypeFlags: { Object: number; Intersection: number };
  getParsedCommandLineOfConfigFile(
    file: string,
    options: object,
    host: object & { onUnRecoverableConfigFileDiagnostic(diagnostic: { messageText: unknown }): void },
  ): { options: object } | undefined;
  flattenDiagnosticMessageText(text: unknown, newLine: string): string;
  createProgram(roots: string[], options: object): { getSourceFile(file: string): Node | undefined; getTypeChecker(): Checker };
  isMethodSignature(node: Node): boolean;
  isMethodDeclaration(node: Node): boolean;
}

const ts = createRequire(import.meta.resolve('nestjs-distributed-cron-lint'))('typescript') as TypeScript;
const ROOT = fileURLToPath(new URL('../..', import.meta.url));
const ENTRIES = ['index', 'testing/index', 'dashboard/index', 'observability/terminus/index'].map((entry) =>
  join(ROOT, 'src', `${entry}.ts`),
);
const MAX_METHODS = 10;

/** Each exported interface or object type of these entry files, by `entry name`, with its methods (members that can be called). */
function exportedMethodCounts(entries: string[]): Map<string, number> {
  const config = ts.getParsedCommandLineOfConfigFile(
    join(ROOT, 'tsconfig.build.json'),
    {},
    {
      ...ts.sys,
      onUnRecoverableConfigFileDiagnostic: (diagnostic) => {
        throw new Error(ts.flattenDiagnosticMessageText(diagnostic.messageText, '\n'));
      },
    },
  )!;
  const program = ts.createProgram(entries, config.options);
  const checker = program.getTypeChecker();
  const counts = new Map<string, number>();
  for (const entry of entries) {
    const source = program.getSourceFile(entry);
    const module = source && checker.getSymbolAtLocation(source);
    if (!module) throw new Error(`${entry}: not a module the program could read`);
    for (const exported of checker.getExportsOfModule(module)) {
      const symbol = exported.flags & ts.SymbolFlags.Alias ? checker.getAliasedSymbol(exported) : exported;
      if (!(symbol.flags & (ts.SymbolFlags.Interface | ts.SymbolFlags.TypeAlias))) continue;
      const type = checker.getDeclaredTypeOfSymbol(symbol);
      // Unions (one of several clients) and primitives are not something one implements.
      if (!(type.flags & (ts.TypeFlags.Object | ts.TypeFlags.Intersection))) continue;
      const methods = checker.getPropertiesOfType(type).filter((member) => {
        const declaration = member.valueDeclaration ?? member.declarations?.[0];
        if (declaration && (ts.isMethodSignature(declaration) || ts.isMethodDeclaration(declaration))) return true;
        return checker.getNonNullableType(checker.getTypeOfSymbol(member)).getCallSignatures().length > 0;
      });
      counts.set(`${entry.slice(ROOT.length)} ${exported.name}`, methods.length);
    }
  }
  return counts;
}

const scratch = join(ROOT, '.tmp', `port-width-${process.pid}`);
afterAll(() => rmSync(scratch, { recursive: true, force: true }));

describe('the public interfaces', () => {
  it(`have at most ${MAX_METHODS} methods each`, () => {
    const counts = exportedMethodCounts(ENTRIES);
    // The check reads what it should: the store ports are there, with their methods.
    expect(counts.get('src/index.ts LeaseStore')).toBe(8);
    expect(counts.get('src/index.ts RunReads')).toBe(3);
    const wide = [...counts].filter(([, methods]) => methods > MAX_METHODS).map(([name, methods]) => `${name}: ${methods}`);
    expect(wide).toEqual([]);
  }, 60_000);

  it('counts inherited methods and callable properties, so a wide interface is found', () => {
    mkdirSync(scratch, { recursive: true });
    const entry = join(scratch, 'wide.ts');
    writeFileSync(
      entry,
      `import type { RunReads, RunWrites } from '../../src/index.js';
export interface Wide extends RunWrites, RunReads {
  extra: () => void;
}
export type Narrow = Pick<RunReads, 'get'>;
`,
    );
    const counts = exportedMethodCounts([entry]);
    // 7 writes (warmUp is optional but still to be counted), 3 reads, 1 callable property.
    expect(counts.get(`${entry.slice(ROOT.length)} Wide`)).toBe(11);
    expect(counts.get(`${entry.slice(ROOT.length)} Narrow`)).toBe(1);
  }, 60_000);
});
