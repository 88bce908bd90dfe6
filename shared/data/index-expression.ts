// The SQL fragment grammar of index `expression` and `where` (docs/data-tables.md):
//   expr    := and ( OR and )*
//   and     := not ( AND not )*
//   not     := NOT not | cmp
//   cmp     := operand [ ( = | <> | != | < | > | <= | >= ) operand | IS [NOT] NULL ]
//   operand := field | literal | ( lower | upper | coalesce ) '(' expr { ',' expr } ')' | '(' expr ')'
//   literal := number | 'text' ('' doubles a quote) | TRUE | FALSE | NULL
// Anything else is refused. The fragment is re-emitted from its tokens with every field
// name quoted, so what reaches PostgreSQL is exactly what the grammar allows.
import { quoteIdent } from '../db/sql.ts';

const show = (v: unknown) => JSON.stringify(v);

interface Tok { kind: 'ident' | 'num' | 'str' | 'op' | 'punct'; text: string }
const FUNCS = new Set(['lower', 'upper', 'coalesce']);
const KEYWORDS = new Set(['and', 'or', 'not', 'is', 'null', 'true', 'false']);

function tokenize(src: string): Tok[] {
  const out: Tok[] = [];
  let i = 0;
  while (i < src.length) {
    const c = src[i]!;
    if (/\s/.test(c)) { i++; continue; }
    const rest = src.slice(i);
    let m: RegExpMatchArray | null;
    if ((m = rest.match(/^[A-Za-z_][A-Za-z0-9_]*/))) out.push({ kind: 'ident', text: m[0] });
    else if ((m = rest.match(/^\d+(?:\.\d+)?/))) out.push({ kind: 'num', text: m[0] });
    else if ((m = rest.match(/^'(?:[^'\0\\]|'')*'/))) out.push({ kind: 'str', text: m[0] });
    else if ((m = rest.match(/^(?:<=|>=|<>|!=|=|<|>)/))) out.push({ kind: 'op', text: m[0] });
    else if (c === '(' || c === ')' || c === ',') out.push({ kind: 'punct', text: c });
    else throw new Error(`unexpected character ${show(c)} at position ${i}`);
    i += m ? m[0].length : 1;
  }
  return out;
}

/** Parses a fragment of the grammar above; returns its SQL with field names quoted (and adds them to `used`), or throws. */
export function compileFragment(src: string, fields: ReadonlySet<string>, used?: Set<string>): string {
  if (src.length > 1000) throw new Error('is longer than 1000 characters');
  const toks = tokenize(src);
  let p = 0;
  const peek = () => toks[p];
  const word = (t: Tok | undefined, w: string) => t?.kind === 'ident' && t.text.toLowerCase() === w;
  const expect = (text: string) => {
    if (peek()?.text !== text) throw new Error(`expected ${show(text)}${peek() ? ` before ${show(peek()!.text)}` : ' at the end'}`);
    p++;
  };
  const operand = (): string => {
    const t = toks[p++];
    if (!t) throw new Error('ends unexpectedly');
    if (t.kind === 'num' || t.kind === 'str') return t.text;
    if (t.kind === 'punct' && t.text === '(') { const e = expr(); expect(')'); return `(${e})`; }
    if (t.kind === 'ident') {
      const lower = t.text.toLowerCase();
      if (lower === 'true' || lower === 'false' || lower === 'null') return lower.toUpperCase();
      if (FUNCS.has(lower) && peek()?.text === '(') {
        p++;
        const args = [expr()];
        while (peek()?.text === ',') { p++; args.push(expr()); }
        expect(')');
        return `${lower}(${args.join(', ')})`;
      }
      if (KEYWORDS.has(lower)) throw new Error(`unexpected ${show(t.text)}`);
      if (!fields.has(t.text)) throw new Error(`${show(t.text)} is not a field of the table (allowed functions: lower, upper, coalesce)`);
      used?.add(t.text);
      return quoteIdent(t.text);
    }
    throw new Error(`unexpected ${show(t.text)}`);
  };
  const cmp = (): string => {
    const left = operand();
    const t = peek();
    if (t?.kind === 'op') { p++; return `${left} ${t.text === '!=' ? '<>' : t.text} ${operand()}`; }
    if (word(t, 'is')) {
      p++;
      let not = '';
      if (word(peek(), 'not')) { p++; not = ' NOT'; }
      if (!word(peek(), 'null')) throw new Error('IS must be followed by [NOT] NULL');
      p++;
      return `${left} IS${not} NULL`;
    }
    return left;
  };
  const not = (): string => (word(peek(), 'not') ? (p++, `NOT ${not()}`) : cmp());
  const and = (): string => { let s = not(); while (word(peek(), 'and')) { p++; s = `${s} AND ${not()}`; } return s; };
  function expr(): string { let s = and(); while (word(peek(), 'or')) { p++; s = `${s} OR ${and()}`; } return s; }
  if (!toks.length) throw new Error('is empty');
  const sql = expr();
  if (p < toks.length) throw new Error(`unexpected ${show(toks[p]!.text)}`);
  return sql;
}
