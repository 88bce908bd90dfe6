// User-written regular expressions (JSON Schema `pattern` and `patternProperties` of secret
// types, Frictionless `constraints.pattern` of data tables) run on RE2 (the re2js port): the
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
