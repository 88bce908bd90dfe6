// A test file's own database with the platform migrated, and an ORM on it.
import type { TestFn } from 'ava';
import { createOrm, migratePlatform, type Orm } from '../db/orm.ts';
import { createTestDatabase, type TestDatabase } from './database.ts';

/** Made before the file's tests, closed and dropped after them; `orm()` inside a test. */
export function platformDatabase(test: TestFn): () => Orm {
  let db: TestDatabase | undefined;
  let orm: Orm | undefined;
  test.before(async () => {
    db = await createTestDatabase();
    orm = await createOrm(db.url);
    await migratePlatform(orm, db.url);
  });
  test.after.always(async () => {
    await orm?.close(true);
    await db?.drop();
  });
  return () => orm!;
}
