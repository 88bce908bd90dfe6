import fs from 'node:fs';
import { Transform } from 'node:stream';
import { pipeline } from 'node:stream/promises';
import { Flags } from '@oclif/core';
import { DomainError } from '../../../shared/errors.ts';
import { BackendCommand } from '../../base.ts';
import { appFlag, bytes, CsvRowCounter, filterFlag, plural, Progress, recordQuery, siteFlag, sortFlag, tableFlag } from '../../tables.ts';

export interface ExportSummary {
  table: string;
  output: string | null;
  records: number;
  bytes: number;
}

export default class DataExportCommand extends BackendCommand<typeof DataExportCommand> {
  static override summary = 'Export the records of a data table as CSV (to a file, or to stdout).';
  static override description = 'The CSV is streamed from the API to the output as it comes (any size). Progress goes to stderr. With --json (which needs --output), prints {table, output, records, bytes}.';
  static override examples = [
    '<%= config.bin %> data export --table contacts --output contacts.csv --site shop_prod --app crm',
    "<%= config.bin %> data export --table contacts --filter 'status=lead' --sort last_name --site shop_prod --app crm > leads.csv",
  ];
  static override flags = {
    site: siteFlag,
    app: appFlag,
    table: tableFlag,
    filter: filterFlag,
    sort: sortFlag,
    output: Flags.string({ char: 'o', summary: 'The CSV file to write (default: stdout).' }),
  };

  async run(): Promise<ExportSummary> {
    const f = this.flags;
    if (this.jsonEnabled() && f.output === undefined) throw new DomainError('BAD_REQUEST', '--json needs --output (the CSV would share stdout with the JSON).');
    const query = recordQuery(f.filter, { _sort: f.sort });
    const source = await (await this.backend()).exportCsv(f.site, f.app, f.table, query);
    const counter = new CsvRowCounter();
    const progress = new Progress((line) => this.info(line));
    const where = f.output ?? 'stdout';
    this.info(`Exporting ${f.table} to ${where}…`);
    const tap = new Transform({
      transform(chunk: Buffer, _enc, done) {
        counter.push(chunk);
        progress.tick(() => `  ${plural(counter.records, 'record')} (${bytes(counter.bytes)})…`);
        done(null, chunk);
      },
    });
    if (f.output !== undefined) {
      const tmp = `${f.output}.part-${process.pid}`;
      try {
        await pipeline(source, tap, fs.createWriteStream(tmp));
        fs.renameSync(tmp, f.output);
      } catch (err) {
        fs.rmSync(tmp, { force: true });
        throw err;
      }
    } else {
      await pipeline(source, tap, process.stdout, { end: false });
    }
    const summary: ExportSummary = { table: f.table, output: f.output ?? null, records: counter.records, bytes: counter.bytes };
    const done = `Exported ${plural(summary.records, 'record')} (${bytes(summary.bytes)}) from ${f.table} to ${where}.`;
    if (f.output !== undefined) this.log(done);
    else this.info(done);
    return summary;
  }
}
