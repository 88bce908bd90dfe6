import pino from 'pino';
import type { LogLevel } from '../config.ts';

export type Logger = pino.Logger;

// Structured JSON logs. Request logs carry method, path (never the query string, which
// may hold tokens), status, duration, request id and tenant; headers and bodies are never
// logged, and the redaction below is a second line of defence.
export function createLogger(level: LogLevel, options: { destination?: pino.DestinationStream; service?: string } = {}): Logger {
  const settings: pino.LoggerOptions = {
    level,
    base: { service: options.service ?? 'platform' },
    timestamp: pino.stdTimeFunctions.isoTime,
    redact: {
      paths: ['password', '*.password', 'token', '*.token', 'access', 'refresh', '*.access', '*.refresh', 'authorization', '*.authorization', 'secret', '*.secret'],
      censor: '[redacted]',
    },
  };
  return options.destination ? pino(settings, options.destination) : pino(settings);
}
