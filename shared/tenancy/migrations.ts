// Tenant schema migrations: one versioned set applied to every site schema. Each migration
// runs in its own transaction together with the bump of the schema's version in
// `public.tenant_schemas`, under a per-schema advisory lock: applying is idempotent,
// concurrent runs serialise, and a failure leaves the schema at the last good version
// (the next `platform migrate` resumes there). Statements are unqualified: the transaction
// sets `search_path` to the (validated, quoted) schema.
import { clustersOf, prepareClusters, PRIMARY_CLUSTER } from '../db/clusters.ts';
import type { EntityManager } from '@mikro-orm/postgresql';
import { describeError } from '../db/errors.ts';
import { setLocalStatementTimeout } from '../db/statement-timeout.ts';
import { quotedSchema } from './schema.ts';

export interface TenantMigration {
  version: number;
  name: string;
  statements: string[];
}

/**
 * The functions that keep the system policies of data tables (migration 6) and of functions and
 * buckets (migration 11), writing policy ids with `idVersion` after the kind: `vdefault`
 * (Cerbos' form, migrations 6 and 11), `default` (the spec's, migration 12).
 */
const datatableSystemPolicies = (idVersion: string) => `CREATE OR REPLACE FUNCTION datatable_system_policies(site text, app integer, app_slug text, tbl text) RETURNS void LANGUAGE plpgsql AS $fn$
      DECLARE
        kind text := 'datatable:' || tbl;
        scope text := site || '_' || app_slug;
        ident text := 'resource.datatable_' || tbl || '.${idVersion}';
        rule jsonb;
      BEGIN
        rule := jsonb_build_object('name', 'system-deny-all', 'actions', jsonb_build_array('*'), 'effect', 'EFFECT_DENY', 'roles', jsonb_build_array('*'));
        EXECUTE format('INSERT INTO %I.policies (id, app_id, kind, name, scope, document, is_system) VALUES ($1, NULL, ''resource'', $2, '''', $3, true) ON CONFLICT (id) DO NOTHING', site)
          USING ident, kind, jsonb_build_object('apiVersion', 'api.cerbos.dev/v1', 'resourcePolicy', jsonb_build_object('resource', kind, 'version', 'default', 'rules', jsonb_build_array(rule)));
        rule := jsonb_build_object('name', 'system-allow-all', 'actions', jsonb_build_array('*'), 'effect', 'EFFECT_ALLOW', 'roles', jsonb_build_array('*'));
        EXECUTE format('INSERT INTO %I.policies (id, app_id, kind, name, scope, document, is_system) VALUES ($1, $2, ''resource'', $3, $4, $5, true) ON CONFLICT (id) DO NOTHING', site)
          USING ident || '/' || scope, app, kind, scope,
                jsonb_build_object('apiVersion', 'api.cerbos.dev/v1', 'resourcePolicy', jsonb_build_object('resource', kind, 'version', 'default', 'scope', scope, 'rules', jsonb_build_array(rule)));
      END $fn$`;
const systemPoliciesFollow = (idVersion: string) => `CREATE OR REPLACE FUNCTION system_policies_follow() RETURNS trigger LANGUAGE plpgsql AS $fn$
      DECLARE
        site text := TG_TABLE_SCHEMA;
        rule jsonb;
        kind text;
        scope text;
        ident text;
      BEGIN
        IF TG_OP = 'INSERT' THEN
          kind := TG_ARGV[0] || ':' || NEW.slug;
          ident := 'resource.' || TG_ARGV[0] || '_' || NEW.slug || '.${idVersion}';
          EXECUTE format('SELECT slug FROM %I.apps WHERE id = $1', site) INTO scope USING NEW.app_id;
          scope := site || '_' || scope;
          rule := jsonb_build_object('name', 'system-deny-all', 'actions', jsonb_build_array('*'), 'effect', 'EFFECT_DENY', 'roles', jsonb_build_array('*'));
          EXECUTE format('INSERT INTO %I.policies (id, app_id, kind, name, scope, document, is_system) VALUES ($1, NULL, ''resource'', $2, '''', $3, true) ON CONFLICT (id) DO NOTHING', site)
            USING ident, kind, jsonb_build_object('apiVersion', 'api.cerbos.dev/v1', 'resourcePolicy', jsonb_build_object('resource', kind, 'version', 'default', 'rules', jsonb_build_array(rule)));
          rule := jsonb_build_object('name', 'system-allow-all', 'actions', jsonb_build_array('*'), 'effect', 'EFFECT_ALLOW', 'roles', jsonb_build_array('*'));
          EXECUTE format('INSERT INTO %I.policies (id, app_id, kind, name, scope, document, is_system) VALUES ($1, $2, ''resource'', $3, $4, $5, true) ON CONFLICT (id) DO NOTHING', site)
            USING ident || '/' || scope, NEW.app_id, kind, scope,
                  jsonb_build_object('apiVersion', 'api.cerbos.dev/v1', 'resourcePolicy', jsonb_build_object('resource', kind, 'version', 'default', 'scope', scope, 'rules', jsonb_build_array(rule)));
        ELSE
          kind := TG_ARGV[0] || ':' || OLD.slug;
          EXECUTE format('DELETE FROM %I.policies WHERE app_id = $1 AND kind = ''resource'' AND name = $2', site) USING OLD.app_id, kind;
          EXECUTE format('DELETE FROM %I.policies p WHERE p.app_id IS NULL AND p.kind = ''resource'' AND p.name = $1
                           AND NOT EXISTS (SELECT 1 FROM %I.policies o WHERE o.kind = ''resource'' AND o.name = $1 AND o.app_id IS NOT NULL)', site, site)
            USING kind;
        END IF;
        RETURN NULL;
      END $fn$`;

/** Advisory lock namespace of change log writers (realtime/changelog.ts reads its holders). */
export const RECORD_CHANGES_LOCK = 0x52435447;

/**
 * The most rows of one statement in one entry of the change log, and the factor of an entry's
 * number in the positions of its changes: the change at index i (from 0) of entry `seq` is at
 * position `seq * RECORD_CHANGES_CHUNK + i`.
 */
export const RECORD_CHANGES_CHUNK = 1000;

/**
 * The change log (migrations 16 and 17; realtime/changelog.ts): one entry per statement and table
 * (per RECORD_CHANGES_CHUNK rows of a larger statement), numbered by the table's own sequence, its
 * rows as two aligned json arrays (`record`, the new rows; `old`, the old ones: a create has no
 * old row, a delete no new one; json null where a row has none), compressed with lz4 where the
 * server has it (a bulk create's 10,000 rows are ten values, not 10,000 tuples and index entries:
 * the log's trigger took 67 ms of a 10,000-row insert as a row per change, 25–45 ms as entries).
 */
const RECORD_CHANGES_TABLE = [
  `CREATE TABLE IF NOT EXISTS record_changes (
        tbl text NOT NULL,
        seq bigint NOT NULL,
        n integer NOT NULL,
        record json,
        old json,
        actor uuid,
        at timestamptz NOT NULL,
        PRIMARY KEY (tbl, seq)
      )`,
  `DO $do$ BEGIN
        ALTER TABLE record_changes ALTER COLUMN record SET COMPRESSION lz4, ALTER COLUMN old SET COMPRESSION lz4;
      EXCEPTION WHEN feature_not_supported THEN NULL; -- a server built without lz4 keeps pglz
      END $do$`,
];

/**
 * The change log's functions (realtime/changelog.ts). `record_changes_attach` logs one table:
 * its own entry sequence (dropped with it), a trigger function of its own
 * written with the table's names in it (static SQL: PostgreSQL plans its statements once per
 * session; a function shared by every table would have to build them each time, EXECUTE, which
 * cost a single-row write 30 % instead of 17 %), and its three statement-level triggers. One
 * statement per write (per RECORD_CHANGES_CHUNK rows: a window or a sort to number the rows cost
 * a single-row write more) over its transition tables: the rows get the next entry number, as
 * json (text: cheaper to write than jsonb, read once per process), the new ones and the old ones
 * (an update that changes the key is the old row deleted and the new one created). Before it
 * takes a number, the writer takes a shared advisory lock on its table (an expression, not a
 * statement: the try form never waits, nobody takes the lock exclusively) held until it ends, so
 * that a reader can tell a gap that a transaction still in flight may fill from one a rollback
 * left. The acting user is the transaction's `platform.actor` setting, when set.
 * No NOTIFY: PostgreSQL serialises the commits of notifying transactions (a lock on the queue
 * until the commit is flushed), which halved the rate of concurrent writes; the servers announce
 * data writes after they commit (realtime/announce.ts). The functions name their schema:
 * `record_changes_reattach` writes them again after the schema is renamed (a restore under
 * another name), `record_changes_detach` removes a dropped table's.
 */
const RECORD_CHANGES_FUNCTIONS = [
  `CREATE OR REPLACE FUNCTION record_changes_attach(site text, tbl text, keys text[]) RETURNS void LANGUAGE plpgsql AS $fn$
      DECLARE
        seq text := left(tbl || '_changes', 63);
        fn text := left(tbl || '_log_changes', 63);
        log text := format('%I.record_changes', site);
        entry text := format('nextval(%L::regclass)', format('%I.%I', site, seq));
        who text := $w$nullif(current_setting('platform.actor', true), '')::uuid$w$;
        joined text := (SELECT string_agg(format('n.%1$I = o.%1$I', k), ' AND ') FROM unnest(keys) AS k);
        op text;
      BEGIN
        EXECUTE format('CREATE SEQUENCE IF NOT EXISTS %I.%I OWNED BY %I.%I.%I', site, seq, site, tbl, keys[1]);
        -- The lock, the actor and the time once per statement, not per row; the variables win over a column of the same name, c.* and n.*::type are the rows whatever the columns are named (a side an update's full join left empty has a null key).
        EXECUTE format($body$CREATE OR REPLACE FUNCTION %I.%I() RETURNS trigger LANGUAGE plpgsql AS $log$
          #variable_conflict use_variable
          DECLARE
            log_locked boolean := pg_try_advisory_xact_lock_shared((${RECORD_CHANGES_LOCK}::bigint << 32) | TG_RELID::bigint);
            log_who uuid := %6$s;
            log_at timestamptz := clock_timestamp();
            log_from bigint := 0;
            log_n integer;
          BEGIN
            IF NOT log_locked THEN
              PERFORM pg_advisory_xact_lock_shared((${RECORD_CHANGES_LOCK}::bigint << 32) | TG_RELID::bigint);
            END IF;
            -- An entry per ${RECORD_CHANGES_CHUNK} rows, while the last one was full.
            LOOP
              IF TG_OP = 'INSERT' THEN
                INSERT INTO %3$s (tbl, seq, n, record, actor, at)
                  SELECT %4$L, %5$s, count(*), json_agg(c.*), log_who, log_at
                    FROM (SELECT * FROM new_rows OFFSET log_from LIMIT ${RECORD_CHANGES_CHUNK}) c HAVING count(*) > 0
                  RETURNING n INTO log_n;
              ELSIF TG_OP = 'DELETE' THEN
                INSERT INTO %3$s (tbl, seq, n, old, actor, at)
                  SELECT %4$L, %5$s, count(*), json_agg(c.*), log_who, log_at
                    FROM (SELECT * FROM old_rows OFFSET log_from LIMIT ${RECORD_CHANGES_CHUNK}) c HAVING count(*) > 0
                  RETURNING n INTO log_n;
              ELSE
                INSERT INTO %3$s (tbl, seq, n, record, old, actor, at)
                  SELECT %4$L, %5$s, count(*), json_agg(c.n), json_agg(c.o), log_who, log_at
                    FROM (SELECT CASE WHEN n.%8$I IS NOT NULL THEN n.*::%1$I.%4$I END AS n, CASE WHEN o.%8$I IS NOT NULL THEN o.*::%1$I.%4$I END AS o
                            FROM new_rows n FULL JOIN old_rows o ON %7$s OFFSET log_from LIMIT ${RECORD_CHANGES_CHUNK}) c HAVING count(*) > 0
                  RETURNING n INTO log_n;
              END IF;
              EXIT WHEN log_n IS DISTINCT FROM ${RECORD_CHANGES_CHUNK};
              log_from := log_from + ${RECORD_CHANGES_CHUNK};
            END LOOP;
            RETURN NULL;
          END $log$$body$, site, fn, log, tbl, entry, who, joined, keys[1]);
        FOREACH op IN ARRAY ARRAY['INSERT', 'UPDATE', 'DELETE'] LOOP
          EXECUTE format('CREATE OR REPLACE TRIGGER %I AFTER %s ON %I.%I REFERENCING %s FOR EACH STATEMENT EXECUTE FUNCTION %I.%I()',
            'record_changes_' || lower(op), op, site, tbl,
            CASE op WHEN 'INSERT' THEN 'NEW TABLE AS new_rows' WHEN 'DELETE' THEN 'OLD TABLE AS old_rows' ELSE 'OLD TABLE AS old_rows NEW TABLE AS new_rows' END,
            site, fn);
        END LOOP;
        EXECUTE format('INSERT INTO %I.record_changes_tables (tbl, keys) VALUES ($1, $2) ON CONFLICT (tbl) DO UPDATE SET keys = EXCLUDED.keys', site) USING tbl, keys;
      END $fn$`,
  `CREATE OR REPLACE FUNCTION record_changes_detach(site text, tbl text) RETURNS void LANGUAGE plpgsql AS $fn$
      BEGIN
        EXECUTE format('DROP FUNCTION IF EXISTS %I.%I() CASCADE', site, left(tbl || '_log_changes', 63));
        EXECUTE format('DELETE FROM %I.record_changes WHERE tbl = $1', site) USING tbl;
        EXECUTE format('DELETE FROM %I.record_changes_tables WHERE tbl = $1', site) USING tbl;
      END $fn$`,
  `CREATE OR REPLACE FUNCTION record_changes_reattach(site text) RETURNS void LANGUAGE plpgsql AS $fn$
      DECLARE
        r record;
      BEGIN
        FOR r IN EXECUTE format('SELECT tbl, keys FROM %I.record_changes_tables ORDER BY tbl', site) LOOP
          EXECUTE format('SELECT %I.record_changes_attach($1, $2, $3)', site) USING site, r.tbl, r.keys;
        END LOOP;
      END $fn$`,
];

export const tenantMigrations: TenantMigration[] = [
  {
    version: 1,
    name: 'identity',
    statements: [
      `CREATE TABLE users (
        uuid uuid PRIMARY KEY,
        username varchar(150) NOT NULL,
        email varchar(254) NOT NULL DEFAULT '',
        first_name varchar(150) NOT NULL DEFAULT '',
        last_name varchar(150) NOT NULL DEFAULT '',
        password varchar(255),
        platform_user_uuid uuid UNIQUE,
        is_active boolean NOT NULL DEFAULT true,
        is_deleted boolean NOT NULL DEFAULT false,
        is_staff boolean NOT NULL DEFAULT false,
        is_superuser boolean NOT NULL DEFAULT false,
        token_generation integer NOT NULL DEFAULT 0,
        date_joined timestamptz NOT NULL DEFAULT now(),
        modified timestamptz NOT NULL DEFAULT now(),
        last_login timestamptz
      )`,
      'CREATE UNIQUE INDEX users_username_key ON users (lower(username))',
      `CREATE UNIQUE INDEX users_email_key ON users (lower(email)) WHERE email <> '' AND NOT is_deleted`,
      `CREATE TABLE permissions (
        id serial PRIMARY KEY,
        codename varchar(100) NOT NULL UNIQUE,
        name varchar(255) NOT NULL,
        model varchar(50) NOT NULL
      )`,
      `CREATE TABLE groups (
        id serial PRIMARY KEY,
        name varchar(150) NOT NULL,
        created timestamptz NOT NULL DEFAULT now()
      )`,
      'CREATE UNIQUE INDEX groups_name_key ON groups (lower(name))',
      `CREATE TABLE group_permissions (
        group_id integer NOT NULL REFERENCES groups (id) ON DELETE CASCADE,
        permission_id integer NOT NULL REFERENCES permissions (id) ON DELETE CASCADE,
        PRIMARY KEY (group_id, permission_id)
      )`,
      `CREATE TABLE user_groups (
        user_uuid uuid NOT NULL REFERENCES users (uuid) ON DELETE CASCADE,
        group_id integer NOT NULL REFERENCES groups (id) ON DELETE CASCADE,
        PRIMARY KEY (user_uuid, group_id)
      )`,
      `CREATE TABLE user_permissions (
        user_uuid uuid NOT NULL REFERENCES users (uuid) ON DELETE CASCADE,
        permission_id integer NOT NULL REFERENCES permissions (id) ON DELETE CASCADE,
        PRIMARY KEY (user_uuid, permission_id)
      )`,
      `CREATE TABLE tags (
        id serial PRIMARY KEY,
        name varchar(100) NOT NULL,
        slug varchar(100) NOT NULL UNIQUE,
        created timestamptz NOT NULL DEFAULT now()
      )`,
      `CREATE TABLE token_blacklist (
        jti uuid PRIMARY KEY,
        user_uuid uuid NOT NULL REFERENCES users (uuid) ON DELETE CASCADE,
        expires_at timestamptz NOT NULL,
        blacklisted_at timestamptz NOT NULL DEFAULT now()
      )`,
    ],
  },
  {
    version: 2,
    name: 'secrets',
    statements: [
      `CREATE TABLE secret_types (
        uuid uuid PRIMARY KEY,
        slug varchar(100) NOT NULL UNIQUE,
        name varchar(255) NOT NULL,
        description text NOT NULL DEFAULT '',
        json_schema jsonb NOT NULL DEFAULT '{}',
        created timestamptz NOT NULL DEFAULT now(),
        modified timestamptz NOT NULL DEFAULT now()
      )`,
      `CREATE TABLE secrets (
        uuid uuid PRIMARY KEY,
        key varchar(255) NOT NULL,
        app_slug varchar(100),
        secret_type_uuid uuid REFERENCES secret_types (uuid) ON DELETE RESTRICT,
        description text NOT NULL DEFAULT '',
        ciphertext text NOT NULL,
        key_version integer NOT NULL DEFAULT 1,
        created timestamptz NOT NULL DEFAULT now(),
        modified timestamptz NOT NULL DEFAULT now(),
        created_by varchar(200) NOT NULL DEFAULT '',
        modified_by varchar(200) NOT NULL DEFAULT ''
      )`,
      'CREATE UNIQUE INDEX secrets_tenant_key ON secrets (key) WHERE app_slug IS NULL',
      'CREATE UNIQUE INDEX secrets_app_key ON secrets (key, app_slug) WHERE app_slug IS NOT NULL',
      `CREATE TABLE secret_history (
        id bigserial PRIMARY KEY,
        secret_uuid uuid NOT NULL,
        key varchar(255) NOT NULL,
        app_slug varchar(100),
        action varchar(10) NOT NULL CHECK (action IN ('create', 'update', 'delete')),
        actor varchar(200) NOT NULL,
        at timestamptz NOT NULL DEFAULT now()
      )`,
      'CREATE INDEX secret_history_key_idx ON secret_history (key, app_slug, at)',
    ],
  },
  {
    version: 3,
    name: 'apps_and_data',
    statements: [
      `CREATE TABLE apps (
        id serial PRIMARY KEY,
        name varchar(255) NOT NULL,
        slug varchar(100) NOT NULL UNIQUE,
        description text NOT NULL DEFAULT '',
        is_active boolean NOT NULL DEFAULT true,
        created_at timestamptz NOT NULL DEFAULT now(),
        updated_at timestamptz NOT NULL DEFAULT now(),
        created_by uuid,
        modified_by uuid
      )`,
      `CREATE TABLE app_settings (
        id serial PRIMARY KEY,
        app_id integer NOT NULL UNIQUE REFERENCES apps (id) ON DELETE CASCADE,
        display_name varchar(255) NOT NULL,
        icon_path text,
        icon_content_type varchar(100),
        primary_color varchar(7) NOT NULL DEFAULT '#1976d2',
        secondary_color varchar(7) NOT NULL DEFAULT '#dc004e',
        category varchar(20) NOT NULL DEFAULT 'analytics' CHECK (category IN ('analytics', 'integration', 'storage')),
        max_functions integer NOT NULL DEFAULT 100 CHECK (max_functions >= 0),
        max_datatables integer NOT NULL DEFAULT 50 CHECK (max_datatables >= 0),
        rate_limit_per_hour integer NOT NULL DEFAULT 1000 CHECK (rate_limit_per_hour >= 0),
        documentation_url text NOT NULL DEFAULT '',
        support_email varchar(254) NOT NULL DEFAULT '',
        default_frontend_worker integer,
        created_at timestamptz NOT NULL DEFAULT now(),
        updated_at timestamptz NOT NULL DEFAULT now()
      )`,
      `CREATE TABLE data_sources (
        id serial PRIMARY KEY,
        app_id integer NOT NULL REFERENCES apps (id) ON DELETE CASCADE,
        name varchar(255) NOT NULL,
        slug varchar(100) NOT NULL,
        provider_type varchar(20) NOT NULL CHECK (provider_type IN ('flat_table', 'jsonb', 'docstore')),
        provider_config jsonb NOT NULL DEFAULT '{}',
        description text NOT NULL DEFAULT '',
        is_active boolean NOT NULL DEFAULT true,
        created_at timestamptz NOT NULL DEFAULT now(),
        updated_at timestamptz NOT NULL DEFAULT now(),
        created_by uuid,
        modified_by uuid,
        CONSTRAINT data_sources_app_slug_key UNIQUE (app_id, slug)
      )`,
      `CREATE TABLE data_tables (
        id serial PRIMARY KEY,
        app_id integer NOT NULL REFERENCES apps (id) ON DELETE CASCADE,
        data_source_id integer NOT NULL REFERENCES data_sources (id) ON DELETE RESTRICT,
        name varchar(63) NOT NULL,
        description text NOT NULL DEFAULT '',
        json_schema jsonb NOT NULL,
        schema_hash char(64) NOT NULL,
        physical_table_name varchar(63) NOT NULL UNIQUE,
        is_materialized boolean NOT NULL DEFAULT false,
        is_active boolean NOT NULL DEFAULT true,
        is_reference boolean NOT NULL DEFAULT false,
        source_table_id integer REFERENCES data_tables (id) ON DELETE RESTRICT,
        created_at timestamptz NOT NULL DEFAULT now(),
        updated_at timestamptz NOT NULL DEFAULT now(),
        created_by uuid,
        modified_by uuid,
        CONSTRAINT data_tables_app_name_key UNIQUE (app_id, name)
      )`,
      'CREATE INDEX data_tables_data_source_idx ON data_tables (data_source_id)',
    ],
  },
  {
    version: 4,
    name: 'app_delete_record',
    statements: [
      // What an app's soft delete deactivated, so that restore reactivates exactly that.
      'ALTER TABLE data_sources ADD COLUMN deactivated_with_app boolean NOT NULL DEFAULT false',
      'ALTER TABLE data_tables ADD COLUMN deactivated_with_app boolean NOT NULL DEFAULT false',
    ],
  },
  {
    version: 5,
    name: 'change_notifications',
    // The per-process caches of every server drop what a change makes stale (db/changes.ts; the
    // function is the platform's, migration 0004): a site user by UUID, the site's table
    // definitions by schema.
    statements: [
      `CREATE TRIGGER users_changed AFTER UPDATE OR DELETE ON users FOR EACH ROW EXECUTE FUNCTION public.platform_notify_change('auth', 'uuid')`,
      ...['apps', 'data_sources', 'data_tables'].map(
        (t) => `CREATE TRIGGER ${t}_changed AFTER INSERT OR UPDATE OR DELETE ON ${t} FOR EACH STATEMENT EXECUTE FUNCTION public.platform_notify_change('tables')`,
      ),
    ],
  },
  {
    version: 6,
    name: 'policies',
    // Authorization policies of the site's apps (shared/policies/), app roles and their
    // assignments, and the site users' own attributes (a principal's `attr`). A change to any of
    // them drops the compiled policies and plans of every process (topic `policies:<schema>`).
    statements: [
      'ALTER TABLE users ADD COLUMN attributes jsonb NOT NULL DEFAULT \'{}\'',
      `CREATE TABLE policies (
        id varchar(400) PRIMARY KEY,
        app_id integer REFERENCES apps (id) ON DELETE CASCADE,
        kind varchar(20) NOT NULL,
        name varchar(255) NOT NULL,
        scope varchar(255) NOT NULL DEFAULT '',
        version varchar(100) NOT NULL DEFAULT 'default',
        document jsonb NOT NULL,
        disabled boolean NOT NULL DEFAULT false,
        is_system boolean NOT NULL DEFAULT false,
        created_by uuid,
        created_at timestamptz NOT NULL DEFAULT now(),
        modified_by uuid,
        modified_at timestamptz NOT NULL DEFAULT now()
      )`,
      'CREATE INDEX policies_app_idx ON policies (app_id)',
      `CREATE TABLE app_roles (
        id serial PRIMARY KEY,
        app_id integer NOT NULL REFERENCES apps (id) ON DELETE CASCADE,
        name varchar(100) NOT NULL,
        description text NOT NULL DEFAULT '',
        parent_id integer REFERENCES app_roles (id) ON DELETE SET NULL,
        created_at timestamptz NOT NULL DEFAULT now(),
        updated_at timestamptz NOT NULL DEFAULT now(),
        UNIQUE (app_id, name)
      )`,
      `CREATE TABLE app_role_assignments (
        role_id integer NOT NULL REFERENCES app_roles (id) ON DELETE CASCADE,
        user_uuid uuid NOT NULL REFERENCES users (uuid) ON DELETE CASCADE,
        created_at timestamptz NOT NULL DEFAULT now(),
        created_by uuid,
        PRIMARY KEY (role_id, user_uuid)
      )`,
      'CREATE INDEX app_role_assignments_user_idx ON app_role_assignments (user_uuid)',
      // System policies (spec Part 2 §2): every data table has, at the unscoped level, a policy
      // denying everything and, at its app's scope, one allowing everything (which takes
      // precedence); they go with the table. A trigger, so that no path creating or deleting a
      // table (API, CLI direct mode, import, a data source's deletion) can forget them.
      datatableSystemPolicies('vdefault'),
      `CREATE FUNCTION datatable_policies_follow() RETURNS trigger LANGUAGE plpgsql AS $fn$
      BEGIN
        IF TG_OP = 'INSERT' THEN
          EXECUTE format('SELECT %I.datatable_system_policies($1, $2, (SELECT slug FROM %I.apps WHERE id = $2), $3)', TG_TABLE_SCHEMA, TG_TABLE_SCHEMA)
            USING TG_TABLE_SCHEMA, NEW.app_id, NEW.name;
        ELSE
          -- The table's policies in its app go with it; the unscoped level once no app has that kind.
          EXECUTE format('DELETE FROM %I.policies WHERE app_id = $1 AND kind = ''resource'' AND name = $2', TG_TABLE_SCHEMA) USING OLD.app_id, 'datatable:' || OLD.name;
          EXECUTE format('DELETE FROM %I.policies p WHERE p.app_id IS NULL AND p.kind = ''resource'' AND p.name = $1
                           AND NOT EXISTS (SELECT 1 FROM %I.policies o WHERE o.kind = ''resource'' AND o.name = $1 AND o.app_id IS NOT NULL)', TG_TABLE_SCHEMA, TG_TABLE_SCHEMA)
            USING 'datatable:' || OLD.name;
        END IF;
        RETURN NULL;
      END $fn$`,
      'CREATE TRIGGER data_tables_policies AFTER INSERT OR DELETE ON data_tables FOR EACH ROW EXECUTE FUNCTION datatable_policies_follow()',
      // The tables that exist already get theirs.
      'SELECT datatable_system_policies(current_schema(), t.app_id, a.slug, t.name) FROM data_tables t JOIN apps a ON a.id = t.app_id',
      ...['policies', 'app_roles', 'app_role_assignments'].map(
        (t) => `CREATE TRIGGER ${t}_changed AFTER INSERT OR UPDATE OR DELETE ON ${t} FOR EACH STATEMENT EXECUTE FUNCTION public.platform_notify_change('policies')`,
      ),
    ],
  },
  {
    version: 7,
    name: 'schema_operations',
    // The history of every data table's physical changes (shared/data/migrations/): materialize,
    // each migration, its rollback, the drop. Kept after the table is deleted (no foreign key:
    // it is also inserted, committed, while the migration holds the table row's lock).
    statements: [
      `CREATE TABLE schema_operations (
        id bigserial PRIMARY KEY,
        revision_id char(12) NOT NULL UNIQUE,
        data_table_id integer NOT NULL,
        app_id integer NOT NULL,
        table_name varchar(63) NOT NULL,
        operation_type varchar(20) NOT NULL CHECK (operation_type IN ('CREATE_TABLE', 'ALTER_TABLE', 'ROLLBACK', 'DROP_TABLE')),
        status varchar(20) NOT NULL CHECK (status IN ('PENDING', 'IN_PROGRESS', 'SUCCESS', 'FAILED', 'ROLLED_BACK')),
        operations jsonb NOT NULL DEFAULT '[]',
        executed_sql jsonb NOT NULL DEFAULT '[]',
        rollback_sql jsonb,
        rollback_warnings jsonb NOT NULL DEFAULT '[]',
        old_schema jsonb,
        new_schema jsonb,
        old_schema_hash char(64),
        new_schema_hash char(64),
        parent_id bigint REFERENCES schema_operations (id),
        description text NOT NULL DEFAULT '',
        error text,
        started_at timestamptz NOT NULL DEFAULT now(),
        completed_at timestamptz,
        duration_ms integer,
        created_by uuid,
        rolled_back_at timestamptz,
        rolled_back_by uuid
      )`,
      'CREATE INDEX schema_operations_table_idx ON schema_operations (data_table_id, id DESC)',
    ],
  },
  {
    version: 8,
    name: 'storage',
    // Storage buckets and objects (shared/storage/, docs/storage.md): the records only; the bytes
    // are in the object store under `blob_key`. An object's path is a column (a move is an
    // update; a replace swaps `blob_key`). `storage_blob_journal` names every blob that may be in
    // the store without a record (an upload in flight, a replaced or deleted object's old bytes):
    // written before the bytes, removed once they have a record or are gone, so a crash leaves
    // nothing that the sweep cannot find.
    statements: [
      `CREATE TABLE storage_buckets (
        id serial PRIMARY KEY,
        uuid uuid NOT NULL UNIQUE DEFAULT gen_random_uuid(),
        app_id integer NOT NULL REFERENCES apps (id) ON DELETE CASCADE,
        name varchar(255) NOT NULL,
        slug varchar(255) NOT NULL,
        visibility varchar(10) NOT NULL DEFAULT 'private' CHECK (visibility IN ('private', 'public')),
        file_size_limit bigint NOT NULL DEFAULT 52428800 CHECK (file_size_limit > 0),
        allowed_mime_types text[] NOT NULL DEFAULT '{}',
        app_category varchar(20) NOT NULL CHECK (app_category IN ('assets', 'attachments')),
        storage_provider varchar(20) NOT NULL DEFAULT 'objstore' CHECK (storage_provider IN ('objstore', 'doclib')),
        max_size_bytes bigint CHECK (max_size_bytes > 0),
        max_objects bigint CHECK (max_objects > 0),
        usage_total_size bigint NOT NULL DEFAULT 0,
        usage_total_objects bigint NOT NULL DEFAULT 0,
        usage_updated_at timestamptz,
        created_at timestamptz NOT NULL DEFAULT now(),
        updated_at timestamptz NOT NULL DEFAULT now(),
        created_by uuid,
        modified_by uuid,
        UNIQUE (app_id, slug)
      )`,
      `CREATE TABLE storage_objects (
        id bigserial PRIMARY KEY,
        uuid uuid NOT NULL UNIQUE,
        bucket_id integer NOT NULL REFERENCES storage_buckets (id) ON DELETE CASCADE,
        path text COLLATE "C" NOT NULL,
        filename text NOT NULL,
        size bigint NOT NULL CHECK (size >= 0),
        mimetype varchar(255) NOT NULL,
        metadata jsonb NOT NULL DEFAULT '{}',
        visibility varchar(10) CHECK (visibility IN ('private', 'public')),
        blob_key text NOT NULL UNIQUE,
        etag text NOT NULL,
        created_at timestamptz NOT NULL DEFAULT now(),
        updated_at timestamptz NOT NULL DEFAULT now(),
        created_by uuid,
        modified_by uuid,
        UNIQUE (bucket_id, path)
      )`,
      // Lists: by creation (the default order), and prefix/path ranges through the unique index (collation "C").
      'CREATE INDEX storage_objects_created_idx ON storage_objects (bucket_id, created_at, id)',
      `CREATE TABLE storage_blob_journal (
        blob_key text PRIMARY KEY,
        reason varchar(10) NOT NULL CHECK (reason IN ('upload', 'orphan')),
        created_at timestamptz NOT NULL DEFAULT now()
      )`,
      // System policies of a bucket (spec Part 2 §2, resource kind `storage:{slug}`), as data tables have theirs (migration 6).
      `CREATE FUNCTION storage_policies_follow() RETURNS trigger LANGUAGE plpgsql AS $fn$
      DECLARE
        site text := TG_TABLE_SCHEMA;
        rule jsonb;
        kind text;
        scope text;
        ident text;
      BEGIN
        IF TG_OP = 'INSERT' THEN
          kind := 'storage:' || NEW.slug;
          ident := 'resource.storage_' || NEW.slug || '.vdefault';
          EXECUTE format('SELECT slug FROM %I.apps WHERE id = $1', site) INTO scope USING NEW.app_id;
          scope := site || '_' || scope;
          rule := jsonb_build_object('name', 'system-deny-all', 'actions', jsonb_build_array('*'), 'effect', 'EFFECT_DENY', 'roles', jsonb_build_array('*'));
          EXECUTE format('INSERT INTO %I.policies (id, app_id, kind, name, scope, document, is_system) VALUES ($1, NULL, ''resource'', $2, '''', $3, true) ON CONFLICT (id) DO NOTHING', site)
            USING ident, kind, jsonb_build_object('apiVersion', 'api.cerbos.dev/v1', 'resourcePolicy', jsonb_build_object('resource', kind, 'version', 'default', 'rules', jsonb_build_array(rule)));
          rule := jsonb_build_object('name', 'system-allow-all', 'actions', jsonb_build_array('*'), 'effect', 'EFFECT_ALLOW', 'roles', jsonb_build_array('*'));
          EXECUTE format('INSERT INTO %I.policies (id, app_id, kind, name, scope, document, is_system) VALUES ($1, $2, ''resource'', $3, $4, $5, true) ON CONFLICT (id) DO NOTHING', site)
            USING ident || '/' || scope, NEW.app_id, kind, scope,
                  jsonb_build_object('apiVersion', 'api.cerbos.dev/v1', 'resourcePolicy', jsonb_build_object('resource', kind, 'version', 'default', 'scope', scope, 'rules', jsonb_build_array(rule)));
        ELSE
          kind := 'storage:' || OLD.slug;
          EXECUTE format('DELETE FROM %I.policies WHERE app_id = $1 AND kind = ''resource'' AND name = $2', site) USING OLD.app_id, kind;
          EXECUTE format('DELETE FROM %I.policies p WHERE p.app_id IS NULL AND p.kind = ''resource'' AND p.name = $1
                           AND NOT EXISTS (SELECT 1 FROM %I.policies o WHERE o.kind = ''resource'' AND o.name = $1 AND o.app_id IS NOT NULL)', site, site)
            USING kind;
        END IF;
        RETURN NULL;
      END $fn$`,
      'CREATE TRIGGER storage_buckets_policies AFTER INSERT OR DELETE ON storage_buckets FOR EACH ROW EXECUTE FUNCTION storage_policies_follow()',
    ],
  },
  {
    version: 9,
    name: 'social_login',
    // Social login (shared/social/, docs/social-login.md). `social_apps`: a provider's client
    // configuration, the client secret sealed like a secret value (AAD: the app's uuid).
    // `login_key` is how `/api/auth/{provider}/…` names the app: its provider_id, else its
    // provider — unique, so one path names one app. `social_accounts`: a provider identity
    // (issuer + subject) attached to a site user. `social_login_states`: the server side of one
    // authorization (state → nonce, PKCE verifier, redirect URI), consumed by the token call.
    // `users.email_verified`: whether the address may be trusted to auto-connect a provider
    // identity to the user — set by an administrator, a verified platform account or a provider
    // that verified it; not when the user typed it into their own profile.
    statements: [
      `ALTER TABLE users ADD COLUMN email_verified boolean NOT NULL DEFAULT false`,
      `UPDATE users SET email_verified = true WHERE platform_user_uuid IS NOT NULL`,
      `CREATE TABLE social_apps (
        id serial PRIMARY KEY,
        uuid uuid NOT NULL UNIQUE,
        provider varchar(64) NOT NULL,
        provider_id varchar(64) NOT NULL DEFAULT '',
        login_key varchar(64) NOT NULL UNIQUE GENERATED ALWAYS AS (CASE WHEN provider_id = '' THEN provider ELSE provider_id END) STORED,
        name varchar(100) NOT NULL,
        client_id varchar(255) NOT NULL,
        secret_ciphertext text NOT NULL,
        secret_key_version integer NOT NULL,
        key varchar(255) NOT NULL DEFAULT '',
        settings jsonb NOT NULL DEFAULT '{}',
        created_at timestamptz NOT NULL DEFAULT now(),
        updated_at timestamptz NOT NULL DEFAULT now()
      )`,
      `CREATE TABLE social_accounts (
        id bigserial PRIMARY KEY,
        social_app_id integer NOT NULL REFERENCES social_apps (id) ON DELETE RESTRICT,
        user_uuid uuid NOT NULL REFERENCES users (uuid) ON DELETE CASCADE,
        issuer text NOT NULL,
        subject text NOT NULL,
        email varchar(254) NOT NULL DEFAULT '',
        email_verified boolean NOT NULL DEFAULT false,
        extra_data jsonb NOT NULL DEFAULT '{}',
        created_at timestamptz NOT NULL DEFAULT now(),
        last_login timestamptz NOT NULL DEFAULT now(),
        UNIQUE (social_app_id, subject)
      )`,
      'CREATE INDEX social_accounts_user_idx ON social_accounts (user_uuid)',
      `CREATE TABLE social_login_states (
        state_hash bytea PRIMARY KEY,
        social_app_id integer NOT NULL REFERENCES social_apps (id) ON DELETE CASCADE,
        nonce text NOT NULL,
        code_verifier text NOT NULL,
        redirect_uri text NOT NULL,
        requested_by uuid,
        expires_at timestamptz NOT NULL,
        created_at timestamptz NOT NULL DEFAULT now()
      )`,
      'CREATE INDEX social_login_states_expiry_idx ON social_login_states (expires_at)',
    ],
  },
  {
    version: 10,
    name: 'storage_search',
    // The object list's substring filters (`search`, `file__icontains`, `filename__icontains`,
    // `metadata_search`: ILIKE '%…%') served by trigram indexes instead of a scan of the bucket
    // (docs/storage.md "List"). pg_trgm is a trusted extension (PostgreSQL ≥ 13): the database
    // owner may create it; it lives in public, shared by every site. Sites migrate concurrently
    // (parallel site creation): the lock makes the first one create it and the others see it.
    statements: [
      "SELECT pg_advisory_xact_lock(hashtext('platform:extension:pg_trgm'))",
      'CREATE EXTENSION IF NOT EXISTS pg_trgm WITH SCHEMA public',
      'CREATE INDEX storage_objects_path_trgm ON storage_objects USING gin (path public.gin_trgm_ops)',
      'CREATE INDEX storage_objects_filename_trgm ON storage_objects USING gin (filename public.gin_trgm_ops)',
      'CREATE INDEX storage_objects_metadata_trgm ON storage_objects USING gin ((metadata::text) public.gin_trgm_ops)',
    ],
  },
  {
    version: 11,
    name: 'functions_and_events',
    // Functions of the apps (shared/functions/, docs/functions.md): code run in the sandbox;
    // `environment` maps variable names to secret keys (resolved at each run, never stored in
    // clear). `function_invocations`: one row per execution, the record the API shows (queued →
    // running → succeeded | failed | timed_out); a queued one also has its row in
    // public.function_jobs. `event_subscriptions`: spec Part 1 §6 (one function, one event type).
    statements: [
      `CREATE TABLE functions (
        id serial PRIMARY KEY,
        uuid uuid NOT NULL UNIQUE DEFAULT gen_random_uuid(),
        app_id integer NOT NULL REFERENCES apps (id) ON DELETE CASCADE,
        name varchar(255) NOT NULL,
        slug varchar(255) NOT NULL,
        description text NOT NULL DEFAULT '',
        runtime varchar(20) NOT NULL DEFAULT 'javascript' CHECK (runtime IN ('javascript')),
        code text NOT NULL,
        timeout integer NOT NULL DEFAULT 300 CHECK (timeout > 0),
        environment jsonb NOT NULL DEFAULT '{}',
        is_active boolean NOT NULL DEFAULT true,
        created_at timestamptz NOT NULL DEFAULT now(),
        updated_at timestamptz NOT NULL DEFAULT now(),
        created_by uuid,
        modified_by uuid,
        UNIQUE (app_id, slug)
      )`,
      `CREATE TABLE function_invocations (
        id bigserial PRIMARY KEY,
        uuid uuid NOT NULL UNIQUE DEFAULT gen_random_uuid(),
        function_id integer NOT NULL REFERENCES functions (id) ON DELETE CASCADE,
        trigger varchar(10) NOT NULL CHECK (trigger IN ('api', 'event')),
        event varchar(64),
        status varchar(10) NOT NULL DEFAULT 'queued' CHECK (status IN ('queued', 'running', 'succeeded', 'failed', 'timed_out')),
        payload jsonb,
        result jsonb,
        error jsonb,
        logs jsonb NOT NULL DEFAULT '[]',
        invoked_by uuid,
        attempts integer NOT NULL DEFAULT 0,
        duration_ms integer,
        cpu_ms integer,
        created_at timestamptz NOT NULL DEFAULT now(),
        started_at timestamptz,
        finished_at timestamptz
      )`,
      'CREATE INDEX function_invocations_function_idx ON function_invocations (function_id, created_at DESC, id DESC)',
      `CREATE TABLE event_subscriptions (
        id serial PRIMARY KEY,
        event varchar(64) NOT NULL,
        function_id integer NOT NULL REFERENCES functions (id) ON DELETE CASCADE,
        created_at timestamptz NOT NULL DEFAULT now(),
        updated_at timestamptz NOT NULL DEFAULT now(),
        UNIQUE (event, function_id)
      )`,
      // System policies (spec Part 2 §2) of a resource of the entity type TG_ARGV[0], kind
      // `{type}:{slug}`: one trigger function for functions and buckets (migration 8's copy goes).
      systemPoliciesFollow('vdefault'),
      "CREATE TRIGGER functions_policies AFTER INSERT OR DELETE ON functions FOR EACH ROW EXECUTE FUNCTION system_policies_follow('function')",
      'DROP TRIGGER storage_buckets_policies ON storage_buckets',
      "CREATE TRIGGER storage_buckets_policies AFTER INSERT OR DELETE ON storage_buckets FOR EACH ROW EXECUTE FUNCTION system_policies_follow('storage')",
      'DROP FUNCTION storage_policies_follow()',
    ],
  },
  {
    version: 12,
    name: 'spec_forms',
    // Issue 30: a schema operation records its statements' own time (`execution_time_ms`, beside
    // `duration_ms`); policy ids take the spec's form (Part 2 §2, shared/policies/model.ts):
    // `resource.{kind}.{version}/{scope}`, `role.{name}/{scope}`, `principal.{name}.{version}/{scope}`
    // instead of Cerbos' `v{version}` (and a role's version). Row by row, so that no rename can
    // fail: a row whose new id is taken keeps its old one, and a role policy of another version
    // than "default" keeps its (both still found by that id). The system policies' functions
    // write the new form. (No `?` in the statements: the driver would take it for a parameter.)
    statements: [
      'ALTER TABLE schema_operations ADD COLUMN execution_time_ms integer',
      `DO $do$
      DECLARE
        r record;
        renamed text;
      BEGIN
        FOR r IN SELECT id FROM policies ORDER BY id LOOP
          renamed := CASE
            WHEN r.id ~ '^(resource|principal)\\.(.+)\\.v(\\w+)(/[^/]*|)$' THEN regexp_replace(r.id, '^(resource|principal)\\.(.+)\\.v(\\w+)(/[^/]*|)$', '\\1.\\2.\\3\\4')
            WHEN r.id ~ '^role\\.(.+)\\.vdefault(/[^/]*|)$' THEN regexp_replace(r.id, '^role\\.(.+)\\.vdefault(/[^/]*|)$', 'role.\\1\\2')
            ELSE r.id
          END;
          IF renamed <> r.id AND NOT EXISTS (SELECT 1 FROM policies WHERE id = renamed) THEN
            UPDATE policies SET id = renamed WHERE id = r.id;
          END IF;
        END LOOP;
      END $do$`,
      datatableSystemPolicies('default'),
      systemPoliciesFollow('default'),
    ],
  },
  {
    version: 13,
    name: 'frontend_workers',
    // Issue 31 (docs/frontend-workers.md): a worker, its builds (the manifest maps each path to a
    // content-addressed blob), and the site's blobs by SHA-256 (stored under `_workers/` in the
    // site's store, outside every bucket): a row is written before its bytes, `stored` once they
    // are (a journal: workers/deploy.ts). `used_at`: a deploy touches the blobs it reuses, so the
    // collection of unreferenced blobs leaves alone those a deploy in flight counts on. An app's
    // `default_frontend_worker` (Part 2) is cleared with its worker.
    statements: [
      `CREATE TABLE frontend_workers (
        id serial PRIMARY KEY,
        uuid uuid NOT NULL UNIQUE,
        slug varchar(63) NOT NULL,
        name varchar(255) NOT NULL,
        subdomain varchar(63) NOT NULL,
        is_internal boolean NOT NULL DEFAULT true,
        domain varchar(253) NULL,
        host varchar(253) NOT NULL,
        app_id integer NULL REFERENCES apps (id) ON DELETE SET NULL,
        spa_fallback boolean NOT NULL DEFAULT true,
        active_build_uuid uuid NULL,
        created_by uuid NULL,
        modified_by uuid NULL,
        created_at timestamptz NOT NULL DEFAULT now(),
        updated_at timestamptz NOT NULL DEFAULT now(),
        CONSTRAINT frontend_workers_domain CHECK (is_internal = (domain IS NULL))
      )`,
      'CREATE UNIQUE INDEX frontend_workers_slug_key ON frontend_workers (slug)',
      'CREATE UNIQUE INDEX frontend_workers_host_key ON frontend_workers (host)',
      `CREATE TABLE frontend_worker_builds (
        uuid uuid PRIMARY KEY,
        worker_id integer NOT NULL REFERENCES frontend_workers (id) ON DELETE CASCADE,
        title varchar(255) NOT NULL,
        status varchar(16) NOT NULL CHECK (status IN ('uploading', 'ready', 'failed')),
        size bigint NOT NULL DEFAULT 0,
        file_count integer NOT NULL DEFAULT 0,
        stored_files integer NOT NULL DEFAULT 0,
        manifest jsonb NULL,
        error text NULL,
        created_by uuid NULL,
        created_at timestamptz NOT NULL DEFAULT now(),
        ready_at timestamptz NULL
      )`,
      'CREATE INDEX frontend_worker_builds_worker ON frontend_worker_builds (worker_id, created_at DESC)',
      'ALTER TABLE frontend_workers ADD CONSTRAINT frontend_workers_active_build FOREIGN KEY (active_build_uuid) REFERENCES frontend_worker_builds (uuid) ON DELETE RESTRICT DEFERRABLE INITIALLY DEFERRED',
      `CREATE TABLE frontend_worker_blobs (
        sha256 char(64) PRIMARY KEY,
        size bigint NOT NULL,
        br bigint NULL,
        gz bigint NULL,
        stored boolean NOT NULL DEFAULT false,
        used_at timestamptz NOT NULL DEFAULT now()
      )`,
      'UPDATE app_settings SET default_frontend_worker = NULL',
      'ALTER TABLE app_settings ADD CONSTRAINT app_settings_default_frontend_worker FOREIGN KEY (default_frontend_worker) REFERENCES frontend_workers (id) ON DELETE SET NULL',
    ],
  },
  {
    version: 14,
    name: 'app_packages',
    // Issue 32 (docs/app-packages.md): export jobs (spec Part 2 §2 "App package and jobs"; the
    // last completed one's ZIP is the stored package, under `package_key` in the site's store) and
    // import jobs (the manifest, the report with its per-module counts, warnings and errors).
    statements: [
      `CREATE TABLE app_export_jobs (
        id serial PRIMARY KEY,
        uuid uuid NOT NULL UNIQUE DEFAULT gen_random_uuid(),
        app_id integer REFERENCES apps (id) ON DELETE CASCADE,
        app_name varchar(255) NOT NULL,
        app_slug varchar(100) NOT NULL,
        status varchar(20) NOT NULL DEFAULT 'in_progress' CHECK (status IN ('in_progress', 'completed', 'failed')),
        options jsonb NOT NULL DEFAULT '{}',
        size bigint,
        checksum varchar(80),
        package_key text,
        error text,
        triggered_by uuid,
        started_at timestamptz NOT NULL DEFAULT now(),
        completed_at timestamptz,
        created_at timestamptz NOT NULL DEFAULT now()
      )`,
      'CREATE INDEX app_export_jobs_app_idx ON app_export_jobs (app_id, created_at DESC, id DESC)',
      `CREATE TABLE app_import_jobs (
        id serial PRIMARY KEY,
        uuid uuid NOT NULL UNIQUE DEFAULT gen_random_uuid(),
        app_slug varchar(100) NOT NULL,
        status varchar(20) NOT NULL DEFAULT 'in_progress' CHECK (status IN ('in_progress', 'completed', 'failed')),
        dry_run boolean NOT NULL DEFAULT false,
        manifest jsonb,
        report jsonb NOT NULL DEFAULT '{}',
        error text,
        triggered_by uuid,
        started_at timestamptz NOT NULL DEFAULT now(),
        completed_at timestamptz,
        created_at timestamptz NOT NULL DEFAULT now()
      )`,
    ],
  },
  {
    version: 15,
    name: 'function_changes',
    // Issue 33: every process keeps the functions it decides invocations on (common/request-caches.ts,
    // without their code); a change to the site's functions drops them (topic `functions:<schema>`).
    statements: [
      `CREATE TRIGGER functions_changed AFTER INSERT OR UPDATE OR DELETE ON functions FOR EACH STATEMENT EXECUTE FUNCTION public.platform_notify_change('functions')`,
    ],
  },
  {
    version: 16,
    name: 'record_changes',
    // Issue 35: the change log of the records of every materialized table (shared/realtime/,
    // docs/realtime.md), written by statement-level triggers in the transaction of the change.
    // It now makes the log in the form migration 17 brought (which upgrades the sites its first
    // form migrated).
    statements: [
      ...RECORD_CHANGES_TABLE,
      // The tables logged, and their key columns (record_changes_reattach writes their functions again).
      `CREATE TABLE IF NOT EXISTS record_changes_tables (tbl text PRIMARY KEY, keys text[] NOT NULL)`,
      ...RECORD_CHANGES_FUNCTIONS,
      // Storage objects (their records; the bytes are not in the log).
      `SELECT record_changes_attach(current_schema(), 'storage_objects', ARRAY['id'])`,
      // The tables materialized before this migration.
      `DO $do$
      DECLARE
        r record;
      BEGIN
        FOR r IN
          SELECT t.physical_table_name AS tbl, d.provider_type AS provider, t.json_schema -> 'primaryKey' AS pk
            FROM data_tables t JOIN data_sources d ON d.id = t.data_source_id
           WHERE t.is_materialized AND NOT t.is_reference AND to_regclass(format('%I.%I', current_schema(), t.physical_table_name)) IS NOT NULL
        LOOP
          PERFORM record_changes_attach(current_schema(), r.tbl, CASE
            WHEN r.provider <> 'flat_table' OR r.pk IS NULL THEN ARRAY['id']
            WHEN jsonb_typeof(r.pk) = 'array' THEN ARRAY(SELECT jsonb_array_elements_text(r.pk))
            ELSE ARRAY[r.pk #>> '{}'] END);
        END LOOP;
      END $do$`,
    ],
  },
  {
    version: 17,
    name: 'record_changes_entries',
    // Issue 35: the log of migration 16 as it first was (a row per change, numbered by position)
    // becomes a log of entries (a row per statement and table, its rows as json arrays: see
    // RECORD_CHANGES_TABLE). The old log goes (a subscriber resuming from a position in it gets
    // a `reset`); the tables' sequences stay, so positions keep growing.
    statements: [
      // The last position pruned from each table's log (changelog.ts logBounds).
      'ALTER TABLE record_changes_tables ADD COLUMN IF NOT EXISTS pruned_to bigint NOT NULL DEFAULT 0',
      `DO $do$ BEGIN
        IF EXISTS (SELECT 1 FROM pg_attribute WHERE attrelid = 'record_changes'::regclass AND attname = 'pos' AND NOT attisdropped) THEN
          DROP TABLE record_changes;
          -- The old log counts as pruned: a subscriber that resumes from before its end gets a reset.
          UPDATE record_changes_tables t SET pruned_to = s.last_value FROM pg_sequences s
           WHERE s.schemaname = current_schema() AND s.sequencename = left(t.tbl || '_changes', 63) AND s.last_value IS NOT NULL;
        END IF;
      END $do$`,
      ...RECORD_CHANGES_TABLE,
      ...RECORD_CHANGES_FUNCTIONS,
      'SELECT record_changes_reattach(current_schema())',
    ],
  },
];

export const CURRENT_TENANT_VERSION = tenantMigrations.at(-1)!.version;

/** The extensions site schemas use, created in `public` by the tenant migrations (a restored schema needs them in a database that has no site yet). */
export const TENANT_EXTENSIONS = tenantMigrations.flatMap((m) => m.statements).filter((sql) => sql.startsWith('CREATE EXTENSION IF NOT EXISTS'));

export interface TenantMigrationResult {
  schema: string;
  from: number;
  to: number;
  applied: string[];
}

/**
 * Brings one schema to the current version. `create` makes the schema first (site creation).
 * Pass the EntityManager of an open transaction to make it part of that transaction (all or
 * nothing with the site row); otherwise each migration commits on its own.
 */
export async function migrateTenantSchema(em: EntityManager, schema: string, options: { create?: boolean } = {}): Promise<TenantMigrationResult> {
  const q = quotedSchema(schema);
  const applied: string[] = [];
  let from = -1;
  const step = async (tx: EntityManager): Promise<boolean> => {
    await tx.execute('SELECT pg_advisory_xact_lock(hashtext(?))', [`tenant:${schema}`]);
    await tx.execute('INSERT INTO public.tenant_schemas (schema_name, version) VALUES (?, 0) ON CONFLICT (schema_name) DO NOTHING', [schema]);
    const [row] = await tx.execute('SELECT version FROM public.tenant_schemas WHERE schema_name = ? FOR UPDATE', [schema]);
    const version = Number(row.version);
    if (from < 0) from = version;
    const next = tenantMigrations.find((m) => m.version > version);
    if (!next) return false;
    await tx.execute(`SET LOCAL search_path TO ${q}`);
    for (const sql of next.statements) await tx.execute(sql);
    await tx.execute('SET LOCAL search_path TO public');
    await tx.execute('UPDATE public.tenant_schemas SET version = ?, migrated_at = now(), last_error = NULL WHERE schema_name = ?', [next.version, schema]);
    applied.push(`${String(next.version).padStart(4, '0')}_${next.name}`);
    return true;
  };
  const inTransaction = em.isInTransaction();
  if (options.create) await em.execute(`CREATE SCHEMA IF NOT EXISTS ${q}`);
  try {
    if (inTransaction) {
      while (await step(em));
    } else {
      // Each migration in a transaction of its own, without the request statement timeout.
      const migrateOne = async (tx: EntityManager) => {
        await setLocalStatementTimeout(tx, 0);
        return step(tx);
      };
      while (await em.transactional((tx) => migrateOne(tx as EntityManager)));
    }
  } catch (err) {
    if (!inTransaction) {
      const message = describeError(err);
      await em.execute('UPDATE public.tenant_schemas SET last_error = ? WHERE schema_name = ?', [message.slice(0, 1000), schema]).catch(() => undefined);
    }
    throw err;
  }
  return { schema, from: Math.max(from, 0), to: from + applied.length, applied };
}

export interface TenantStatus {
  schema: string;
  site: string;
  /** The cluster that holds the schema (db/clusters.ts). */
  cluster: string;
  version: number;
  current: number;
  pending: number;
  last_error: string | null;
}

/** Each site's schema version, read on the cluster that holds it (its `tenant_schemas` row is there). */
export async function tenantStatus(em: EntityManager): Promise<TenantStatus[]> {
  const sites = (await em.execute('SELECT schema_name, slug, cluster FROM public.sites ORDER BY schema_name')) as { schema_name: string; slug: string; cluster: string }[];
  const versions = new Map<string, { version: number; last_error: string | null }>();
  for (const cluster of new Set(sites.map((s) => s.cluster))) {
    const schemas = sites.filter((s) => s.cluster === cluster).map((s) => s.schema_name);
    try {
      const rows = (await (await clusterEm(em, cluster)).execute('SELECT schema_name, version, last_error FROM public.tenant_schemas WHERE schema_name IN (?)', [
        schemas,
      ])) as { schema_name: string; version: number; last_error: string | null }[];
      for (const r of rows) versions.set(r.schema_name, { version: Number(r.version), last_error: r.last_error ?? null });
    } catch (err) {
      // A cluster that does not answer: its schemas show as pending, with why (migrating them fails, reported).
      for (const schema of schemas) versions.set(schema, { version: 0, last_error: `cluster ${cluster} unreachable: ${describeError(err)}` });
    }
  }
  return sites.map((r) => {
    const v = versions.get(r.schema_name) ?? { version: 0, last_error: null };
    return {
      schema: r.schema_name,
      site: r.slug,
      cluster: r.cluster,
      version: v.version,
      current: CURRENT_TENANT_VERSION,
      pending: tenantMigrations.filter((m) => m.version > v.version).length,
      last_error: v.last_error,
    };
  });
}

/** A unit of work on `cluster` (the primary: a fork of `em`'s pool). */
async function clusterEm(em: EntityManager, cluster: string): Promise<EntityManager> {
  if (cluster === PRIMARY_CLUSTER) return em.fork();
  const clusters = clustersOf(em);
  if (!clusters) throw new Error(`The site schema is on the cluster "${cluster}", and this pool knows no other cluster.`);
  return (await clusters.orm(cluster)).em.fork();
}

/**
 * Migrates every site schema that is behind, `concurrency` schemas at a time (each schema
 * is locked on its own); one failure is reported and the others still run.
 */
export async function migrateAllTenants(
  em: EntityManager,
  onProgress: (done: number, total: number, result: TenantMigrationResult | { schema: string; error: string }) => void = () => undefined,
  options: { concurrency?: number } = {},
): Promise<{ migrated: TenantMigrationResult[]; failed: { schema: string; error: string }[] }> {
  // The per-site tables of each other cluster first (db/clusters.ts); one that does not answer is
  // reported, and its sites' schemas fail below.
  const failed: { schema: string; error: string }[] = (await prepareClusters(em)).map((c) => ({ schema: `(cluster ${c.name})`, error: c.error }));
  const pending = (await tenantStatus(em)).filter((s) => s.pending > 0);
  const migrated: TenantMigrationResult[] = [];
  let next = 0;
  let done = 0;
  const worker = async () => {
    while (next < pending.length) {
      const { schema, cluster } = pending[next++];
      try {
        const result = await migrateTenantSchema(await clusterEm(em, cluster), schema);
        migrated.push(result);
        onProgress(++done, pending.length, result);
      } catch (err) {
        const failure = { schema, error: describeError(err) };
        failed.push(failure);
        onProgress(++done, pending.length, failure);
      }
    }
  };
  await Promise.all(Array.from({ length: Math.max(1, options.concurrency ?? 4) }, worker));
  return { migrated, failed };
}
