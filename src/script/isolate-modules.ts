/** The modules of a script's isolate: the runner (its main module) and the script it imports (src/script/isolate.ts). */
export const RUNNER_MODULE = 'runner.js';
export const SCRIPT_MODULE = 'script.js';
