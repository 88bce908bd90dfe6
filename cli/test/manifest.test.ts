// oclif.manifest.json lets `platform` start without importing its commands, and
// operations.json gives the commands their routes' flags and help; a stale one would hide a
// command, a flag or a route's change. Both must be exactly what the code says now (`npm run manifest`).
import fs from 'node:fs';
import test from 'ava';
import { buildManifest, buildOperations, MANIFEST_FILE, OPERATIONS_FILE } from '../../scripts/manifest.ts';

test('oclif.manifest.json is current (run `npm run manifest` after changing a command)', async (t) => {
  t.is(fs.readFileSync(MANIFEST_FILE, 'utf8'), await buildManifest());
});

test('operations.json is current (run `npm run manifest` after changing a route)', async (t) => {
  t.is(fs.readFileSync(OPERATIONS_FILE, 'utf8'), await buildOperations());
});
