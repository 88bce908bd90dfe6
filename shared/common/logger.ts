import pino from 'pino';
import type { LogLevel } from '../config.ts';
import { isDatabaseError, summarizeDatabaseError } from '../db/errors.ts';

export type Logger = pino.Logger;

// Structured JSON logs. Request logs carry method, path (never the query string, which
// may hold tokens), status, duration, request id and tenant; headers and bodies are never
// logged, and the redaction below is a second line of defence. Every error logged under `err`
// goes through serializeError: a database error keeps its code, object names and message, never
// the SQL or the values in it (db/errors.ts), also as the cause of another error.
function serializeError(err: unknown): unknown {
  if (isDatabaseError(err)) return summarizeDatabaseError(err);
  if (!(err instanceof Error) || !causedByDatabase(err.cause)) return pino.stdSerializers.err(err as Error);
  // pino would merge the cause's message and stack into this error's: keep them apart.
  return { type: err.constructor.name, message: err.message, stack: err.stack, cause: serializeError(err.cause) };
}

const causedByDatabase = (cause: unknown): boolean => isDatabaseError(cause) || (cause instanceof Error && causedByDatabase(cause.cause));

export function createLogger(level: LogLevel, options: { destination?: pino.DestinationStream; service?: string } = {}): Logger {
  const settings: pino.LoggerOptions = {
    level,
    base: { service: options.service ?? 'platform' },
    timestamp: pino.stdTimeFunctions.isoTime,
    serializers: { err: serializeError },
    redact: {
      paths: ['password', '*.password', 'token', '*.token', 'access', 'refresh', '*.access', '*.refresh', 'authorization', '*.authorization', 'secret', '*.secret'],
      censor: '[redacted]',
    },
  };
  // Standard output, written asynchronously (a request never waits for its log line; pino flushes
  // what is buffered when the process exits).
  return pino(settings, options.destination ?? pino.destination({ dest: 1, sync: false }));
}
