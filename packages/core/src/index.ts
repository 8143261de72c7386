export * from './duration.js';
export * from './logger.js';
export * from './errors.js';
export * from './version.js';
export * from './summary.js';
export * from './cycle.js';
