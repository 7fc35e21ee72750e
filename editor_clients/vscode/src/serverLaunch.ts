/** How the extension starts `drtriton-lsp`: the configured interpreter, else the Python extension's, else PATH.
 *  `resolveServerLaunch` decides; `selectedPythonInterpreter` asks the Python extension (when installed). */

import * as vscode from 'vscode';

export const SERVER_MODULE = 'drtriton_lsp.server.main';
export const SERVER_EXECUTABLE = 'drtriton-lsp';
export const PYTHON_EXTENSION_ID = 'ms-python.python';

export interface ServerLaunch {
  command: string;
  args: string[];
  /** Where the command came from, for the log and for error messages. */
  origin: string;
}

export interface LaunchChoices {
  /** `drtriton.server.pythonPath`; empty when unset. */
  configuredPython: string;
  /** The Python extension's selected interpreter, when that extension is installed and has one. */
  selectedPython: string | undefined;
  /** `drtriton.server.logLevel`. */
  logLevel: string;
}

export function resolveServerLaunch(choices: LaunchChoices): ServerLaunch {
  const logArguments = ['--log-level', choices.logLevel];
  const configured = choices.configuredPython.trim();
  if (configured) {
    return { command: configured, args: ['-m', SERVER_MODULE, ...logArguments], origin: 'drtriton.server.pythonPath' };
  }
  if (choices.selectedPython) {
    return {
      command: choices.selectedPython,
      args: ['-m', SERVER_MODULE, ...logArguments],
      origin: "the Python extension's selected interpreter",
    };
  }
  return { command: SERVER_EXECUTABLE, args: logArguments, origin: `${SERVER_EXECUTABLE} on PATH` };
}

export function describeLaunch(launch: ServerLaunch): string {
  return `${[launch.command, ...launch.args].join(' ')} (from ${launch.origin})`;
}

/** The part of the Python extension's API used here (its `environments` API, 2023 and later). */
interface PythonExtensionApi {
  environments?: {
    getActiveEnvironmentPath(resource?: vscode.Uri): { path: string };
    resolveEnvironment(path: string): Promise<{ executable: { uri?: vscode.Uri } } | undefined>;
    onDidChangeActiveEnvironmentPath: vscode.Event<unknown>;
  };
}

async function pythonExtensionApi(): Promise<PythonExtensionApi | undefined> {
  const extension = vscode.extensions.getExtension<PythonExtensionApi>(PYTHON_EXTENSION_ID);
  if (!extension) {
    return undefined;
  }
  return extension.isActive ? extension.exports : await extension.activate();
}

export async function selectedPythonInterpreter(): Promise<string | undefined> {
  const environments = (await pythonExtensionApi())?.environments;
  if (!environments) {
    return undefined;
  }
  const active = environments.getActiveEnvironmentPath();
  const resolved = await environments.resolveEnvironment(active.path);
  return resolved?.executable.uri?.fsPath ?? active.path;
}

/** Calls `listener` when the user selects another interpreter in the Python extension. */
export async function onSelectedPythonChange(listener: () => void): Promise<vscode.Disposable | undefined> {
  const environments = (await pythonExtensionApi())?.environments;
  return environments?.onDidChangeActiveEnvironmentPath(listener);
}
