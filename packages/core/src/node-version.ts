// The Node.js version check every entry point makes before anything else loads. This module imports
// nothing: an entry point imports it first and loads its real code with import() only once the
// check passed (an ESM module's static imports are all linked and evaluated before its own body
// runs, so on an older Node.js a dependency would fail first, with a stack trace, before a check
// in the body could say why).

/** The Node.js major every program of this repository is built and tested for (package.json "engines"). */
export const REQUIRED_NODE_MAJOR = 24;

/**
 * Why `program` cannot run on Node.js `version` (`process.version`, "v20.20.2", or
 * `process.versions.node`) at `execPath`: one line saying what to do, or undefined when the major is
 * the one required. Newer majors are refused too: the programs are tested on this one only.
 */
export function nodeVersionProblem(program: string, version: string, execPath?: string): string | undefined {
  const major = Number(/^v?(\d+)\./.exec(version)?.[1]);
  if (major === REQUIRED_NODE_MAJOR) return undefined;
  const v = version.startsWith('v') ? version : `v${version}`;
  return (
    `${program}: needs Node.js ${REQUIRED_NODE_MAJOR}, but runs on Node.js ${v}${execPath ? ` (${execPath})` : ''}. ` +
    `In the repository, \`make deps\` installs Node.js ${REQUIRED_NODE_MAJOR} into node_modules/.bin: run ` +
    '`export PATH=$PWD/node_modules/.bin:$PATH` from its top directory and try again. The kube-node-ready image has it already.'
  );
}

/**
 * Exits with status 2 (ExitCode.CONFIG_ERROR, as for any usage error) and that line on stderr
 * unless this process runs the required Node.js.
 */
export function exitUnlessSupportedNode(program: string): void {
  const problem = nodeVersionProblem(program, process.version, process.execPath);
  if (problem === undefined) return;
  process.stderr.write(`${problem}\n`);
  process.exit(2);
}
