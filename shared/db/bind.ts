// SQL with `?` placeholders (the form the ORM and our SQL fragments are written in) turned into
// PostgreSQL's numbered parameters: the values travel as protocol parameters ($1, $2, …), never in
// the SQL text, so no escaping is involved and the server can keep a statement's plan.
//
// The placeholder grammar is the ORM's own (MikroORM's Platform.formatQuery), so that its
// generated SQL means the same: `?` is a value, `??` an identifier (quoted into the text: names
// come from the ORM's metadata, never from a request), `\?` a literal question mark (PostgreSQL's
// jsonb `?` operator). An array value is a list (`IN (?)` → `IN ($1, $2)`), a plain object is sent
// as its JSON text, and a raw fragment (`raw('now()')`) is part of the statement.
import { isRaw, JsonProperty } from '@mikro-orm/core';

export interface BoundQuery {
  text: string;
  values: unknown[];
}

const quoteIdentifier = (id: unknown): string => `"${String(id).replaceAll('"', '""').replace('.', '"."')}"`;

function isPlainObject(value: unknown): value is Record<string, unknown> {
  if (value === null || typeof value !== 'object') return false;
  const proto = Object.getPrototypeOf(value);
  return proto === Object.prototype || proto === null;
}

/** One value's placeholder(s); its value(s) go to `values`. */
function placeholder(value: unknown, values: unknown[]): string {
  if (isRaw(value)) return bindInto(value.sql, value.params ?? [], values);
  // A JSON property's value (the ORM marks it) is one JSON text, even when it is an array.
  if (isPlainObject(value) || (value as { [JsonProperty]?: unknown } | null)?.[JsonProperty]) value = JSON.stringify(value);
  else if (Array.isArray(value)) return value.map((v) => placeholder(v, values)).join(', ');
  else if (typeof value === 'bigint') value = value.toString();
  else if (value === undefined) value = null;
  values.push(value);
  return `$${values.length}`;
}

function bindInto(sql: string, params: readonly unknown[], values: unknown[]): string {
  if (!params.length && !sql.includes('\\?')) return sql;
  let out = '';
  let from = 0;
  let j = 0;
  for (let at = sql.indexOf('?'); at !== -1; at = sql.indexOf('?', from)) {
    if (at > 0 && sql[at - 1] === '\\') {
      out += `${sql.slice(from, at - 1)}?`;
      from = at + 1;
    } else if (sql[at + 1] === '?') {
      out += sql.slice(from, at) + quoteIdentifier(params[j++]);
      from = at + 2;
    } else {
      if (j >= params.length) throw new Error(`SQL has more placeholders than the ${params.length} values given.`);
      out += sql.slice(from, at) + placeholder(params[j++], values);
      from = at + 1;
    }
  }
  if (j !== params.length) throw new Error(`SQL has ${j} placeholders for ${params.length} values.`);
  return out + sql.slice(from);
}

/** `?` placeholders → `$n`, with the values to send beside the text. */
export function bind(sql: string, params: readonly unknown[] = []): BoundQuery {
  const values: unknown[] = [];
  return { text: bindInto(sql, params, values), values };
}
