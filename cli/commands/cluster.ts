// `platform cluster add|list|drain|activate` (docs/scale-out.md "Several clusters"): the registry
// of PostgreSQL clusters that hold site schemas. Operator commands on the platform database
// directly, as `platform migrate` is (no API route: clusters are the operator's, not a tenant's).
import { Args, Flags } from '@oclif/core';
import { BaseCommand } from '../base.ts';
import { columns, table } from '../output.ts';
import type { ClusterRow } from '../../shared/db/clusters.ts';

/** A row as the command shows it: URLs with their passwords hidden. */
async function shown(row: ClusterRow): Promise<ClusterRow> {
  const { redactUrl } = await import('../../shared/db/clusters.ts');
  return { ...row, url: redactUrl(row.url), direct_url: redactUrl(row.direct_url) };
}

const listColumns = columns<ClusterRow>('name state sites capacity url', { capacity: (r) => r.capacity ?? 'unlimited', url: (r) => r.url ?? '(the platform database)' });

export class ClusterAddCommand extends BaseCommand<typeof ClusterAddCommand> {
  static override summary = 'Register a PostgreSQL cluster for site schemas.';
  static override description =
    'The cluster must answer, must be an empty database of its own (not the platform database, nor another platform\'s), and receives the per-site tables (function queue, sessions, idempotency keys, schema versions). New sites are then placed on the active cluster with the fewest sites (or `platform site create --cluster`). Works on the database directly (DATABASE_DIRECT_URL, else DATABASE_URL, else the embedded PostgreSQL). See docs/scale-out.md.';
  static override examples = [
    '<%= config.bin %> cluster add eu-2 --url postgres://platform:secret@10.0.0.12:5432/platform',
    '<%= config.bin %> cluster add eu-3 --url postgres://platform@pgbouncer-3:6432/platform --direct-url postgres://platform@10.0.0.13:5432/platform --capacity 5000 --json',
  ];
  static override args = { name: Args.string({ required: true, description: 'The cluster\'s name: lower-case letters, digits and hyphens.' }) };
  static override flags = {
    url: Flags.string({ required: true, summary: 'Where the servers\' pools connect (the cluster, or a transaction pooler in front of it).' }),
    'direct-url': Flags.string({ summary: 'The database itself when --url is a pooler (sessions: LISTEN, migrations, moves).' }),
    capacity: Flags.integer({ min: 0, summary: 'At most this many sites are placed there (default: no limit).' }),
  };

  protected override interruption(): string {
    return 'the cluster is registered only once its tables are in place: run the command again';
  }

  async run() {
    const { addCluster } = await import('../../shared/db/clusters.ts');
    const row = await this.withDatabase((db) =>
      addCluster(db.orm.em.fork(), db.directUrl, { name: this.args.name, url: this.flags.url, directUrl: this.flags['direct-url'], capacity: this.flags.capacity }),
    );
    this.log(`Registered the cluster ${row.name} (active, no sites yet).`);
    return shown(row);
  }
}

export class ClusterListCommand extends BaseCommand<typeof ClusterListCommand> {
  static override summary = 'List the PostgreSQL clusters, their state and their sites.';
  static override examples = ['<%= config.bin %> cluster list', '<%= config.bin %> cluster list --json'];

  async run() {
    const { listClusters } = await import('../../shared/db/clusters.ts');
    const rows = await Promise.all((await this.withDatabase((db) => listClusters(db.orm.em.fork()))).map(shown));
    this.log(table(rows, listColumns));
    return rows;
  }
}

export class ClusterDrainCommand extends BaseCommand<typeof ClusterDrainCommand> {
  static override summary = 'Place no new site on a cluster (its sites keep serving).';
  static override description = 'A draining cluster takes no new site; its sites serve as before until moved. `--read-only` marks it read-only as well (the same for placement). `platform cluster activate` undoes either.';
  static override examples = ['<%= config.bin %> cluster drain eu-2', '<%= config.bin %> cluster drain eu-2 --read-only --json'];
  static override args = { name: Args.string({ required: true, description: 'The cluster.' }) };
  static override flags = { 'read-only': Flags.boolean({ summary: 'Mark it read-only rather than draining.' }) };

  async run() {
    const { setClusterState } = await import('../../shared/db/clusters.ts');
    const state = this.flags['read-only'] ? 'read-only' : 'draining';
    const row = await this.withDatabase((db) => setClusterState(db.orm.em.fork(), this.args.name, state));
    this.log(`The cluster ${row.name} is ${row.state}: no new site is placed there (${row.sites} site(s) stay).`);
    return shown(row);
  }
}

export class ClusterActivateCommand extends BaseCommand<typeof ClusterActivateCommand> {
  static override summary = 'Place new sites on a cluster again.';
  static override examples = ['<%= config.bin %> cluster activate eu-2'];
  static override args = { name: Args.string({ required: true, description: 'The cluster.' }) };

  async run() {
    const { setClusterState } = await import('../../shared/db/clusters.ts');
    const row = await this.withDatabase((db) => setClusterState(db.orm.em.fork(), this.args.name, 'active'));
    this.log(`The cluster ${row.name} is active.`);
    return shown(row);
  }
}

export const CLUSTER_COMMANDS = {
  'cluster:add': ClusterAddCommand,
  'cluster:list': ClusterListCommand,
  'cluster:drain': ClusterDrainCommand,
  'cluster:activate': ClusterActivateCommand,
};
