// Reads fixtures/csv/*.csv as records typed by the table schema (tests and demos): empty cells
// are null, numbers and booleans converted, object/array/geojson/any cells parsed as JSON.
import { readFileSync } from 'node:fs';
import type { TableSchema } from '../data/table-schema.ts';

/** RFC 4180 rows: quoted cells may hold commas, newlines and doubled quotes. */
export function parseCsv(text: string): string[][] {
  const rows: string[][] = [];
  let row: string[] = [];
  let cell = '';
  let quoted = false;
  for (let i = 0; i < text.length; i++) {
    const c = text[i]!;
    if (quoted) {
      if (c === '"' && text[i + 1] === '"') { cell += '"'; i++; }
      else if (c === '"') quoted = false;
      else cell += c;
    } else if (c === '"') quoted = true;
    else if (c === ',') { row.push(cell); cell = ''; }
    else if (c === '\n' || c === '\r') {
      if (c === '\r' && text[i + 1] === '\n') i++;
      row.push(cell); rows.push(row); row = []; cell = '';
    } else cell += c;
  }
  if (cell || row.length) { row.push(cell); rows.push(row); }
  return rows;
}

export function csvRecords(path: string | URL, schema: TableSchema): Record<string, unknown>[] {
  const [header, ...body] = parseCsv(readFileSync(path, 'utf8'));
  const types = new Map(schema.fields.map((f) => [f.name, f.type]));
  return body.map((cells) => Object.fromEntries(header!.map((name, i) => {
    const raw = cells[i] ?? '';
    if (raw === '') return [name, null];
    switch (types.get(name)) {
      case 'integer': case 'number': case 'year': return [name, Number(raw)];
      case 'boolean': return [name, raw === 'true'];
      case 'object': case 'array': case 'geojson': case 'any': return [name, JSON.parse(raw)];
      default: return [name, raw];
    }
  })));
}
