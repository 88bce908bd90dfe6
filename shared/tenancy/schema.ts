// The per-tenant schema mechanism. Control-plane entities live in `public`; tenant-owned
// entities are declared with `schema: '*'` and are only ever used through an
// EntityManager forked for one site's schema — created here and nowhere else.
import type { EntityManager } from '@mikro-orm/postgresql';
import { DomainError } from '../errors.ts';

/** A PostgreSQL schema name we accept for a tenant: lowercase letters, digits, underscores. */
export const SCHEMA_NAME_RE = /^[a-z_][a-z0-9_]{0,62}$/;
const RESERVED = new Set(['public', 'information_schema']);

export function isValidSchemaName(name: string): boolean {
  return SCHEMA_NAME_RE.test(name) && !RESERVED.has(name) && !name.startsWith('pg_');
}

export function assertSchemaName(name: string): string {
  if (!isValidSchemaName(name)) {
    throw new DomainError('VALIDATION_ERROR', 'Invalid schema name.', {
      errors: { schema_name: ['Must start with a letter or underscore and contain only lowercase letters, digits and underscores (at most 63); public, information_schema and pg_* are reserved.'] },
    });
  }
  return name;
}

/** An EntityManager whose wildcard-schema entities resolve to `schema`. */
export function tenantEm(em: EntityManager, schema: string): EntityManager {
  return em.fork({ schema: assertSchemaName(schema) });
}

/** Quotes a validated schema name for DDL (CREATE/DROP SCHEMA); never takes raw request text. */
export function quotedSchema(schema: string): string {
  return `"${assertSchemaName(schema)}"`;
}
