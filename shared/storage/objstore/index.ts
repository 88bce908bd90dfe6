// The object store the configuration names: S3 when S3_ENDPOINT is set, else a directory.
import path from 'node:path';
import { filesystemStore } from './filesystem.ts';
import type { StorageConfig } from './config.ts';
import type { ObjectStore } from './types.ts';

export { loadStorageConfig, type FilesystemStorageConfig, type S3StorageConfig, type StorageConfig } from './config.ts';
export { filesystemStore, sweepTemp } from './filesystem.ts';
export type { S3Options } from './s3.ts';
export * from './types.ts';

/**
 * The store of `config`; a filesystem store without STORAGE_DIR lives in `{dataDir}/storage`.
 * The S3 client (minio, ≈ 70 ms to load) is imported only when the configuration names S3.
 */
export async function storeFromConfig(config: StorageConfig, dataDir: string): Promise<ObjectStore> {
  if (config.kind === 's3') {
    const { kind: _kind, ...options } = config;
    const { s3Store } = await import('./s3.ts');
    return s3Store(options);
  }
  return filesystemStore(config.dir ?? path.join(dataDir, 'storage'));
}
