import { fieldError } from '../errors.ts';
import { StringEnum } from './validation.ts';
// Small helpers for list filters shared by every resource.

/** The values of a boolean list filter: `true`/`1`, `false`/`0`, `all`/`*` (read by boolFilter). */
export const BOOL_PARAM_VALUES = ['true', '1', 'false', '0', 'all', '*'] as const;

/** A boolean query parameter of a list (boolFilter reads it). */
export const BoolParam = StringEnum(BOOL_PARAM_VALUES);

/** `true`/`1` → true, `false`/`0` → false, `all`/`*` → undefined (no filter); absent → the default. */
export function boolFilter(value: string | undefined, def: boolean | undefined): boolean | undefined {
  if (value === undefined || value === '') return def;
  if (value === 'true' || value === '1') return true;
  if (value === 'false' || value === '0') return false;
  return undefined;
}

/** Escapes LIKE/ILIKE wildcards so user text matches literally (backslash: PostgreSQL's default ESCAPE character). */
export const likeEscape = (text: string): string => text.replace(/[\\%_]/g, (c) => `\\${c}`);

/**
 * `ordering=name,-created` → an ORM orderBy over allowed fields only (an unknown field is a
 * 400 naming it). `fields` maps the public name to the entity property.
 */
export function ordering(value: string | undefined, fields: Record<string, string>, fallback: string): Record<string, 'asc' | 'desc'> {
  const out: Record<string, 'asc' | 'desc'> = {};
  for (const part of (value || fallback).split(',').map((s) => s.trim()).filter(Boolean)) {
    const desc = part.startsWith('-');
    const name = desc ? part.slice(1) : part;
    const prop = Object.hasOwn(fields, name) ? fields[name] : undefined; // never a prototype key (`constructor`)
    if (!prop) throw fieldError('ordering', `Unknown ordering field "${name}". Use one of: ${Object.keys(fields).join(', ')} (prefix - for descending).`);
    out[prop] = desc ? 'desc' : 'asc';
  }
  return out;
}
