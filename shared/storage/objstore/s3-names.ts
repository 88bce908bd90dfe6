// S3 bucket names: the service's naming rules, and the bucket of one site in bucket-per-site mode.
// Apart from s3.ts so that reading the configuration does not load the S3 client.
import { createHash } from 'node:crypto';

/** Whether `name` is a valid S3 bucket name (the general-purpose bucket rules). */
export function validBucketName(name: string): boolean {
  if (name.length < 3 || name.length > 63 || !/^[a-z0-9][a-z0-9.-]*[a-z0-9]$/.test(name)) return false;
  if (name.includes('..') || name.includes('.-') || name.includes('-.')) return false;
  if (/\d+\.\d+\.\d+\.\d+/.test(name)) return false; // anywhere, as minio checks it
  if (/^(xn--|sthree-|amzn-s3-demo-)/.test(name) || /(-s3alias|--ol-s3|\.mrap|--x-s3)$/.test(name)) return false;
  return true;
}

/**
 * The bucket of one site: `{base}-{schema}` with `_` as `-`. Where that is not a valid bucket
 * name (too long, a trailing `-`, a reserved suffix) it is cut and given a hash of the schema
 * (`…-{8 hex}`), so distinct sites never share a bucket.
 */
export function siteBucketName(base: string, schema: string): string {
  const name = `${base}-${schema}`.toLowerCase().replace(/_/g, '-');
  if (validBucketName(name)) return name;
  const hash = createHash('sha256').update(schema).digest('hex').slice(0, 8);
  const head = name.slice(0, 63 - 9).replace(/[^a-z0-9]+$/, '');
  return `${head}-${hash}`;
}
