// The storage suite on the S3 store, against an S3-protocol server in process (s3rver): one
// bucket for the platform, keys prefixed by site.
import test from 'ava';
import { startS3, type TestS3 } from '../../shared/testing/s3.ts';
import { storageSuite } from './storage-suite.ts';

let s3: TestS3 | undefined;
storageSuite(
  test,
  async () => {
    s3 = await startS3();
    return { S3_ENDPOINT: s3.endpoint, S3_ACCESS_KEY: s3.accessKey, S3_SECRET_KEY: s3.secretKey, S3_BUCKET: 'platform-test' };
  },
  async () => {
    await s3?.close();
  },
);
