// What a request needs besides its data, kept in process memory (docs/architecture.md "Caches"):
// the token's user with its auth state, the site's table definitions with their compiled SQL, and
// its functions (what an invocation's decision needs, not their code).
// One ChangeListener per server process drops entries when a change commits (triggers notify
// inside the changing transaction: db/migrations, tenancy/migrations); without a listener
// (the CLI's direct mode) nothing is kept and every lookup reads the database.
import type { ChangeListener } from '../db/changes.ts';
import type { UserAuth } from '../auth/auth.service.ts';
import type { CachedTable } from '../data/records/target.ts';
import type { DomainError } from '../errors.ts';
import type { CachedFunction } from '../functions/function.service.ts';
import type { PolicySet, Formula } from '../policies/engine.ts';
import type { Principal } from '../policies/model.ts';
import { CachedLookup } from './cached-lookup.ts';

export interface RequestCaches {
  /** `{tenant}|{user uuid}` → the user's auth state (null: no such user). */
  users: CachedLookup<UserAuth | null>;
  /** `{schema}|{app}|{data source}|{table}` → the table's definition, or the 404 of a missing app, data source or table. */
  tables: CachedLookup<CachedTable | DomainError>;
  /** `{schema}|{app}|{function slug}` → the function (without its code) and its app, or the 404 of a missing app or function. */
  functions: CachedLookup<CachedFunction | DomainError>;
  /** `{schema}|{app id}` → the app's compiled policies. */
  policies: CachedLookup<PolicySet>;
  /** `{schema}|{app id}|{user uuid}` → the user as a principal of the app (roles, attributes). */
  principals: CachedLookup<Principal>;
  /** `{schema}|{app id}|{kind}|{action}|{principal}` → a query plan (5 minutes, spec Part 2 §8). */
  plans: CachedLookup<Formula>;
  /** Resolves once the changes committed so far have reached these caches (ChangeListener.settled; at once without a listener). */
  settled(): Promise<void>;
}

const NOT_LISTENING = { listening: false } as const;

export function requestCaches(listener?: ChangeListener): RequestCaches {
  const options = { listener: listener ?? NOT_LISTENING };
  const users = new CachedLookup<UserAuth | null>(options);
  const tables = new CachedLookup<CachedTable | DomainError>(options);
  const functions = new CachedLookup<CachedFunction | DomainError>(options);
  const policies = new CachedLookup<PolicySet>(options);
  const principals = new CachedLookup<Principal>(options);
  const plans = new CachedLookup<Formula>({ ...options, ttlMs: 5 * 60_000 });
  const dropPolicies = (schema: string | null) => {
    const prefix = schema === null ? undefined : `${schema}|`;
    for (const c of [policies, principals, plans]) c.clear(prefix);
  };
  listener
    // A platform user's change reaches its linked site users too (their standing follows it).
    ?.on('auth', (uuid) => {
      if (uuid === null) users.clear();
      else users.drop((key, auth) => key.endsWith(`|${uuid}`) || auth?.linked === uuid);
      // a user's attributes are part of its principal (and of the plans keyed by them)
      if (uuid === null) principals.clear();
      else principals.drop((key) => key.endsWith(`|${uuid}`));
    })
    .on('policies', dropPolicies)
    // The site's apps are among the `tables` changes: its functions' entries name their app.
    .on('tables', (schema) => {
      for (const c of [tables, functions]) c.clear(schema === null ? undefined : `${schema}|`);
    })
    .on('functions', (schema) => functions.clear(schema === null ? undefined : `${schema}|`))
    // A site deactivated, moved or deleted: its users, tables and functions go with it.
    .on('routing', () => {
      users.clear();
      tables.clear();
      functions.clear();
      dropPolicies(null);
    });
  return { users, tables, functions, policies, principals, plans, settled: async () => listener?.settled() };
}
