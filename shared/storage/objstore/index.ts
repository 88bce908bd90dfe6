// The object store the configuration names: S3 when S3_ENDPOINT is set, else a directory.
import path from 'node:path';
import { filesystemStore } from './filesystem.ts';
import { s3Store } from './s3.ts';
import type { StorageConfig } from './config.ts';
import type { ObjectStore } from './types.ts';

export { loadStorageConfig, type FilesystemStorageConfig, type S3StorageConfig, type StorageConfig } from './config.ts';
export { filesystemStore, sweepTemp } from './filesystem.ts';
export { s3Store, type S3Options } from './s3.ts';
export * from './types.ts';

/** The store of `config`; a filesystem store without STORAGE_DIR lives in `{dataDir}/storage`. */
export function storeFromConfig(config: StorageConfig, dataDir: string): ObjectStore {
  if (config.kind === 's3') {
    const { kind: _kind, ...options } = config;
    return s3Store(options);
  }
  return filesystemStore(config.dir ?? path.join(dataDir, 'storage'));
}
