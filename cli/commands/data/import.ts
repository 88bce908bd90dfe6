import fs from 'node:fs';
import path from 'node:path';
import { Transform, pipeline, type Readable } from 'node:stream';
import { Flags } from '@oclif/core';
import { fieldError } from '../../../shared/errors.ts';
import { BackendCommand } from '../../base.ts';
import type { CsvImportOptions, CsvImportReport } from '../../backend/types.ts';
import { appFlag, bytes, fileSize, jsonObject, plural, Progress, siteFlag, tableFlag } from '../../tables.ts';

/** The report as lines: the counts, then one line per failed row. */
export function reportLines(r: CsvImportReport): string[] {
  const head = r.dry_run
    ? `Dry run: ${plural(r.total_rows, 'row')} checked, ${r.total_rows - r.failed} valid, ${r.failed} invalid; nothing was stored.`
    : `Imported ${plural(r.created, 'record')} of ${plural(r.total_rows, 'row')}; ${r.failed} failed.`;
  const lines = [head];
  for (const e of r.errors) {
    const fields = Object.entries(e.errors ?? {}).map(([field, messages]) => `${field}: ${(messages ?? []).join(' ')}`);
    lines.push(`  row ${e.row}: ${fields.join('; ')}`);
  }
  return lines;
}

/** Opens `file` as a stream that reports how much of it has been read. */
export function openWithProgress(file: string, onRead: (n: number) => void): () => Readable {
  return () => {
    let read = 0;
    const tap = new Transform({
      transform(chunk: Buffer, _enc, done) {
        read += chunk.length;
        onRead(read);
        done(null, chunk);
      },
    });
    pipeline(fs.createReadStream(file), tap, () => undefined); // a read error fails `tap`, hence the upload
    return tap;
  };
}

export default class DataImportCommand extends BackendCommand<typeof DataImportCommand> {
  static override summary = 'Import records from a CSV file (header row: field names).';
  static override description = 'The file is streamed to the API. --mapping renames CSV headers to fields ({"E-mail":"email"}); --dry-run checks every row and stores nothing. Exit code 1 when a row failed. Progress goes to stderr.';
  static override examples = [
    '<%= config.bin %> data import --table companies --file fixtures/csv/companies.csv --site shop_prod --app crm',
    `<%= config.bin %> data import --table contacts --file people.csv --mapping '{"E-mail":"email"}' --dry-run --site shop_prod --app crm --json`,
  ];
  static override flags = {
    site: siteFlag,
    app: appFlag,
    table: tableFlag,
    file: Flags.string({ summary: 'The CSV file.', required: true }),
    mapping: Flags.string({ summary: 'CSV header → field, as a JSON object.' }),
    'dry-run': Flags.boolean({ summary: 'Check the rows, store nothing.' }),
  };

  async run(): Promise<CsvImportReport> {
    const f = this.flags;
    const size = fileSize(f.file, 'file');
    const options: CsvImportOptions = { dry_run: f['dry-run'] };
    if (f.mapping !== undefined) {
      const mapping = jsonObject(f.mapping, 'mapping');
      for (const [header, field] of Object.entries(mapping)) if (typeof field !== 'string') throw fieldError('mapping', `The field for "${header}" must be a string.`);
      options.mapping = mapping as Record<string, string>;
    }
    const progress = new Progress((line) => this.info(line));
    this.info(`${f['dry-run'] ? 'Checking' : 'Importing'} ${path.basename(f.file)} (${bytes(size)}) into ${f.table}…`);
    const open = openWithProgress(f.file, (n) => progress.tick(() => `  ${bytes(n)} of ${bytes(size)} sent (${size ? Math.floor((n / size) * 100) : 100}%)…`));
    const report = await (await this.backend()).importCsv(f.site, f.app, f.table, open, options);
    for (const line of reportLines(report)) this.log(line);
    if (report.failed > 0) process.exitCode = 1;
    return report;
  }
}
