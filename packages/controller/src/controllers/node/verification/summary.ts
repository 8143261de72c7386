/**
 * The worker's termination-message summary (format and parser live in @kube-node-ready/core,
 * shared with the worker that writes it; docs/worker.md "Summary").
 */
export { parseSummary, type CheckSummary, type SummaryParse, type WorkerSummary } from '@kube-node-ready/core';
