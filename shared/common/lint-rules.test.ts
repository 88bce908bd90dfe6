// The lint rule that keeps user-written patterns off the backtracking engine
// (scripts/lint/literal-patterns.js), tested through the project's own ESLint configuration on a
// file planted in shared/ (type-aware, as `npm run lint` runs it), then removed.
import test from 'ava';
import { randomBytes } from 'node:crypto';
import fs from 'node:fs/promises';
import path from 'node:path';
import { ESLint } from 'eslint';

const root = path.resolve(import.meta.dirname, '../..');

async function lint(source: string): Promise<{ line: number; rule: string | null }[]> {
  const file = path.join(root, 'shared', `lint-scratch-${randomBytes(4).toString('hex')}.ts`);
  await fs.writeFile(file, source);
  try {
    const [result] = await new ESLint({ cwd: root }).lintFiles([file]);
    return result!.messages.map((m) => ({ line: m.line, rule: m.ruleId }));
  } finally {
    await fs.rm(file, { force: true });
  }
}

const lines = (found: { line: number; rule: string | null }[]) => found.filter((m) => m.rule === 'platform/literal-patterns').map((m) => m.line);

test('issue 29 #1: a planted non-literal RegExp, and string methods given a non-literal pattern, fail the lint', async (t) => {
  const found = await lint(
    [
      'export function planted(input: string, re: RegExp, text: string, any: any): unknown[] {',
      '  return [',
      '    new RegExp(input),', // 3
      "    RegExp(input, 'u'),", // 4
      '    new RegExp(`^${input}$`),', // 5
      '    text.match(input),', // 6
      '    text.search(input),', // 7
      '    [...text.matchAll(re)],', // 8
      "    text.replace(re, ''),", // 9
      '    text.split(re),', // 10
      '    any.match(input),', // 11
      '  ];',
      '}',
    ].join('\n'),
  );
  t.deepEqual(lines(found), [3, 4, 5, 6, 7, 8, 9, 10, 11]);
});

test('literal patterns, patterns bound once to a regex literal, text separators and non-string receivers pass', async (t) => {
  const found = await lint(
    [
      'const WORD = /\\w+/g;',
      'export function fine(text: string, sep: string, params: { match(x: string): boolean }): unknown[] {',
      '  return [',
      "    new RegExp('^a+$'),",
      '    /^(a|b)$/.test(text),',
      '    text.match(WORD),',
      "    text.match(/x/), text.search('y'),",
      '    text.split(sep), text.replace(sep, sep), text.replaceAll(sep, ""),',
      '    text.split(/,/),',
      '    params.match(text),',
      '  ];',
      '}',
    ].join('\n'),
  );
  t.deepEqual(found, []);
});
