// Moved to shared/testing/fixtures-csv.ts (test-only code). This re-export only keeps
// cli/test/data.test.ts compiling until the CLI rewrite imports the new path; delete it then.
export { csvRecords, parseCsv } from '../testing/fixtures-csv.ts';
