/** Palette commands for the target at the cursor: each finds drtriton's code action there and runs its command,
 *  so the server decides what a target is and what it allows right now (the same list as the light bulb). */

import * as vscode from 'vscode';

/** The server's `workspace/executeCommand` ids (drtriton_lsp/server/*.py); vscode-languageclient registers them. */
export const SERVER_COMMANDS = {
  generate: 'drtriton.generate',
  verify: 'drtriton.verify',
  benchmark: 'drtriton.benchmark',
  apply: 'drtriton.apply',
  showReport: 'drtriton.showReport',
  cancel: 'drtriton.cancel',
  removeKernel: 'drtriton.removeKernel',
  printDebugInformation: 'drtriton.printDebugInformation',
} as const;

export interface TargetCommand {
  paletteCommand: string;
  serverCommand: string;
  /** Shown when no code action at the cursor runs `serverCommand`. */
  nothingToRun: string;
}

export const TARGET_COMMANDS: readonly TargetCommand[] = [
  {
    paletteCommand: 'drtriton.generateAtCursor',
    serverCommand: SERVER_COMMANDS.generate,
    nothingToRun: 'no target at the cursor (an nn.Module with a forward, or a function that calls torch)',
  },
  {
    paletteCommand: 'drtriton.verifyAtCursor',
    serverCommand: SERVER_COMMANDS.verify,
    nothingToRun: 'no kernel to verify at the cursor; run "drtriton: Generate Triton kernel" first',
  },
  {
    paletteCommand: 'drtriton.benchmarkAtCursor',
    serverCommand: SERVER_COMMANDS.benchmark,
    nothingToRun: 'no verified kernel to benchmark at the cursor; run "drtriton: Generate Triton kernel" first',
  },
  {
    paletteCommand: 'drtriton.applyAtCursor',
    serverCommand: SERVER_COMMANDS.apply,
    nothingToRun: 'no verified kernel to apply at the cursor; run "drtriton: Generate Triton kernel" first',
  },
  {
    paletteCommand: 'drtriton.showReportAtCursor',
    serverCommand: SERVER_COMMANDS.showReport,
    nothingToRun: 'no report at the cursor yet; run "drtriton: Generate Triton kernel" first',
  },
  {
    paletteCommand: 'drtriton.cancelAtCursor',
    serverCommand: SERVER_COMMANDS.cancel,
    nothingToRun: 'no job is running on the target at the cursor',
  },
  {
    paletteCommand: 'drtriton.removeKernelAtCursor',
    serverCommand: SERVER_COMMANDS.removeKernel,
    nothingToRun: 'no kernel written into the target at the cursor',
  },
];

/** Why no action at the cursor runs the command: the server's reason for a greyed-out one (Benchmark without a GPU),
 *  a job already running on the target (its Cancel action is there), or nothing of the kind at the cursor. */
export function whyNothingRuns(actions: readonly (vscode.CodeAction | vscode.Command)[], target: TargetCommand): string {
  const disabled = actions.find(
    (action): action is vscode.CodeAction =>
      'disabled' in action && action.disabled !== undefined && commandOf(action)?.command === target.serverCommand,
  );
  if (disabled?.disabled) {
    return disabled.disabled.reason;
  }
  if (target.serverCommand !== SERVER_COMMANDS.cancel && actions.some((a) => commandOf(a)?.command === SERVER_COMMANDS.cancel)) {
    return 'a job is already running on this target; wait for it to end, or cancel it first';
  }
  return target.nothingToRun;
}

function commandOf(action: vscode.CodeAction | vscode.Command): vscode.Command | undefined {
  return typeof action.command === 'string' ? (action as vscode.Command) : action.command;
}

/** The commands, in the server's order, of the enabled actions that run `serverCommand`. */
export function commandsRunning(
  actions: readonly (vscode.CodeAction | vscode.Command)[],
  serverCommand: string,
): vscode.Command[] {
  const enabled = actions.filter((action) => !('disabled' in action && action.disabled !== undefined));
  return enabled.map(commandOf).filter((command): command is vscode.Command => command?.command === serverCommand);
}

export async function runOnTargetAtCursor(target: TargetCommand): Promise<void> {
  const editor = vscode.window.activeTextEditor;
  if (!editor || editor.document.languageId !== 'python') {
    void vscode.window.showWarningMessage('drtriton: open a Python file and put the cursor inside a target first');
    return;
  }
  const actions = await vscode.commands.executeCommand<(vscode.CodeAction | vscode.Command)[] | undefined>(
    'vscode.executeCodeActionProvider',
    editor.document.uri,
    editor.selection,
  );
  const commands = commandsRunning(actions ?? [], target.serverCommand);
  if (commands.length === 0) {
    void vscode.window.showWarningMessage(`drtriton: ${whyNothingRuns(actions ?? [], target)}`);
    return;
  }
  for (const command of commands) {
    await vscode.commands.executeCommand(command.command, ...(command.arguments ?? []));
  }
}

/** Runs drtriton.printDebugInformation and opens its JSON in an untitled editor. */
export async function showDebugInformation(): Promise<void> {
  const text = await vscode.commands.executeCommand<string | undefined>(SERVER_COMMANDS.printDebugInformation);
  if (typeof text !== 'string') {
    void vscode.window.showWarningMessage('drtriton: the language server returned no debug information; is it running?');
    return;
  }
  const document = await vscode.workspace.openTextDocument({ content: text, language: 'json' });
  await vscode.window.showTextDocument(document);
}
