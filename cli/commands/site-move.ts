// `platform site move SITE --to CLUSTER` (docs/scale-out.md "Moving a site"): an operator command
// on the databases directly, as `platform site backup` is. Progress on stderr.
import { Args, Flags } from '@oclif/core';
import { DomainError } from '../../shared/errors.ts';
import { BaseCommand } from '../base.ts';

export class SiteMoveCommand extends BaseCommand<typeof SiteMoveCommand> {
  static override summary = 'Move a site to another PostgreSQL cluster (logical replication, then a short write freeze).';
  static override description =
    'Copies the schema\'s definition to the target, replicates its rows there (PostgreSQL logical replication) while the site keeps serving, then holds the site\'s writes (they wait, they are not refused) while the stream catches up, sequences are set and every table\'s rows are counted and checksummed, and switches the site\'s cluster. A freeze longer than --freeze-timeout aborts the move: the site stays on its source. Without wal_level = logical on the source, the site is copied whole during the freeze (a longer one); the command says so first. An interrupted move leaves the site serving from its source: --resume finishes it, --abort undoes it. The old copy stays on the source until --cleanup. See docs/scale-out.md.';
  static override examples = [
    '<%= config.bin %> site move shop --to eu-2',
    '<%= config.bin %> site move shop --resume',
    '<%= config.bin %> site move shop --abort --json',
    '<%= config.bin %> site move shop --cleanup',
  ];
  static override args = { site: Args.string({ required: true, description: 'The site: its slug, schema name or UUID.' }) };
  static override flags = {
    to: Flags.string({ summary: 'The cluster to move the site to (`platform cluster list`).' }),
    resume: Flags.boolean({ summary: 'Finish an interrupted move from the step it reached.', exclusive: ['to', 'abort', 'cleanup'] }),
    abort: Flags.boolean({ summary: 'Undo a move that has not switched the site yet.', exclusive: ['to', 'resume', 'cleanup'] }),
    cleanup: Flags.boolean({ summary: 'Drop the old copy of a moved site on its source cluster.', exclusive: ['to', 'resume', 'abort'] }),
    'freeze-timeout': Flags.integer({ min: 1, max: 25, default: 10, summary: 'Seconds the write freeze may last before the move aborts.' }),
  };

  protected override interruption(): string {
    return 'the site serves from its source until the switch, from its target after it: `platform site move SITE --resume` finishes the move, `--abort` undoes it';
  }

  async run() {
    const { abortMove, cleanupMove, moveSite, resumeMove } = await import('../../shared/sites/site-move.ts');
    const { site } = this.args;
    if (!this.flags.to && !this.flags.resume && !this.flags.abort && !this.flags.cleanup) {
      throw new DomainError('VALIDATION_ERROR', 'Name the target cluster (--to CLUSTER), or --resume, --abort or --cleanup a move.', { errors: { to: ['This field is required.'] } });
    }
    return this.withDatabase(async (db, config) => {
      const options = {
        em: db.orm.em.fork(),
        directUrl: db.directUrl,
        pgBinDir: config.pgBinDir,
        freezeTimeoutMs: this.flags['freeze-timeout'] * 1000,
        onProgress: (line: string) => this.info(line),
        stopAfter: process.env.PLATFORM_MOVE_STOP_AFTER, // tests: a kill -9 at a step (cli/test/site-move.test.ts)
      };
      if (this.flags.abort) {
        const row = await abortMove(site, options);
        this.log(`Aborted the move of ${row.schema_name} to ${row.target}: the site stays on ${row.source}.`);
        return { status: 'success' as const, aborted: row };
      }
      if (this.flags.cleanup) {
        const row = await cleanupMove(site, options);
        this.log(`Dropped the old copy of ${row.schema_name} on ${row.source}.`);
        return { status: 'success' as const, cleaned: row };
      }
      const result = this.flags.resume ? await resumeMove(site, options) : await moveSite(site, this.flags.to!, options);
      this.log(`Moved ${result.slug} from ${result.source} to ${result.target} (${result.method}): writes held ${result.freeze_ms} ms, ${(result.duration_ms / 1000).toFixed(1)} s in all.`);
      return { status: 'success' as const, ...result };
    });
  }
}
