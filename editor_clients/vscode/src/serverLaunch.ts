/** How the extension starts `drtriton-lsp`: the configured interpreter, else the Python extension's when it has
 *  drtriton, else PATH. `resolveServerLaunch` decides; `selectedPythonInterpreter` asks the Python extension (when
 *  installed) and `hasServerModule` the interpreter. */

import { execFile } from 'node:child_process';
import * as vscode from 'vscode';

export const SERVER_MODULE = 'drtriton_lsp.server.main';
const SERVER_PACKAGE = 'drtriton_lsp';
/** An interpreter that has not answered by then is taken to lack drtriton. */
const PROBE_TIMEOUT_MS = 15_000;
export const SERVER_EXECUTABLE = 'drtriton-lsp';
export const PYTHON_EXTENSION_ID = 'ms-python.python';

export interface ServerLaunch {
  command: string;
  args: string[];
  /** Where the command came from, for the log and for error messages. */
  origin: string;
  /** The Python extension's selected interpreter, passed over because it lacks drtriton. */
  interpreterWithoutServer?: string;
}

export interface SelectedPython {
  path: string;
  /** Whether it can import drtriton's language server. */
  hasServer: boolean;
}

export interface LaunchChoices {
  /** `drtriton.server.pythonPath`; empty when unset. */
  configuredPython: string;
  /** The Python extension's selected interpreter, when that extension is installed and has one. */
  selectedPython: SelectedPython | undefined;
  /** `drtriton.server.logLevel`. */
  logLevel: string;
}

export function resolveServerLaunch(choices: LaunchChoices): ServerLaunch {
  const logArguments = ['--log-level', choices.logLevel];
  const configured = choices.configuredPython.trim();
  if (configured) {
    return { command: configured, args: ['-m', SERVER_MODULE, ...logArguments], origin: 'drtriton.server.pythonPath' };
  }
  const selected = choices.selectedPython;
  if (selected?.hasServer) {
    return {
      command: selected.path,
      args: ['-m', SERVER_MODULE, ...logArguments],
      origin: "the Python extension's selected interpreter",
    };
  }
  if (selected) {
    return {
      command: SERVER_EXECUTABLE,
      args: logArguments,
      origin: `${SERVER_EXECUTABLE} on PATH, as the Python extension's selected interpreter ${selected.path} has no ${SERVER_PACKAGE}`,
      interpreterWithoutServer: selected.path,
    };
  }
  return { command: SERVER_EXECUTABLE, args: logArguments, origin: `${SERVER_EXECUTABLE} on PATH` };
}

/** Whether `python`, started in `cwd` (where the server would start), finds drtriton's package; false for an
 *  interpreter that does not run or does not answer. */
export function hasServerModule(python: string, cwd: string | undefined): Promise<boolean> {
  const probe = `import importlib.util, sys; sys.exit(importlib.util.find_spec('${SERVER_PACKAGE}') is None)`;
  return new Promise((resolve) => {
    execFile(python, ['-c', probe], { cwd, timeout: PROBE_TIMEOUT_MS }, (failure) => resolve(failure === null));
  });
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
