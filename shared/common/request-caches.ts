// What a request needs besides its data, kept in process memory (docs/architecture.md "Caches"):
// the token's user with its auth state, and the site's table definitions with their compiled SQL.
// One ChangeListener per server process drops entries when a change commits (triggers notify
// inside the changing transaction: db/migrations, tenancy/migrations); without a listener
// (the CLI's direct mode) nothing is kept and every lookup reads the database.
import type { ChangeListener } from '../db/changes.ts';
import type { UserAuth } from '../auth/auth.service.ts';
import type { CachedTable } from '../data/records/target.ts';
import type { DomainError } from '../errors.ts';
import { CachedLookup } from './cached-lookup.ts';

export interface RequestCaches {
  /** `{tenant}|{user uuid}` → the user's auth state (null: no such user). */
  users: CachedLookup<UserAuth | null>;
  /** `{schema}|{app}|{data source}|{table}` → the table's definition, or the 404 of a missing app, data source or table. */
  tables: CachedLookup<CachedTable | DomainError>;
  /** Resolves once the changes committed so far have reached these caches (ChangeListener.settled; at once without a listener). */
  settled(): Promise<void>;
}

const NOT_LISTENING = { listening: false } as const;

export function requestCaches(listener?: ChangeListener): RequestCaches {
  const options = { listener: listener ?? NOT_LISTENING };
  const users = new CachedLookup<UserAuth | null>(options);
  const tables = new CachedLookup<CachedTable | DomainError>(options);
  listener
    // A platform user's change reaches its linked site users too (their standing follows it).
    ?.on('auth', (uuid) => (uuid === null ? users.clear() : users.drop((key, auth) => key.endsWith(`|${uuid}`) || auth?.linked === uuid)))
    .on('tables', (schema) => tables.clear(schema === null ? undefined : `${schema}|`))
    // A site deactivated, moved or deleted: its users and tables go with it.
    .on('routing', () => {
      users.clear();
      tables.clear();
    });
  return { users, tables, settled: async () => listener?.settled() };
}
