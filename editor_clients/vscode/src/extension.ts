/** The drtriton VS Code extension: starts drtriton-lsp through vscode-languageclient (or connects to one on a socket),
 *  restarts it with backoff, and adds palette commands, a status bar item and the server log channel. */

import * as vscode from 'vscode';
import { Executable, LanguageClient, LanguageClientOptions, ResponseError, ServerOptions, State } from 'vscode-languageclient/node';

import { JobStatus, startedJob } from './jobStatus';
import { showReportBeside } from './reports';
import { RestartWithBackoff } from './restartWithBackoff';
import { connectTo, describeAddress, parseSocketSetting, readToken, redacting } from './serverConnection';
import {
  describeLaunch,
  hasServerModule,
  onSelectedPythonChange,
  resolveServerLaunch,
  SelectedPython,
  selectedPythonInterpreter,
} from './serverLaunch';
import {
  narrowConfigurationAnswer,
  restrictedSettings,
  SECTION,
  serverSettingNames,
  serverSettings,
  SettingsObject,
} from './serverSettings';
import { runOnTargetAtCursor, showDebugInformation, TARGET_COMMANDS } from './targetCommands';
import { MANAGE_TRUST, MANAGE_TRUST_COMMAND, refusalInRestrictedMode } from './workspaceTrust';

const CLIENT_ID = 'drtriton';
const CLIENT_NAME = 'drtriton language server';
export const SHOW_SERVER_LOG = 'drtriton.showServerLog';
export const RESTART_SERVER = 'drtriton.restartServer';
export const SHOW_DEBUG_INFORMATION = 'drtriton.showDebugInformation';
/** A context key for `when` clauses and the walkthrough's "install the server" step: true while the server runs. */
export const SERVER_RUNNING_CONTEXT = 'drtriton.serverRunning';

/** One activation: the output channel and status bar outlive the language clients that restarts replace. */
class DrtritonExtension {
  private readonly output = vscode.window.createOutputChannel('drtriton', { log: true });
  private readonly statusItem = vscode.window.createStatusBarItem('drtriton.status', vscode.StatusBarAlignment.Left, 0);
  private readonly jobStatus = new JobStatus();
  private readonly restartPolicy: RestartWithBackoff;
  private readonly settingNames: string[];
  /** The server's working directory in Restricted Mode: not the workspace, whose Python files would shadow
   *  modules that `python -m` imports from the working directory. */
  private readonly extensionFolder: string;
  private client: LanguageClient | undefined;
  /** How the server was started or reached, for the log and for error messages. */
  private serverDescription: string | undefined;

  constructor(context: vscode.ExtensionContext) {
    this.settingNames = serverSettingNames(context.extension.packageJSON.contributes.configuration.properties);
    this.extensionFolder = context.extensionPath;
    this.restartPolicy = new RestartWithBackoff(
      () => this.serverDescription ?? 'not started yet',
      (line) => this.output.warn(line),
    );
    this.statusItem.name = 'drtriton';
    this.statusItem.command = SHOW_SERVER_LOG;
    this.render();
    context.subscriptions.push(
      this.output,
      this.statusItem,
      vscode.window.onDidChangeActiveTextEditor(() => this.render()),
    );
  }

  async start(): Promise<void> {
    const configuration = vscode.workspace.getConfiguration(SECTION);
    const address = parseSocketSetting(configuration.get<string>('server.socket', ''));
    let serverOptions: ServerOptions;
    let token: string | undefined;
    if (address) {
      this.serverDescription = `a connection to ${describeAddress(address)} (from drtriton.server.socket)`;
      try {
        token = await readToken(configuration.get<string>('server.tokenFile', ''));
      } catch (failure) {
        this.reportStartFailure((failure as Error).message);
        return;
      }
      serverOptions = connectTo(address);
    } else {
      const configuredPython = configuration.get<string>('server.pythonPath', '');
      // In Restricted Mode the selected interpreter may be one of the workspace's own (a .venv in it).
      const trusted = vscode.workspace.isTrusted;
      const launch = resolveServerLaunch({
        configuredPython,
        selectedPython: configuredPython.trim() || !trusted ? undefined : await this.selectedPython(),
        logLevel: configuration.get<string>('server.logLevel', 'WARNING'),
      });
      this.serverDescription = trusted ? describeLaunch(launch) : `${describeLaunch(launch)}, in Restricted Mode`;
      if (launch.interpreterWithoutServer) {
        void vscode.window.showInformationMessage(
          `drtriton: the selected interpreter ${launch.interpreterWithoutServer} has no drtriton, so the language server ` +
            `runs as ${launch.command} from PATH. Install drtriton there, or set drtriton.server.pythonPath.`,
        );
      }
      const executable: Executable = { command: launch.command, args: launch.args };
      if (!trusted) {
        executable.options = { cwd: this.extensionFolder };
      }
      serverOptions = executable;
    }
    this.output.info(`starting ${this.serverDescription}`);
    this.client = new LanguageClient(CLIENT_ID, CLIENT_NAME, serverOptions, this.clientOptions(token));
    this.client.onDidChangeState(({ newState }) => {
      this.jobStatus.setServerState(newState === State.Running ? 'running' : newState === State.Starting ? 'starting' : 'stopped');
      this.render();
      void vscode.commands.executeCommand('setContext', SERVER_RUNNING_CONTEXT, newState === State.Running);
    });
    try {
      await this.client.start();
    } catch (failure) {
      this.reportStartFailure(String(failure));
    }
  }

  /** The Python extension's selected interpreter, and whether it has drtriton (asked where the server would run:
   *  vscode-languageclient starts it in the first workspace folder). */
  private async selectedPython(): Promise<SelectedPython | undefined> {
    const path = await selectedPythonInterpreter();
    if (path === undefined) {
      return undefined;
    }
    return { path, hasServer: await hasServerModule(path, vscode.workspace.workspaceFolders?.[0]?.uri.fsPath) };
  }

  private reportStartFailure(reason: string): void {
    this.jobStatus.setServerState('stopped');
    this.render();
    const message = `drtriton: the language server did not start (${this.serverDescription}): ${reason}`;
    this.output.error(message);
    void vscode.window.showErrorMessage(message, 'Show log').then((choice) => choice && this.output.show());
  }

  /** Stops the server, also one still starting or restarting (stop() returns at once for a stopped client). */
  async stop(): Promise<void> {
    const client = this.client;
    this.client = undefined;
    try {
      await client?.stop();
    } catch (failure) {
      this.output.warn(`stopping the language server failed: ${String(failure)}`);
    }
  }

  /** A new client with the current settings: a changed interpreter or log level needs a new process. */
  async restart(): Promise<void> {
    await this.stop();
    this.restartPolicy.forgetCrashes();
    await this.start();
  }

  isServerRunning(): boolean {
    return this.client?.isRunning() ?? false;
  }

  showLog(): void {
    this.output.show();
  }

  /** `token`: for a server on a socket, sent as `initializationOptions.authToken` and kept out of the log. */
  private clientOptions(token: string | undefined): LanguageClientOptions {
    return {
      documentSelector: [{ scheme: 'file', language: 'python' }],
      outputChannel: token ? redacting(this.output, token) : this.output,
      initializationOptions: () => {
        const settings = this.settingsForServer(vscode.workspace.getConfiguration().get(SECTION));
        return token ? { ...settings, authToken: token } : settings;
      },
      synchronize: { configurationSection: SECTION },
      errorHandler: this.restartPolicy,
      middleware: {
        window: {
          showDocument: async (params, token, next) =>
            (await showReportBeside(params.uri)) ? { success: true } : next(params, token),
        },
        handleWorkDoneProgress: (token, params, next) => {
          this.jobStatus.onProgress(token, params);
          this.render();
          next(token, params);
        },
        executeCommand: async (command, args, next) => {
          const refusal = vscode.workspace.isTrusted ? undefined : refusalInRestrictedMode(command);
          if (refusal !== undefined) {
            void vscode.window.showWarningMessage(refusal, MANAGE_TRUST).then(
              (choice) => choice && vscode.commands.executeCommand(MANAGE_TRUST_COMMAND),
            );
            return undefined;
          }
          const answer = await next(command, args);
          const job = startedJob(args, answer);
          if (job) {
            this.jobStatus.jobStarted(job.token, job.file);
            this.render();
          }
          return answer;
        },
        didSave: (document, next) => {
          this.jobStatus.saved(document.uri.toString());
          return next(document);
        },
        workspace: {
          configuration: async (params, token, next) => {
            const answers = await next(params, token);
            return answers instanceof ResponseError
              ? answers
              : narrowConfigurationAnswer(params.items, answers, (section) => this.settingsForServer(section));
          },
          // Send no settings: the server then asks for section "drtriton", which the handler above narrows.
          didChangeConfiguration: (_sections, next) => next(undefined),
        },
      },
    };
  }

  /** The server's settings out of VS Code's "drtriton" section, restricted in an untrusted workspace. */
  private settingsForServer(section: unknown): SettingsObject {
    const settings = serverSettings(section, this.settingNames);
    return vscode.workspace.isTrusted ? settings : restrictedSettings(settings);
  }

  /** The status of the active editor's file; hidden outside Python editors and when there is nothing to say. */
  private render(): void {
    const document = vscode.window.activeTextEditor?.document;
    const view = document?.languageId === 'python' ? this.jobStatus.view(document.uri.toString()) : undefined;
    if (view === undefined) {
      this.statusItem.hide();
      return;
    }
    this.statusItem.text = view.text;
    const server = `Language server: ${this.serverDescription ?? 'not started yet'}`;
    this.statusItem.tooltip = [view.tooltip, server, 'Click to show the language server log.'].filter(Boolean).join('\n');
    this.statusItem.show();
  }
}

let extension: DrtritonExtension | undefined;

export async function activate(context: vscode.ExtensionContext): Promise<void> {
  const active = new DrtritonExtension(context);
  extension = active;
  const whenServerRuns = (action: () => Promise<void>) => async () => {
    if (!active.isServerRunning()) {
      const choice = await vscode.window.showWarningMessage('drtriton: the language server is not running.', 'Restart', 'Show log');
      if (choice === 'Restart') {
        await active.restart();
      } else if (choice === 'Show log') {
        active.showLog();
      }
      return;
    }
    await action();
  };
  for (const target of TARGET_COMMANDS) {
    context.subscriptions.push(
      vscode.commands.registerCommand(target.paletteCommand, whenServerRuns(() => runOnTargetAtCursor(target))),
    );
  }
  context.subscriptions.push(
    vscode.commands.registerCommand(SHOW_DEBUG_INFORMATION, whenServerRuns(showDebugInformation)),
    vscode.commands.registerCommand(RESTART_SERVER, () => active.restart()),
    vscode.commands.registerCommand(SHOW_SERVER_LOG, () => active.showLog()),
    vscode.workspace.onDidChangeConfiguration((event) => {
      if (event.affectsConfiguration(`${SECTION}.server`)) {
        void active.restart();
      }
    }),
    // Trusted now: the selected interpreter, the workspace as working directory and all settings apply.
    vscode.workspace.onDidGrantWorkspaceTrust(() => active.restart()),
  );
  const pythonWatch = await onSelectedPythonChange(() => {
    if (!vscode.workspace.getConfiguration(SECTION).get<string>('server.pythonPath', '').trim()) {
      void active.restart();
    }
  });
  if (pythonWatch) {
    context.subscriptions.push(pythonWatch);
  }
  await active.start();
}

export async function deactivate(): Promise<void> {
  await extension?.stop();
  extension = undefined;
}
