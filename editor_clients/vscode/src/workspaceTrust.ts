/** Restricted Mode (an untrusted workspace): drtriton shows targets, fusion hints and earlier results, but runs none
 *  of the workspace's code. Its commands that would are refused here, before they reach the server. */

import { SERVER_COMMANDS } from './targetCommands';

/** The server commands that import and run the user's file: a job captures, verifies and times its target. */
const COMMANDS_RUNNING_WORKSPACE_CODE: ReadonlyMap<string, string> = new Map([
  [SERVER_COMMANDS.generate, 'Generate'],
  [SERVER_COMMANDS.verify, 'Verify'],
  [SERVER_COMMANDS.benchmark, 'Benchmark'],
]);

export const MANAGE_TRUST = 'Manage Workspace Trust';
export const MANAGE_TRUST_COMMAND = 'workbench.trust.manage';

/** Why `command` cannot run in Restricted Mode; undefined when it runs none of the workspace's code. */
export function refusalInRestrictedMode(command: string): string | undefined {
  const action = COMMANDS_RUNNING_WORKSPACE_CODE.get(command);
  return action === undefined
    ? undefined
    : `drtriton: ${action} runs this workspace's code (it imports your file and runs the target), so it is off in ` +
        'Restricted Mode. Trust the workspace to use it.';
}
