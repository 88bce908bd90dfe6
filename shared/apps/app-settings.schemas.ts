// App settings (spec Part 2 §2): exactly one row per app, created with it, never deleted.
import { Type, type Static } from '@sinclair/typebox';
import { readOnlyProps } from '../common/read-only.ts';
import { StringEnum } from '../common/validation.ts';

export const CATEGORIES = ['analytics', 'integration', 'storage'] as const;
export const MAX_ICON_BYTES = 5 * 1024 * 1024;

export const SETTINGS_DEFAULTS = {
  primary_color: '#1976d2',
  secondary_color: '#dc004e',
  category: 'analytics',
  max_functions: 100,
  max_datatables: 50,
  rate_limit_per_hour: 1000,
  documentation_url: '',
  support_email: '',
} as const;

const Colour = Type.String({ pattern: '^#[0-9A-Fa-f]{6}$', description: 'Hex form #RRGGBB' });
const Count = Type.Integer({ minimum: 0, maximum: 2_147_483_647 });

const writable = {
  display_name: Type.String({ minLength: 1, maxLength: 255 }),
  primary_color: Colour,
  secondary_color: Colour,
  category: StringEnum(CATEGORIES),
  max_functions: Count,
  max_datatables: Count,
  rate_limit_per_hour: Count,
  documentation_url: Type.String({ maxLength: 2000, pattern: '^(https?://[^\\s/$.?#][^\\s]*)?$', description: 'An http(s) URL, or empty' }),
  support_email: Type.String({ maxLength: 254, pattern: '^([^@\\s]+@[^@\\s]+\\.[^@\\s]+)?$', description: 'An e-mail address, or empty' }),
  default_frontend_worker: Type.Union([Type.Integer({ minimum: 1 }), Type.Null()], { description: 'Write-only: the id of a frontend worker of this app (400 for another app\'s), or null. Deleting the worker clears it.' }),
  icon: Type.Null({ description: 'null removes the icon (upload one with a multipart PATCH)' }),
};

const Time = Type.String({ format: 'date-time' });
const settingsFields = {
  display_name: Type.String(),
  icon_url: Type.Union([Type.String(), Type.Null()], { description: 'Absolute URL of the icon, or null' }),
  primary_color: Type.String(),
  secondary_color: Type.String(),
  category: StringEnum(CATEGORIES),
  max_functions: Type.Integer(),
  max_datatables: Type.Integer(),
  rate_limit_per_hour: Type.Integer(),
  documentation_url: Type.String(),
  support_email: Type.String(),
  default_frontend_worker_url: Type.Union([Type.String(), Type.Null()], { description: 'The address of the default frontend worker, or null' }),
  created_at: Time,
  updated_at: Time,
};

export const SettingsView = Type.Object(settingsFields);
export type SettingsView = Static<typeof SettingsView>;
/** PATCH (and the `settings` of app creation): fields left out keep their values (or defaults). */
export const SettingsPatch = Type.Partial(Type.Object(writable, { additionalProperties: false }));
export type SettingsPatch = Static<typeof SettingsPatch>;

/** Fields of the settings GET that PATCH and PUT accept back: `created_at` ignored when unchanged (a 400 when changed), the server-maintained ones ignored. */
const readOnly = { ...readOnlyProps(SettingsView, ['created_at']), ...readOnlyProps(SettingsView, ['icon_url', 'default_frontend_worker_url', 'updated_at'], 'maintained') };

/** PATCH of the settings route. */
export const SettingsPatchBody = Type.Object({ ...SettingsPatch.properties, ...readOnly }, { additionalProperties: false });

/** PUT (and POST): display_name is required; the other fields left out keep their values. */
export const SettingsPut = Type.Object(
  { ...SettingsPatch.properties, display_name: writable.display_name, ...readOnly },
  { additionalProperties: false },
);

export const SettingsDetail = Type.Object({ id: Type.Integer(), ...settingsFields });
export type SettingsDetail = Static<typeof SettingsDetail>;
export const SettingsLight = Type.Object({
  display_name: Type.String(),
  category: StringEnum(CATEGORIES),
  icon_url: Type.Union([Type.String(), Type.Null()]),
  primary_color: Type.String(),
});
export type SettingsLight = Static<typeof SettingsLight>;

export const SettingsResponse = Type.Object({ success: Type.Literal(true), message: Type.String(), data: SettingsView });
