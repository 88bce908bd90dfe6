// Versioned migrations of the platform (control-plane) schema. Append only: a released
// migration is never edited; a change is a new class at the end of the list.
import { Migration } from '@mikro-orm/migrations';

export class Migration0001Users extends Migration {
  override name = '0001_users';
  override async up(): Promise<void> {
    this.addSql(`
      CREATE TABLE users (
        uuid uuid PRIMARY KEY,
        username varchar(150) NOT NULL,
        email varchar(254) NOT NULL DEFAULT '',
        first_name varchar(150) NOT NULL DEFAULT '',
        last_name varchar(150) NOT NULL DEFAULT '',
        password varchar(255) NOT NULL,
        is_active boolean NOT NULL DEFAULT true,
        is_deleted boolean NOT NULL DEFAULT false,
        is_staff boolean NOT NULL DEFAULT false,
        is_superuser boolean NOT NULL DEFAULT false,
        token_generation integer NOT NULL DEFAULT 0,
        date_joined timestamptz NOT NULL DEFAULT now(),
        modified timestamptz NOT NULL DEFAULT now(),
        last_login timestamptz NULL
      )`);
    this.addSql('CREATE UNIQUE INDEX users_username_key ON users (lower(username))');
    this.addSql(`CREATE UNIQUE INDEX users_email_key ON users (lower(email)) WHERE email <> '' AND NOT is_deleted`);
    this.addSql('CREATE INDEX users_date_joined_idx ON users (date_joined, uuid)');
    this.addSql(`
      CREATE TABLE token_blacklist (
        jti uuid PRIMARY KEY,
        user_uuid uuid NOT NULL REFERENCES users (uuid) ON DELETE CASCADE,
        expires_at timestamptz NOT NULL,
        blacklisted_at timestamptz NOT NULL DEFAULT now()
      )`);
    this.addSql('CREATE INDEX token_blacklist_expires_idx ON token_blacklist (expires_at)');
  }
  override async down(): Promise<void> {
    this.addSql('DROP TABLE token_blacklist');
    this.addSql('DROP TABLE users');
  }
}

export const platformMigrations = [Migration0001Users];
