// The storage suite on the filesystem store (a directory of the test's own).
import { mkdtemp, rm } from 'node:fs/promises';
import os from 'node:os';
import path from 'node:path';
import test from 'ava';
import { storageSuite } from './storage-suite.ts';

let dir = '';
storageSuite(
  test,
  async () => {
    dir = await mkdtemp(path.join(os.tmpdir(), 'storage-fs-'));
    return { STORAGE_DIR: dir };
  },
  async () => {
    if (dir) await rm(dir, { recursive: true, force: true });
  },
);
