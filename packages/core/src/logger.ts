import { pino, type Logger, type DestinationStream } from 'pino';

export type { Logger } from 'pino';
export type LogFormat = 'json' | 'pretty';
export type LogLevel = 'trace' | 'debug' | 'info' | 'warn' | 'error' | 'fatal' | 'silent';

export interface LoggerOptions {
  format?: LogFormat;
  level?: LogLevel;
  /**
   * Base fields on every line, e.g. { name: 'controller' } (pino's key for the program). Not
   * `component`: the parts of a program log under that key (`log.child({ component: 'informer' })`),
   * and pino writes a key bound twice twice.
   */
  base?: Record<string, unknown>;
  /** Where lines go (default stdout). Tests pass a stream to capture them. */
  destination?: DestinationStream;
}

/**
 * The one way a process makes its root logger. Components get child loggers passed in
 * (`log.child({ node })`); nothing keeps a module-level logger.
 * `pretty` uses pino-pretty when it is installed (development); the bundled image falls back to JSON.
 */
export async function createLogger(opts: LoggerOptions = {}): Promise<Logger> {
  const options = {
    level: opts.level ?? 'info',
    base: opts.base ?? {},
    timestamp: pino.stdTimeFunctions.isoTime,
    formatters: { level: (label: string) => ({ level: label }) },
  };
  if (opts.destination) return pino(options, opts.destination);
  if (opts.format === 'pretty') {
    try {
      const pretty = (await import('pino-pretty')).default;
      return pino(options, pretty({ colorize: process.stdout.isTTY, translateTime: 'SYS:HH:MM:ss.l', sync: true }));
    } catch {
      // pino-pretty is a development dependency; without it, JSON is still readable.
    }
  }
  return pino(options, pino.destination({ dest: 1, sync: true }));
}

/** A logger that writes nothing, for tests and library defaults. */
export function silentLogger(): Logger {
  return pino({ level: 'silent' });
}
