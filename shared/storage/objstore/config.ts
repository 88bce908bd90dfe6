// The object store's configuration, read from the environment with the helpers of shared/config.ts
// (a bad value stops the start with a message naming the variable). docs/configuration.md "Storage".
import path from 'node:path';
import { bool, ConfigError, str, url, type Env } from '../../config.ts';
import { validBucketName } from './s3-names.ts';
import type { S3Options } from './s3.ts';

export interface FilesystemStorageConfig {
  kind: 'filesystem';
  /** STORAGE_DIR, absolute; undefined: `{PLATFORM_DATA_DIR}/storage` (storeFromConfig). */
  dir: string | undefined;
}

export interface S3StorageConfig extends S3Options {
  kind: 's3';
}

export type StorageConfig = FilesystemStorageConfig | S3StorageConfig;

export function loadStorageConfig(env: Env = process.env): StorageConfig {
  const endpoint = url(env, 'S3_ENDPOINT', ['http:', 'https:']);
  if (endpoint === undefined) {
    const dir = str(env, 'STORAGE_DIR');
    return { kind: 'filesystem', dir: dir === undefined ? undefined : path.resolve(dir) };
  }
  const parsed = new URL(endpoint);
  if ((parsed.pathname !== '/' && parsed.pathname !== '') || parsed.search || parsed.hash || parsed.username || parsed.password) {
    throw new ConfigError('S3_ENDPOINT must be the service origin only (scheme, host and port; credentials go in S3_ACCESS_KEY/S3_SECRET_KEY)');
  }
  const required = (name: string): string => {
    const v = str(env, name);
    if (v === undefined) throw new ConfigError(`${name} is required when S3_ENDPOINT is set`);
    return v;
  };
  const bucket = str(env, 'S3_BUCKET') ?? 'platform';
  if (!validBucketName(bucket)) {
    throw new ConfigError(`S3_BUCKET is not a valid bucket name (3-63 lowercase letters, digits, dots and hyphens, starting and ending with a letter or digit), got ${JSON.stringify(bucket)}`);
  }
  return {
    kind: 's3',
    endpoint: parsed.origin,
    accessKey: required('S3_ACCESS_KEY'),
    secretKey: required('S3_SECRET_KEY'),
    bucket,
    bucketPerSite: bool(env, 'S3_BUCKET_PER_SITE', false),
    region: str(env, 'S3_REGION') ?? 'us-east-1',
    pathStyle: bool(env, 'S3_FORCE_PATH_STYLE', true),
  };
}
