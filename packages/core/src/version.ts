/** Stamped at bundle time by scripts/bundle.mjs (esbuild `define`); "dev" when run from source. */
declare const __KNR_VERSION__: string | undefined;
declare const __KNR_COMMIT__: string | undefined;

export const VERSION: string = typeof __KNR_VERSION__ === 'string' ? __KNR_VERSION__ : '0.0.0-dev';
export const COMMIT: string = typeof __KNR_COMMIT__ === 'string' ? __KNR_COMMIT__ : 'unknown';
export function versionString(): string {
  return `kube-node-ready ${VERSION} (commit ${COMMIT}, node ${process.version})`;
}
