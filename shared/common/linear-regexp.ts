// User-written regular expressions (JSON Schema `pattern` and `patternProperties` of secret
// types, Frictionless `constraints.pattern` of data tables, CEL `matches()` in policy conditions)
// run on RE2 (the re2js port): the
// time to match is linear in the input whatever the pattern, so no pattern can stall the event
// loop. RE2 has no lookaround and no backreferences: such patterns are refused where they are
// written. docs/dependencies.md (re2js), docs/api-conventions.md.
import { RE2JS } from 're2js';
import type { RegExpEngine } from 'ajv/dist/types/index.js';

const UNSUPPORTED_PATTERN =
  'uses lookahead, lookbehind or a backreference, which are not supported (patterns run on RE2, a linear-time engine)';

/**
 * ECMAScript escapes RE2 spells otherwise: `\uXXXX` and `\u{X…}` become `\x{…}`. One pass,
 * escapes kept in pairs, so `\\u0041` (a backslash, then text) is left alone.
 */
function toRe2(pattern: string): string {
  let out = '';
  for (let i = 0; i < pattern.length; i++) {
    const c = pattern[i]!;
    if (c !== '\\') {
      out += c;
      continue;
    }
    const next = pattern[i + 1] ?? '';
    const hex4 = /^[0-9A-Fa-f]{4}/.exec(pattern.slice(i + 2, i + 6));
    const braced = next === 'u' ? /^\{([0-9A-Fa-f]{1,6})\}/.exec(pattern.slice(i + 2, i + 10)) : null;
    if (next === 'u' && braced) {
      out += `\\x{${braced[1]}}`;
      i += 1 + braced[0].length;
    } else if (next === 'u' && hex4) {
      out += `\\x{${hex4[0]}}`;
      i += 5;
    } else {
      out += c + next;
      i++;
    }
  }
  return out;
}

/** Why RE2 refuses a pattern, in words a schema author can act on. */
function reason(pattern: string, err: unknown): string {
  if (/\(\?<?[=!]|\\[1-9]|\\k</.test(pattern)) return UNSUPPORTED_PATTERN;
  return `does not compile: ${(err as Error).message}`;
}

/** The compiled pattern, or the reason RE2 refuses it. */
function attempt(pattern: string): RE2JS | string {
  try {
    return RE2JS.compile(toRe2(pattern));
  } catch (err) {
    return reason(pattern, err);
  }
}

/** A compiled user pattern; throws an Error whose message says why a pattern is refused. */
function compileLinear(pattern: string): RE2JS {
  const re = attempt(pattern);
  if (typeof re === 'string') throw new Error(`pattern ${JSON.stringify(pattern)} ${re}.`);
  return re;
}

/** The reason a pattern cannot be used (undefined when it can), for schema validation messages. */
export function patternProblem(pattern: string): string | undefined {
  const re = attempt(pattern);
  return typeof re === 'string' ? re : undefined;
}

/**
 * Ajv's `code.regExp` for every Ajv instance that compiles user-written schemas. Ajv shares
 * compiled patterns by their `toString()`, so it must name the pattern.
 */
export const linearRegExp: RegExpEngine = Object.assign(
  (pattern: string) => {
    const re = compileLinear(pattern);
    return { test: (s: string) => re.matcher(s).find(), toString: () => `re2:${pattern}` };
  },
  { code: 'linearRegExp' },
);

/** The longest pattern `linearMatcher` compiles (compiling is linear in the pattern, but not free). */
export const MAX_MATCHER_PATTERN_LENGTH = 1000;
/** How many compiled patterns `linearMatcher` keeps (the oldest goes first). */
const MATCHER_CACHE_SIZE = 500;

/** A compiled pattern: `test` searches (unanchored); `size` is its program's size, the work per input character. */
export interface LinearMatcher {
  test(s: string): boolean;
  size: number;
}

const matchers = new Map<string, LinearMatcher | string>();

/** RE2's program size (re2js keeps it as `re2Input.prog.inst`; 1 if that ever moves). */
const programSize = (re: RE2JS): number => (re as unknown as { re2Input?: { prog?: { inst?: unknown[] } } }).re2Input?.prog?.inst?.length ?? 1;

/**
 * The matcher of a pattern met at run time (CEL `matches()`), compiled once and cached (bounded);
 * throws an Error saying why a pattern is refused (RE2 refuses it, or it is longer than
 * MAX_MATCHER_PATTERN_LENGTH). Refusals are cached too. `onCompile` is told of each compilation
 * (a cost the caller may account for).
 */
export function linearMatcher(pattern: string, onCompile?: (pattern: string) => void): LinearMatcher {
  if (pattern.length > MAX_MATCHER_PATTERN_LENGTH) throw new Error(`pattern ${JSON.stringify(pattern.slice(0, 100))}… is longer than ${MAX_MATCHER_PATTERN_LENGTH} characters.`); // (not cached: the cache holds short keys only)
  let m = matchers.get(pattern);
  if (m === undefined) {
    onCompile?.(pattern);
    const re = attempt(pattern);
    m = typeof re === 'string' ? re : { test: (s: string) => re.matcher(s).find(), size: programSize(re) };
    if (matchers.size >= MATCHER_CACHE_SIZE) matchers.delete(matchers.keys().next().value!);
    matchers.set(pattern, m);
  }
  if (typeof m === 'string') throw new Error(`pattern ${JSON.stringify(pattern.slice(0, 100))} ${m}.`);
  return m;
}

/** Why `linearMatcher` would refuse a pattern (undefined when it accepts it), for write-time messages. */
export function matcherProblem(pattern: string): string | undefined {
  return pattern.length > MAX_MATCHER_PATTERN_LENGTH ? `is longer than ${MAX_MATCHER_PATTERN_LENGTH} characters` : patternProblem(pattern);
}
