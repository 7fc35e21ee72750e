/** The client's error handler: restart a crashed server after a growing delay, and give up after too many crashes.
 *  The default handler restarts at once (up to 4 times in 3 minutes); a server that dies on start-up then spins. */

import { CloseAction, CloseHandlerResult, ErrorAction, ErrorHandler, ErrorHandlerResult } from 'vscode-languageclient/node';

export const FIRST_DELAY_MS = 1000;
export const MAX_DELAY_MS = 30000;
export const MAX_CRASHES = 5;
export const CRASH_WINDOW_MS = 5 * 60 * 1000;
/** Connection errors tolerated in a row before the client shuts the connection down. */
export const MAX_CONNECTION_ERRORS = 3;

export interface Clock {
  now(): number;
  sleep(milliseconds: number): Promise<void>;
}

export const realClock: Clock = {
  now: () => Date.now(),
  sleep: (milliseconds) => new Promise((resolve) => setTimeout(resolve, milliseconds)),
};

/** The delay before restart number `crashes` (1-based): 1 s, 2 s, 4 s, ... at most MAX_DELAY_MS. */
export function restartDelay(crashes: number): number {
  return Math.min(FIRST_DELAY_MS * 2 ** (crashes - 1), MAX_DELAY_MS);
}

export class RestartWithBackoff implements ErrorHandler {
  private crashTimes: number[] = [];

  constructor(
    private readonly describeServer: () => string,
    private readonly log: (line: string) => void,
    private readonly clock: Clock = realClock,
  ) {}

  error(_error: Error, _message: unknown, count: number | undefined): ErrorHandlerResult {
    if (count !== undefined && count <= MAX_CONNECTION_ERRORS) {
      return { action: ErrorAction.Continue };
    }
    return { action: ErrorAction.Shutdown };
  }

  async closed(): Promise<CloseHandlerResult> {
    const now = this.clock.now();
    this.crashTimes = [...this.crashTimes.filter((time) => now - time < CRASH_WINDOW_MS), now];
    const crashes = this.crashTimes.length;
    if (crashes > MAX_CRASHES) {
      return {
        action: CloseAction.DoNotRestart,
        message:
          `drtriton-lsp stopped ${crashes} times in ${CRASH_WINDOW_MS / 60000} minutes and will not be restarted. ` +
          `It was started as: ${this.describeServer()}. See the drtriton output channel for why; if drtriton-lsp is ` +
          'not installed for that interpreter, install it there or set drtriton.server.pythonPath, then run ' +
          '"drtriton: Restart language server".',
      };
    }
    const delay = restartDelay(crashes);
    this.log(`drtriton-lsp stopped unexpectedly (${crashes} in ${CRASH_WINDOW_MS / 60000} minutes); restarting in ${delay / 1000} s`);
    await this.clock.sleep(delay);
    return { action: CloseAction.Restart, handled: true };
  }

  /** After a restart the user asked for, earlier crashes no longer count. */
  forgetCrashes(): void {
    this.crashTimes = [];
  }
}
