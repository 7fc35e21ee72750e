/** A stand-in for the `vscode` module (VS Code cannot be installed on the test machines): the API surface the
 *  extension and vscode-languageclient touch, recording what the extension does so that tests can check it. */

export class Disposable {
  constructor(private readonly onDispose: () => void = () => undefined) {}
  dispose(): void {
    this.onDispose();
  }
}

// vscode-languageclient subclasses these when it is imported; the extension never constructs them.
export class CompletionItem {}
export class CodeLens {}
export class DocumentLink {}
export class CodeAction {}
export class Diagnostic {}
export class CallHierarchyItem {}
export class TypeHierarchyItem {}
export class SymbolInformation {}
export class InlayHint {}
export class CancellationError extends Error {}

export enum StatusBarAlignment {
  Left = 1,
  Right = 2,
}

export class Uri {
  private constructor(readonly fsPath: string) {}
  static file(path: string): Uri {
    return new Uri(path);
  }
  static parse(value: string): Uri {
    return new Uri(decodeURIComponent(value.replace(/^file:\/\//, '')));
  }
  toString(): string {
    return `file://${this.fsPath}`;
  }
}

export class OutputChannelStandIn {
  readonly lines: string[] = [];
  shown = 0;
  constructor(readonly name: string) {}
  trace(line: string): void {
    this.lines.push(`trace ${line}`);
  }
  info(line: string): void {
    this.lines.push(`info ${line}`);
  }
  warn(line: string): void {
    this.lines.push(`warn ${line}`);
  }
  error(line: string): void {
    this.lines.push(`error ${line}`);
  }
  appendLine(line: string): void {
    this.lines.push(line);
  }
  show(): void {
    this.shown += 1;
  }
  dispose(): void {}
}

export class StatusBarItemStandIn {
  name: string | undefined;
  text = '';
  tooltip: string | undefined;
  command: string | undefined;
  visible = false;
  constructor(readonly id: string) {}
  show(): void {
    this.visible = true;
  }
  hide(): void {
    this.visible = false;
  }
  dispose(): void {}
}

export interface EditorStandIn {
  document: { uri: Uri; languageId: string };
  selection: unknown;
}

type Listener = (event: { affectsConfiguration(section: string): boolean }) => void;
type EditorListener = (editor: EditorStandIn | undefined) => void;
type Callback = (...args: unknown[]) => unknown;

/** Everything the stand-in records, and the answers tests give it. */
export const recorded = {
  commands: new Map<string, Callback>(),
  executed: [] as { command: string; args: unknown[] }[],
  /** Results of commands no one registered here (the server's, which vscode-languageclient would register). */
  commandResults: new Map<string, unknown>(),
  /** What 'vscode.executeCodeActionProvider' answers. */
  codeActions: [] as unknown[],
  /** Context keys set with the 'setContext' command. */
  contexts: new Map<string, unknown>(),
  warnings: [] as string[],
  infos: [] as string[],
  errors: [] as string[],
  openedDocuments: [] as { content: string; language: string }[],
  outputChannels: [] as OutputChannelStandIn[],
  statusItems: [] as StatusBarItemStandIn[],
  /** Settings by full key, e.g. "drtriton.server.pythonPath". */
  settings: new Map<string, unknown>(),
  configurationListeners: [] as Listener[],
  extensions: new Map<string, unknown>(),
  activeTextEditor: undefined as EditorStandIn | undefined,
  activeEditorListeners: [] as EditorListener[],
  /** Whether the workspace is trusted (false: Restricted Mode). */
  trusted: true,
  trustListeners: [] as (() => void)[],
  /** The button a test "clicks" in the next warning message; undefined: the message is dismissed. */
  warningChoice: undefined as string | undefined,
};

export function resetStandIn(): void {
  recorded.commands.clear();
  recorded.executed.length = 0;
  recorded.commandResults.clear();
  recorded.codeActions = [];
  recorded.contexts.clear();
  recorded.warnings.length = 0;
  recorded.infos.length = 0;
  recorded.errors.length = 0;
  recorded.openedDocuments.length = 0;
  recorded.outputChannels.length = 0;
  recorded.statusItems.length = 0;
  recorded.settings.clear();
  recorded.configurationListeners.length = 0;
  recorded.extensions.clear();
  recorded.activeTextEditor = undefined;
  recorded.activeEditorListeners.length = 0;
  recorded.trusted = true;
  recorded.trustListeners.length = 0;
  recorded.warningChoice = undefined;
}

/** Trusts the workspace and tells the listeners, as VS Code does when the user trusts it. */
export function grantWorkspaceTrust(): void {
  recorded.trusted = true;
  for (const listener of [...recorded.trustListeners]) {
    listener();
  }
}

/** Makes `editor` the active one and tells the listeners, as VS Code does when the user switches editors. */
export function changeActiveEditor(editor: EditorStandIn | undefined): void {
  recorded.activeTextEditor = editor;
  for (const listener of [...recorded.activeEditorListeners]) {
    listener(editor);
  }
}

/** Sets a setting and tells the listeners, as VS Code does when the user edits settings.json. */
export function changeSetting(key: string, value: unknown): void {
  recorded.settings.set(key, value);
  const event = { affectsConfiguration: (section: string) => key === section || key.startsWith(`${section}.`) };
  for (const listener of [...recorded.configurationListeners]) {
    listener(event);
  }
}

/** The value at `key`: a leaf setting, or the object of every setting below it. */
function settingAt(key: string): unknown {
  if (recorded.settings.has(key)) {
    return recorded.settings.get(key);
  }
  let nested: Record<string, unknown> | undefined;
  for (const [fullKey, value] of recorded.settings) {
    if (!fullKey.startsWith(`${key}.`)) {
      continue;
    }
    nested ??= {};
    const path = fullKey.slice(key.length + 1).split('.');
    let level = nested;
    for (const part of path.slice(0, -1)) {
      level = (level[part] ??= {}) as Record<string, unknown>;
    }
    level[path[path.length - 1]] = value;
  }
  return nested;
}

export const workspace = {
  getConfiguration(section?: string) {
    return {
      get<T>(key: string, defaultValue?: T): T | undefined {
        const value = settingAt(section ? `${section}.${key}` : key);
        return value === undefined ? defaultValue : (value as T);
      },
    };
  },
  onDidChangeConfiguration(listener: Listener): Disposable {
    recorded.configurationListeners.push(listener);
    return new Disposable(() => recorded.configurationListeners.splice(recorded.configurationListeners.indexOf(listener), 1));
  },
  workspaceFolders: undefined,
  get isTrusted(): boolean {
    return recorded.trusted;
  },
  onDidGrantWorkspaceTrust(listener: () => void): Disposable {
    recorded.trustListeners.push(listener);
    return new Disposable(() => recorded.trustListeners.splice(recorded.trustListeners.indexOf(listener), 1));
  },
  async openTextDocument(options: { content: string; language: string }) {
    recorded.openedDocuments.push(options);
    return options;
  },
};

export const window = {
  createOutputChannel(name: string): OutputChannelStandIn {
    const channel = new OutputChannelStandIn(name);
    recorded.outputChannels.push(channel);
    return channel;
  },
  createStatusBarItem(id: string): StatusBarItemStandIn {
    const item = new StatusBarItemStandIn(id);
    recorded.statusItems.push(item);
    return item;
  },
  async showWarningMessage(message: string, ...items: string[]): Promise<string | undefined> {
    recorded.warnings.push(message);
    const choice = recorded.warningChoice;
    recorded.warningChoice = undefined;
    return choice !== undefined && items.includes(choice) ? choice : undefined;
  },
  async showInformationMessage(message: string): Promise<undefined> {
    recorded.infos.push(message);
    return undefined;
  },
  async showErrorMessage(message: string): Promise<undefined> {
    recorded.errors.push(message);
    return undefined;
  },
  async showTextDocument(document: unknown) {
    return document;
  },
  get activeTextEditor(): EditorStandIn | undefined {
    return recorded.activeTextEditor;
  },
  onDidChangeActiveTextEditor(listener: EditorListener): Disposable {
    recorded.activeEditorListeners.push(listener);
    return new Disposable(() => recorded.activeEditorListeners.splice(recorded.activeEditorListeners.indexOf(listener), 1));
  },
};

export const commands = {
  registerCommand(command: string, callback: Callback): Disposable {
    if (recorded.commands.has(command)) {
      throw new Error(`command '${command}' already exists`); // as VS Code does
    }
    recorded.commands.set(command, callback);
    return new Disposable(() => recorded.commands.delete(command));
  },
  async executeCommand(command: string, ...args: unknown[]): Promise<unknown> {
    if (command === 'setContext') {
      recorded.contexts.set(args[0] as string, args[1]);
      return undefined; // recorded in `contexts`, not among the commands run
    }
    recorded.executed.push({ command, args });
    if (command === 'vscode.executeCodeActionProvider') {
      return recorded.codeActions;
    }
    const registered = recorded.commands.get(command);
    if (registered) {
      return registered(...args);
    }
    if (recorded.commandResults.has(command)) {
      return recorded.commandResults.get(command);
    }
    throw new Error(`command '${command}' not found`); // as VS Code does
  },
};

export const extensions = {
  getExtension(id: string): unknown {
    return recorded.extensions.get(id);
  },
};
