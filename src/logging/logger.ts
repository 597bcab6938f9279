import pino, { type DestinationStream, type Logger } from 'pino';

export type { Logger };

/**
 * JSON lines on stdout for journald. Secrets never reach a log line: the paths that could carry
 * one are redacted.
 */
export function createLogger(level: string, destination?: DestinationStream): Logger {
  return pino(
    {
      level,
      base: undefined,
      timestamp: pino.stdTimeFunctions.isoTime,
      formatters: { level: (label) => ({ level: label }) },
      redact: {
        paths: ['secret', 'secret_key', '*.secret', '*.secret_key', 'headers.authorization', 'headers["x-api-key"]', 'password', '*.password'],
        censor: '[redacted]',
      },
    },
    destination ?? pino.destination({ fd: 1, sync: false }),
  );
}
