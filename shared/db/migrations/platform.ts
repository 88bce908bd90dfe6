// Versioned migrations of the platform (control-plane) schema. Append only: a released
// migration is never edited; a change is a new class at the end of the list.
import { Migration } from '@mikro-orm/migrations';

export class Migration0001Users extends Migration {
  override name = '0001_users';
  override async up(): Promise<void> {
    this.addSql(`
      CREATE TABLE users (
        uuid uuid PRIMARY KEY,
        username varchar(150) NOT NULL,
        email varchar(254) NOT NULL DEFAULT '',
        first_name varchar(150) NOT NULL DEFAULT '',
        last_name varchar(150) NOT NULL DEFAULT '',
        password varchar(255) NOT NULL,
        is_active boolean NOT NULL DEFAULT true,
        is_deleted boolean NOT NULL DEFAULT false,
        is_staff boolean NOT NULL DEFAULT false,
        is_superuser boolean NOT NULL DEFAULT false,
        token_generation integer NOT NULL DEFAULT 0,
        date_joined timestamptz NOT NULL DEFAULT now(),
        modified timestamptz NOT NULL DEFAULT now(),
        last_login timestamptz NULL
      )`);
    this.addSql('CREATE UNIQUE INDEX users_username_key ON users (lower(username))');
    this.addSql(`CREATE UNIQUE INDEX users_email_key ON users (lower(email)) WHERE email <> '' AND NOT is_deleted`);
    this.addSql('CREATE INDEX users_date_joined_idx ON users (date_joined, uuid)');
    this.addSql(`
      CREATE TABLE token_blacklist (
        jti uuid PRIMARY KEY,
        user_uuid uuid NOT NULL REFERENCES users (uuid) ON DELETE CASCADE,
        expires_at timestamptz NOT NULL,
        blacklisted_at timestamptz NOT NULL DEFAULT now()
      )`);
    this.addSql('CREATE INDEX token_blacklist_expires_idx ON token_blacklist (expires_at)');
  }
  override async down(): Promise<void> {
    this.addSql('DROP TABLE token_blacklist');
    this.addSql('DROP TABLE users');
  }
}

/** Tenancy: organizations, members, groups, permissions, object grants, sites, domains, invitations. */
export class Migration0002Tenancy extends Migration {
  override name = '0002_tenancy';
  override async up(): Promise<void> {
    this.addSql(`
      CREATE TABLE organizations (
        uuid uuid PRIMARY KEY,
        name varchar(255) NOT NULL,
        slug varchar(100) NOT NULL,
        is_active boolean NOT NULL DEFAULT true,
        created timestamptz NOT NULL DEFAULT now(),
        modified timestamptz NOT NULL DEFAULT now()
      )`);
    this.addSql('CREATE UNIQUE INDEX organizations_slug_key ON organizations (slug)');
    this.addSql(`
      CREATE TABLE organization_members (
        uuid uuid PRIMARY KEY,
        organization_uuid uuid NOT NULL REFERENCES organizations (uuid) ON DELETE CASCADE,
        user_uuid uuid NOT NULL REFERENCES users (uuid) ON DELETE CASCADE,
        is_admin boolean NOT NULL DEFAULT false,
        is_owner boolean NOT NULL DEFAULT false,
        created timestamptz NOT NULL DEFAULT now(),
        modified timestamptz NOT NULL DEFAULT now(),
        CONSTRAINT organization_members_unique UNIQUE (organization_uuid, user_uuid)
      )`);
    this.addSql('CREATE INDEX organization_members_user_idx ON organization_members (user_uuid)');
    this.addSql(`
      CREATE TABLE permissions (
        id serial PRIMARY KEY,
        codename varchar(100) NOT NULL UNIQUE,
        name varchar(255) NOT NULL,
        model varchar(50) NOT NULL
      )`);
    const perms: [string, string, string][] = [
      ['view_organization', 'Can view organization', 'organization'],
      ['change_organization', 'Can change organization', 'organization'],
      ['delete_organization', 'Can delete organization', 'organization'],
      ['manage_organization', 'Can manage organization', 'organization'],
      ['invite_members', 'Can invite members', 'organization'],
      ['view_site', 'Can view site', 'site'],
      ['change_site', 'Can change site', 'site'],
      ['delete_site', 'Can delete site', 'site'],
      ['access_site', 'Can access site', 'site'],
      ['manage_site', 'Can manage site', 'site'],
      ['manage_site_users', 'Can manage site users', 'site'],
      ['admin_site', 'Can administer site', 'site'],
    ];
    this.addSql(`INSERT INTO permissions (codename, name, model) VALUES ${perms.map(([c, n, m]) => `('${c}', '${n}', '${m}')`).join(', ')}`);
    this.addSql(`
      CREATE TABLE groups (
        id serial PRIMARY KEY,
        name varchar(150) NOT NULL,
        created timestamptz NOT NULL DEFAULT now(),
        modified timestamptz NOT NULL DEFAULT now()
      )`);
    this.addSql('CREATE UNIQUE INDEX groups_name_key ON groups (lower(name))');
    this.addSql(`
      CREATE TABLE group_permissions (
        group_id integer NOT NULL REFERENCES groups (id) ON DELETE CASCADE,
        permission_id integer NOT NULL REFERENCES permissions (id) ON DELETE CASCADE,
        PRIMARY KEY (group_id, permission_id)
      )`);
    this.addSql(`
      CREATE TABLE member_groups (
        member_uuid uuid NOT NULL REFERENCES organization_members (uuid) ON DELETE CASCADE,
        group_id integer NOT NULL REFERENCES groups (id) ON DELETE CASCADE,
        PRIMARY KEY (member_uuid, group_id)
      )`);
    this.addSql(`
      CREATE TABLE sites (
        uuid uuid PRIMARY KEY,
        slug varchar(100) NOT NULL,
        name varchar(255) NOT NULL,
        description text NOT NULL DEFAULT '',
        schema_name varchar(63) NOT NULL,
        environment varchar(20) NOT NULL CHECK (environment IN ('production', 'staging', 'development', 'testing')),
        is_active boolean NOT NULL DEFAULT true,
        site_settings jsonb NOT NULL DEFAULT '{}',
        organization_uuid uuid NOT NULL REFERENCES organizations (uuid) ON DELETE RESTRICT,
        created_at timestamptz NOT NULL DEFAULT now(),
        modified_at timestamptz NOT NULL DEFAULT now()
      )`);
    this.addSql('CREATE UNIQUE INDEX sites_slug_key ON sites (slug)');
    this.addSql('CREATE UNIQUE INDEX sites_schema_name_key ON sites (schema_name)');
    this.addSql('CREATE INDEX sites_organization_idx ON sites (organization_uuid)');
    // Object-level grants (django-guardian style): a permission on one organization or site,
    // held by a user or by a group.
    this.addSql(`
      CREATE TABLE object_permissions (
        id bigserial PRIMARY KEY,
        user_uuid uuid REFERENCES users (uuid) ON DELETE CASCADE,
        group_id integer REFERENCES groups (id) ON DELETE CASCADE,
        permission_id integer NOT NULL REFERENCES permissions (id) ON DELETE CASCADE,
        object_type varchar(20) NOT NULL CHECK (object_type IN ('organization', 'site')),
        object_uuid uuid NOT NULL,
        created timestamptz NOT NULL DEFAULT now(),
        CONSTRAINT object_permissions_holder CHECK ((user_uuid IS NULL) <> (group_id IS NULL))
      )`);
    this.addSql(`CREATE UNIQUE INDEX object_permissions_user_key ON object_permissions (user_uuid, permission_id, object_type, object_uuid) WHERE user_uuid IS NOT NULL`);
    this.addSql(`CREATE UNIQUE INDEX object_permissions_group_key ON object_permissions (group_id, permission_id, object_type, object_uuid) WHERE group_id IS NOT NULL`);
    this.addSql('CREATE INDEX object_permissions_object_idx ON object_permissions (object_type, object_uuid)');
    this.addSql(`
      CREATE TABLE domains (
        uuid uuid PRIMARY KEY,
        slug varchar(255) NOT NULL,
        domain varchar(253) NOT NULL,
        is_primary boolean NOT NULL DEFAULT false,
        is_active boolean NOT NULL DEFAULT true,
        site_uuid uuid NOT NULL REFERENCES sites (uuid) ON DELETE CASCADE,
        created_at timestamptz NOT NULL DEFAULT now(),
        modified_at timestamptz NOT NULL DEFAULT now()
      )`);
    this.addSql('CREATE UNIQUE INDEX domains_domain_key ON domains (domain)');
    this.addSql('CREATE UNIQUE INDEX domains_slug_key ON domains (slug)');
    this.addSql('CREATE UNIQUE INDEX one_primary_domain_per_site ON domains (site_uuid) WHERE is_primary');
    this.addSql(`
      CREATE TABLE invitations (
        id serial PRIMARY KEY,
        uuid uuid NOT NULL UNIQUE,
        token uuid NOT NULL UNIQUE,
        organization_uuid uuid NOT NULL REFERENCES organizations (uuid) ON DELETE CASCADE,
        invitee_identifier varchar(254) NOT NULL,
        permissions jsonb NOT NULL DEFAULT '[]',
        invitation_config jsonb NOT NULL DEFAULT '{}',
        invited_by_uuid uuid REFERENCES users (uuid) ON DELETE SET NULL,
        created timestamptz NOT NULL DEFAULT now(),
        modified timestamptz NOT NULL DEFAULT now(),
        expires_at timestamptz NOT NULL,
        sent_count integer NOT NULL DEFAULT 0,
        last_sent_at timestamptz,
        accepted_at timestamptz,
        accepted_by_uuid uuid REFERENCES users (uuid) ON DELETE SET NULL,
        cancelled_at timestamptz
      )`);
    this.addSql('CREATE INDEX invitations_organization_idx ON invitations (organization_uuid)');
    // The version of each site schema (tenant migrations), so `platform migrate` resumes and reports.
    this.addSql(`
      CREATE TABLE tenant_schemas (
        schema_name varchar(63) PRIMARY KEY REFERENCES sites (schema_name) ON DELETE CASCADE ON UPDATE CASCADE,
        version integer NOT NULL DEFAULT 0,
        migrated_at timestamptz,
        last_error text
      )`);
  }
  override async down(): Promise<void> {
    for (const t of ['tenant_schemas', 'invitations', 'domains', 'object_permissions', 'sites', 'member_groups', 'group_permissions', 'groups', 'permissions', 'organization_members', 'organizations']) {
      this.addSql(`DROP TABLE ${t}`);
    }
  }
}

/**
 * Verified e-mail changes: a self-service change waits in `pending_email` until the link mailed
 * to the new address is used (email_confirmations). E-mail uniqueness now covers deleted users
 * too, so a restored account never collides; where a deleted user shares an address with
 * another user already, the deleted one's address is freed (cleared) first.
 */
export class Migration0003VerifiedEmail extends Migration {
  override name = '0003_verified_email';
  override async up(): Promise<void> {
    this.addSql(`
      UPDATE users d SET email = ''
       WHERE d.is_deleted AND d.email <> ''
         AND EXISTS (SELECT 1 FROM users o WHERE o.uuid <> d.uuid AND lower(o.email) = lower(d.email)
                        AND (NOT o.is_deleted OR o.date_joined > d.date_joined OR (o.date_joined = d.date_joined AND o.uuid > d.uuid)))`);
    this.addSql('DROP INDEX users_email_key');
    this.addSql(`CREATE UNIQUE INDEX users_email_key ON users (lower(email)) WHERE email <> ''`);
    this.addSql(`ALTER TABLE users ADD COLUMN pending_email varchar(254) NOT NULL DEFAULT ''`);
    this.addSql(`
      CREATE TABLE email_confirmations (
        token uuid PRIMARY KEY,
        user_uuid uuid NOT NULL UNIQUE REFERENCES users (uuid) ON DELETE CASCADE,
        email varchar(254) NOT NULL,
        created timestamptz NOT NULL DEFAULT now(),
        expires_at timestamptz NOT NULL
      )`);
  }
  override async down(): Promise<void> {
    this.addSql('DROP TABLE email_confirmations');
    this.addSql('ALTER TABLE users DROP COLUMN pending_email');
    this.addSql('DROP INDEX users_email_key');
    this.addSql(`CREATE UNIQUE INDEX users_email_key ON users (lower(email)) WHERE email <> '' AND NOT is_deleted`);
  }
}

/**
 * Change notifications for the per-process caches (db/changes.ts), sent by triggers inside the
 * changing transaction, so that no write path (API, CLI direct mode, a migration, an operator's
 * SQL) can forget one. `platform_notify_change(topic, column)`: per row, `topic:<the row's column>`
 * (`auth:<user uuid>`); without a column, per statement, `topic:<the table's schema>`. PostgreSQL
 * folds identical notifications of one transaction into one.
 */
export class Migration0004ChangeNotifications extends Migration {
  override name = '0004_change_notifications';
  override async up(): Promise<void> {
    this.addSql(`
      CREATE FUNCTION public.platform_notify_change() RETURNS trigger LANGUAGE plpgsql AS $$
      BEGIN
        IF TG_NARGS = 1 THEN
          PERFORM pg_notify('platform_changes', TG_ARGV[0] || ':' || TG_TABLE_SCHEMA);
          RETURN NULL;
        END IF;
        IF TG_OP <> 'INSERT' THEN
          PERFORM pg_notify('platform_changes', TG_ARGV[0] || ':' || (to_jsonb(OLD) ->> TG_ARGV[1]));
        END IF;
        IF TG_OP <> 'DELETE' THEN
          PERFORM pg_notify('platform_changes', TG_ARGV[0] || ':' || (to_jsonb(NEW) ->> TG_ARGV[1]));
        END IF;
        RETURN NULL;
      END $$`);
    this.addSql(`CREATE TRIGGER users_changed AFTER UPDATE OR DELETE ON users FOR EACH ROW EXECUTE FUNCTION public.platform_notify_change('auth', 'uuid')`);
    this.addSql(
      `CREATE TRIGGER organization_members_changed AFTER INSERT OR UPDATE OR DELETE ON organization_members FOR EACH ROW EXECUTE FUNCTION public.platform_notify_change('auth', 'user_uuid')`,
    );
  }
  override async down(): Promise<void> {
    this.addSql('DROP TRIGGER organization_members_changed ON organization_members');
    this.addSql('DROP TRIGGER users_changed ON users');
    this.addSql('DROP FUNCTION public.platform_notify_change()');
  }
}

/**
 * The function job queue (shared/functions/queue.ts): one row per queued execution, naming the
 * site schema and the invocation record there. Shared by every server process: a process claims
 * a row (`FOR UPDATE SKIP LOCKED`) with a lease it renews while the function runs; a row whose
 * lease ran out (its process died) is claimed again. A new row notifies `platform_changes`
 * (`function-jobs:`) so idle processes claim it at once. A site's rows go with its schema.
 */
export class Migration0005FunctionJobs extends Migration {
  override name = '0005_function_jobs';
  override async up(): Promise<void> {
    this.addSql(`
      CREATE TABLE function_jobs (
        id bigserial PRIMARY KEY,
        site_schema varchar(63) NOT NULL REFERENCES tenant_schemas (schema_name) ON DELETE CASCADE ON UPDATE CASCADE,
        invocation_id bigint NOT NULL,
        attempts integer NOT NULL DEFAULT 0,
        locked_by text,
        locked_until timestamptz,
        created_at timestamptz NOT NULL DEFAULT now()
      )`);
    this.addSql('CREATE INDEX function_jobs_claim_idx ON function_jobs (locked_until NULLS FIRST, id)');
    this.addSql(`CREATE TRIGGER function_jobs_queued AFTER INSERT ON function_jobs FOR EACH ROW WHEN (NEW.locked_by IS NULL) EXECUTE FUNCTION public.platform_notify_change('function-jobs')`);
  }
  override async down(): Promise<void> {
    this.addSql('DROP TABLE function_jobs');
  }
}

/**
 * Browser sessions of the browsable API (shared/auth/sessions.ts, spec Part 1 §5.6): one row per
 * signed-in browser, keyed by the SHA-256 of the cookie's random value (the value itself is never
 * stored; the CSRF token is derived from it). `site_schema` is null for a platform user's
 * session, else the site whose user it is (a session is valid on that site only); a site's rows go
 * with its schema. `generation` is the user's token generation at sign-in: a password change,
 * deactivation or revocation of all tokens ends the session too.
 */
export class Migration0006Sessions extends Migration {
  override name = '0006_sessions';
  override async up(): Promise<void> {
    this.addSql(`
      CREATE TABLE sessions (
        id uuid PRIMARY KEY DEFAULT gen_random_uuid(),
        key_hash bytea NOT NULL UNIQUE,
        site_schema varchar(63) REFERENCES tenant_schemas (schema_name) ON DELETE CASCADE ON UPDATE CASCADE,
        user_uuid uuid NOT NULL,
        generation integer NOT NULL,
        user_agent text NOT NULL DEFAULT '',
        ip text NOT NULL DEFAULT '',
        created_at timestamptz NOT NULL DEFAULT now(),
        expires_at timestamptz NOT NULL
      )`);
    this.addSql('CREATE INDEX sessions_user_idx ON sessions (user_uuid, site_schema)');
    this.addSql('CREATE INDEX sessions_expires_idx ON sessions (expires_at)');
  }
  override async down(): Promise<void> {
    this.addSql('DROP TABLE sessions');
  }
}

/**
 * Idempotency keys (server/http/idempotency.ts, docs/api-conventions.md "Idempotency-Key"): one
 * row per key a client sent on a route that takes one, scoped by the site (null on the platform
 * host) and the principal that sent it, so no other user or site ever replays it. While the first
 * request runs the row holds a lease (`lock_token`, `locked_until`, renewed as it runs); once it
 * succeeded, its answer (status, the headers that matter, body). Rows go after `expires_at`
 * (24 hours), with the scheduled prune (shared/auth/sessions.ts pruneExpired); a site's with its schema.
 */
export class Migration0007IdempotencyKeys extends Migration {
  override name = '0007_idempotency_keys';
  override async up(): Promise<void> {
    this.addSql(`
      CREATE TABLE idempotency_keys (
        id bigserial PRIMARY KEY,
        site_schema varchar(63) REFERENCES tenant_schemas (schema_name) ON DELETE CASCADE ON UPDATE CASCADE,
        principal text NOT NULL,
        key text NOT NULL,
        fingerprint text NOT NULL,
        operation text NOT NULL,
        lock_token uuid,
        locked_until timestamptz,
        status integer,
        headers jsonb,
        body bytea,
        created_at timestamptz NOT NULL DEFAULT now(),
        expires_at timestamptz NOT NULL,
        CONSTRAINT idempotency_keys_scope_key UNIQUE NULLS NOT DISTINCT (site_schema, principal, key)
      )`);
    this.addSql('CREATE INDEX idempotency_keys_expires_idx ON idempotency_keys (expires_at)');
  }
  override async down(): Promise<void> {
    this.addSql('DROP TABLE idempotency_keys');
  }
}

/**
 * Domain ownership (docs/domains.md): a customer domain routes only once verified by a DNS TXT
 * record carrying its `verification_token`; names the platform assigns need no token (''). A
 * primary domain is always verified (the constraint). Domains that existed before keep routing:
 * they are marked verified as of their creation (operators may re-check them).
 */
export class Migration0008DomainVerification extends Migration {
  override name = '0008_domain_verification';
  override async up(): Promise<void> {
    this.addSql(`ALTER TABLE domains ADD COLUMN verification_token varchar(64) NOT NULL DEFAULT '', ADD COLUMN verified_at timestamptz NULL`);
    this.addSql('UPDATE domains SET verified_at = created_at');
    this.addSql('ALTER TABLE domains ADD CONSTRAINT primary_domain_verified CHECK (NOT is_primary OR verified_at IS NOT NULL)');
  }
  override async down(): Promise<void> {
    this.addSql('ALTER TABLE domains DROP CONSTRAINT primary_domain_verified, DROP COLUMN verified_at, DROP COLUMN verification_token');
  }
}

/**
 * What a server tells the processes that share its database without serving requests (the
 * CLI's direct mode): its configured public URL, for the absolute links they build.
 */
export class Migration0009PlatformSettings extends Migration {
  override name = '0009_platform_settings';
  override async up(): Promise<void> {
    this.addSql('CREATE TABLE platform_settings (key varchar(100) PRIMARY KEY, value text NOT NULL, updated_at timestamptz NOT NULL DEFAULT now())');
  }
  override async down(): Promise<void> {
    this.addSql('DROP TABLE platform_settings');
  }
}

/**
 * Frontend workers' addresses (issue 31, docs/frontend-workers.md): `worker_hosts` names every
 * host a worker serves (the worker itself lives in its site's schema). One namespace of hosts
 * with `domains`: a trigger on each table refuses a host the other holds, under a transaction
 * lock on the host so that two concurrent claims serialise (the second sees the first's commit);
 * the refusal is the unique violation of the table written, so each service's existing handling
 * of "taken" applies (`domains_domain_key`, `worker_hosts_pkey`).
 */
export class Migration0010WorkerHosts extends Migration {
  override name = '0010_worker_hosts';
  override async up(): Promise<void> {
    this.addSql(`
      CREATE TABLE worker_hosts (
        host varchar(253) PRIMARY KEY,
        site_uuid uuid NOT NULL REFERENCES sites (uuid) ON DELETE CASCADE,
        worker_uuid uuid NOT NULL,
        created_at timestamptz NOT NULL DEFAULT now()
      )`);
    this.addSql('CREATE UNIQUE INDEX worker_hosts_worker_key ON worker_hosts (worker_uuid)');
    this.addSql(`
      CREATE FUNCTION claim_host() RETURNS trigger LANGUAGE plpgsql AS $fn$
      DECLARE
        claimed text := to_jsonb(NEW) ->> TG_ARGV[0];
        taken boolean;
      BEGIN
        PERFORM pg_advisory_xact_lock(hashtext('host:' || claimed));
        IF TG_TABLE_NAME = 'domains' THEN
          SELECT EXISTS (SELECT 1 FROM public.worker_hosts w WHERE w.host = claimed) INTO taken;
        ELSE
          SELECT EXISTS (SELECT 1 FROM public.domains d WHERE d.domain = claimed) INTO taken;
        END IF;
        IF taken THEN
          RAISE EXCEPTION 'The host % is taken.', claimed USING ERRCODE = 'unique_violation',
            CONSTRAINT = CASE WHEN TG_TABLE_NAME = 'domains' THEN 'domains_domain_key' ELSE 'worker_hosts_pkey' END;
        END IF;
        RETURN NEW;
      END $fn$`);
    this.addSql('CREATE TRIGGER domains_claim_host BEFORE INSERT OR UPDATE OF domain ON domains FOR EACH ROW EXECUTE FUNCTION claim_host(\'domain\')');
    this.addSql('CREATE TRIGGER worker_hosts_claim_host BEFORE INSERT OR UPDATE OF host ON worker_hosts FOR EACH ROW EXECUTE FUNCTION claim_host(\'host\')');
  }
  override async down(): Promise<void> {
    this.addSql('DROP TRIGGER domains_claim_host ON domains');
    this.addSql('DROP TABLE worker_hosts');
    this.addSql('DROP FUNCTION claim_host()');
  }
}

/** Timer jobs run once per interval across every server process (db/scheduled-jobs.ts): one row per job. */
export class Migration0011ScheduledJobs extends Migration {
  override name = '0011_scheduled_jobs';
  override async up(): Promise<void> {
    this.addSql(`CREATE TABLE scheduled_jobs (
      name text PRIMARY KEY,
      next_run_at timestamptz NOT NULL,
      runs bigint NOT NULL DEFAULT 0,
      last_started_at timestamptz,
      last_finished_at timestamptz,
      last_owner text,
      last_error text
    )`);
  }
  override async down(): Promise<void> {
    this.addSql('DROP TABLE scheduled_jobs');
  }
}

/**
 * Several PostgreSQL clusters (db/clusters.ts, docs/scale-out.md): the registry, and the cluster of
 * each site. `primary` is the platform database itself (its URL is the server's own, never
 * stored); every existing site is on it.
 */
export class Migration0012Clusters extends Migration {
  override name = '0012_clusters';
  override async up(): Promise<void> {
    this.addSql(`CREATE TABLE clusters (
      name varchar(40) PRIMARY KEY CHECK (name ~ '^[a-z][a-z0-9-]{0,39}$'),
      url text,
      direct_url text,
      capacity integer CHECK (capacity IS NULL OR capacity >= 0),
      state varchar(10) NOT NULL DEFAULT 'active' CHECK (state IN ('active', 'draining', 'read-only')),
      created_at timestamptz NOT NULL DEFAULT now(),
      CHECK ((name = 'primary') = (url IS NULL))
    )`);
    this.addSql(`INSERT INTO clusters (name) VALUES ('primary')`);
    this.addSql(`ALTER TABLE sites ADD COLUMN cluster varchar(40) NOT NULL DEFAULT 'primary' REFERENCES clusters (name)`);
    this.addSql('CREATE INDEX sites_cluster_idx ON sites (cluster)');
  }
  override async down(): Promise<void> {
    this.addSql('ALTER TABLE sites DROP COLUMN cluster');
    this.addSql('DROP TABLE clusters');
  }
}

/**
 * Site moves between clusters (sites/site-move.ts, docs/scale-out.md "Moving a site"): one row per
 * move under way or done and not cleaned up, with the step it reached, so that an interrupted move
 * is resumed or undone from there.
 */
export class Migration0013SiteMoves extends Migration {
  override name = '0013_site_moves';
  override async up(): Promise<void> {
    this.addSql(`CREATE TABLE site_moves (
      site_uuid uuid PRIMARY KEY REFERENCES sites (uuid) ON DELETE CASCADE,
      schema_name varchar(63) NOT NULL,
      source varchar(40) NOT NULL REFERENCES clusters (name),
      target varchar(40) NOT NULL REFERENCES clusters (name),
      method varchar(10) NOT NULL CHECK (method IN ('logical', 'copy')),
      step varchar(20) NOT NULL,
      started_at timestamptz NOT NULL DEFAULT now(),
      updated_at timestamptz NOT NULL DEFAULT now(),
      freeze_ms integer,
      error text
    )`);
  }
  override async down(): Promise<void> {
    this.addSql('DROP TABLE site_moves');
  }
}

export const platformMigrations = [
  Migration0001Users,
  Migration0002Tenancy,
  Migration0003VerifiedEmail,
  Migration0004ChangeNotifications,
  Migration0005FunctionJobs,
  Migration0006Sessions,
  Migration0007IdempotencyKeys,
  Migration0008DomainVerification,
  Migration0009PlatformSettings,
  Migration0010WorkerHosts,
  Migration0011ScheduledJobs,
  Migration0012Clusters,
  Migration0013SiteMoves,
];
