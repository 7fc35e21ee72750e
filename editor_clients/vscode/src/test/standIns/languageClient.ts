/** A stand-in for `vscode-languageclient/node`: the real module (types, enums, the protocol) with a LanguageClient
 *  that starts no process and records how the extension built it. */

import { LanguageClientOptions, State } from 'vscode-languageclient/node';

export * from 'vscode-languageclient/node';

type StateListener = (event: { oldState: State; newState: State }) => void;

export class LanguageClient {
  static readonly created: LanguageClient[] = [];
  state: State = State.Stopped;
  /** Set by a test to make start() fail, as a missing executable does. */
  static startFailure: Error | undefined;
  private readonly stateListeners: StateListener[] = [];

  constructor(
    readonly id: string,
    readonly name: string,
    readonly serverOptions: { command: string; args: string[] },
    readonly clientOptions: LanguageClientOptions,
  ) {
    LanguageClient.created.push(this);
  }

  onDidChangeState(listener: StateListener): { dispose(): void } {
    this.stateListeners.push(listener);
    return { dispose: () => this.stateListeners.splice(this.stateListeners.indexOf(listener), 1) };
  }

  /** Moves to `newState` and tells the listeners, as the real client does. */
  changeState(newState: State): void {
    const oldState = this.state;
    this.state = newState;
    for (const listener of this.stateListeners) {
      listener({ oldState, newState });
    }
  }

  async start(): Promise<void> {
    this.changeState(State.Starting);
    if (LanguageClient.startFailure) {
      this.changeState(State.Stopped);
      throw LanguageClient.startFailure;
    }
    this.changeState(State.Running);
  }

  async stop(): Promise<void> {
    this.changeState(State.Stopped);
  }

  isRunning(): boolean {
    return this.state === State.Running;
  }
}
