/** Tests for extension.ts against the `vscode` and LanguageClient stand-ins: activation, how the server is started
 *  and restarted, the palette commands, the status bar and the settings the server receives. */

import assert from 'node:assert/strict';
import { mkdtempSync, writeFileSync } from 'node:fs';
import * as net from 'node:net';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterEach, beforeEach, test } from 'node:test';
import {
  CancellationToken,
  ConfigurationParams,
  LanguageClientOptions,
  State,
  StreamInfo,
  WorkDoneProgressBegin,
} from 'vscode-languageclient/node';

import { activate, deactivate } from '../extension';
import { LanguageClient } from './standIns/languageClient';
import { fakePython } from './standIns/python';
import { changeActiveEditor, changeSetting, grantWorkspaceTrust, recorded, resetStandIn, Uri } from './standIns/vscode';

const packageJson = require('../../package.json');
const FILE = Uri.file('/work/model.py');

async function settle(): Promise<void> {
  for (let turn = 0; turn < 5; turn++) {
    await new Promise((resolve) => setImmediate(resolve));
  }
}

/** Waits up to a second for `condition`: a restart that asks an interpreter (a process) takes a few milliseconds. */
async function eventually(condition: () => boolean): Promise<void> {
  for (let wait = 0; wait < 100 && !condition(); wait++) {
    await new Promise((resolve) => setTimeout(resolve, 10));
  }
}

const EXTENSION_FOLDER = '/home/me/.vscode/extensions/drtriton.drtriton-0.1.0';

async function activated(): Promise<void> {
  await activate({ subscriptions: [], extension: { packageJSON: packageJson }, extensionPath: EXTENSION_FOLDER } as never);
}

function latestClient(): LanguageClient {
  const client = LanguageClient.created.at(-1);
  assert.ok(client, 'no language client was created');
  return client;
}

function middleware(): NonNullable<LanguageClientOptions['middleware']> {
  return latestClient().clientOptions.middleware ?? assert.fail('no middleware');
}

/** The status bar item's text, or undefined while it is hidden. */
function statusText(): string | undefined {
  const [item] = recorded.statusItems;
  return item.visible ? item.text : undefined;
}

function cursorInPythonFile(): void {
  recorded.activeTextEditor = { document: { uri: FILE, languageId: 'python' }, selection: { line: 12 } };
}

beforeEach(() => {
  resetStandIn();
  LanguageClient.created.length = 0;
  LanguageClient.startFailure = undefined;
});

afterEach(async () => {
  await deactivate();
});

test('activation registers every contributed command and starts drtriton-lsp from PATH by default', async () => {
  await activated();
  const contributed = packageJson.contributes.commands.map((entry: { command: string }) => entry.command).sort();
  assert.deepEqual([...recorded.commands.keys()].sort(), contributed);
  assert.deepEqual(latestClient().serverOptions, { command: 'drtriton-lsp', args: ['--log-level', 'WARNING'] });
  assert.deepEqual(latestClient().clientOptions.documentSelector, [{ scheme: 'file', language: 'python' }]);
  assert.equal(statusText(), undefined, 'no editor, no status');
});

test('a configured interpreter runs the server module; changing it restarts the server with the new one', async () => {
  recorded.settings.set('drtriton.server.pythonPath', '/opt/venv/bin/python');
  await activated();
  const first = latestClient();
  assert.deepEqual(first.serverOptions.command, '/opt/venv/bin/python');
  changeSetting('drtriton.server.pythonPath', '/other/venv/bin/python');
  await settle();
  assert.equal(first.state, State.Stopped);
  assert.equal(latestClient().serverOptions.command, '/other/venv/bin/python');
  assert.equal(latestClient().state, State.Running);
});

test("the Python extension's selected interpreter is used, and selecting another restarts the server", async () => {
  const first = fakePython(true);
  const second = fakePython(true);
  let selected = first;
  let selectionListener: () => void = () => assert.fail('no listener registered');
  recorded.extensions.set('ms-python.python', {
    isActive: true,
    exports: {
      environments: {
        getActiveEnvironmentPath: () => ({ path: selected }),
        resolveEnvironment: async (path: string) => ({ executable: { uri: Uri.file(path) } }),
        onDidChangeActiveEnvironmentPath: (listener: () => void) => {
          selectionListener = listener;
          return { dispose: () => undefined };
        },
      },
    },
  });
  await activated();
  assert.equal(latestClient().serverOptions.command, first);
  selected = second;
  selectionListener();
  await eventually(() => latestClient().serverOptions.command === second);
  assert.equal(latestClient().serverOptions.command, second);
});

test('a server that cannot start is reported, with how it was started, and shown as stopped', async () => {
  LanguageClient.startFailure = new Error('spawn drtriton-lsp ENOENT');
  cursorInPythonFile();
  await activated();
  assert.equal(recorded.errors.length, 1);
  assert.match(recorded.errors[0], /drtriton-lsp --log-level WARNING \(from drtriton-lsp on PATH\).*ENOENT/);
  assert.equal(statusText(), '$(error) drtriton: server stopped');
});

test('Generate at the cursor runs the server command of the drtriton code action there, and only that', async () => {
  await activated();
  cursorInPythonFile();
  const targetArguments = [{ uri: FILE.toString(), target: 'MLPBlock' }];
  recorded.codeActions = [
    { title: 'Organize imports', command: { title: 'Organize imports', command: 'python.sortImports' } },
    { title: 'drtriton: Generate Triton kernel for MLPBlock', command: { title: 'Generate', command: 'drtriton.generate', arguments: targetArguments } },
  ];
  recorded.commandResults.set('drtriton.generate', { status: 'started', jobId: '1' });
  await recorded.commands.get('drtriton.generateAtCursor')?.();
  const ran = recorded.executed.filter((call) => call.command !== 'drtriton.generateAtCursor');
  assert.deepEqual(ran, [
    { command: 'vscode.executeCodeActionProvider', args: [FILE, { line: 12 }] },
    { command: 'drtriton.generate', args: targetArguments },
  ]);
});

test('Verify and Benchmark at the cursor run the verify and benchmark actions the server offers there', async () => {
  await activated();
  cursorInPythonFile();
  const targetArguments = [{ uri: FILE.toString(), target: 'MLPBlock' }];
  recorded.codeActions = ['generate', 'verify', 'benchmark', 'apply'].map((kind) => ({
    title: `drtriton: ${kind} MLPBlock`,
    command: { title: kind, command: `drtriton.${kind}`, arguments: targetArguments },
  }));
  recorded.commandResults.set('drtriton.verify', { status: 'started', jobId: '2' });
  recorded.commandResults.set('drtriton.benchmark', { status: 'already running', jobId: '2' });
  await recorded.commands.get('drtriton.verifyAtCursor')?.();
  await recorded.commands.get('drtriton.benchmarkAtCursor')?.();
  const ran = recorded.executed.filter((call) => call.command.startsWith('drtriton.') && !call.command.endsWith('AtCursor'));
  assert.deepEqual(ran, [
    { command: 'drtriton.verify', args: targetArguments },
    { command: 'drtriton.benchmark', args: targetArguments },
  ]);
});

test('Benchmark with only Generate offered at the cursor (no verified kernel) says what to do', async () => {
  await activated();
  cursorInPythonFile();
  recorded.codeActions = [{ title: 'drtriton: Generate', command: { title: 'Generate', command: 'drtriton.generate', arguments: [] } }];
  await recorded.commands.get('drtriton.benchmarkAtCursor')?.();
  assert.deepEqual(recorded.warnings, [
    'drtriton: no verified kernel to benchmark at the cursor (or a job is running on it); run "drtriton: Generate Triton kernel" first',
  ]);
  assert.ok(!recorded.executed.some((call) => call.command === 'drtriton.generate'));
});

test('with no matching code action at the cursor, the user is told why', async () => {
  await activated();
  cursorInPythonFile();
  await recorded.commands.get('drtriton.applyAtCursor')?.();
  assert.deepEqual(recorded.warnings, ['drtriton: no verified kernel to apply at the cursor; run "drtriton: Generate Triton kernel" first']);
});

test('with the server stopped, a palette command says so instead of failing', async () => {
  await activated();
  latestClient().changeState(State.Stopped);
  cursorInPythonFile();
  await recorded.commands.get('drtriton.generateAtCursor')?.();
  assert.deepEqual(recorded.warnings, ['drtriton: the language server is not running.']);
  assert.ok(!recorded.executed.some((call) => call.command === 'vscode.executeCodeActionProvider'));
});

test("the status bar follows a job's progress, which still reaches VS Code's progress notification", async () => {
  cursorInPythonFile();
  await activated();
  const forwarded: unknown[] = [];
  const next = (_token: unknown, params: unknown) => forwarded.push(params);
  const begin: WorkDoneProgressBegin = { kind: 'begin', title: 'drtriton: MLPBlock', message: 'starting', cancellable: true };
  const targetArguments = [{ uri: FILE.toString(), target: 'MLPBlock' }];
  await middleware().executeCommand?.('drtriton.generate', targetArguments, async () => {
    middleware().handleWorkDoneProgress?.('drtriton-job-1', begin, next); // the server begins before it answers
    return { status: 'started', jobId: '1', token: 'drtriton-job-1' };
  });
  middleware().handleWorkDoneProgress?.('drtriton-job-1', { kind: 'report', message: 'capturing the graph' }, next);
  assert.equal(statusText(), '$(sync~spin) drtriton: MLPBlock · capturing the graph');
  middleware().handleWorkDoneProgress?.('drtriton-job-1', { kind: 'end', message: 'MLPBlock: verified · no speed measured: no GPU' }, next);
  assert.equal(statusText(), 'drtriton: MLPBlock: verified · no speed measured: no GPU');
  assert.equal(forwarded.length, 3);
});

test('the status bar shows only in Python editors, for their own file, and hides when it has nothing to say', async () => {
  cursorInPythonFile();
  await activated();
  assert.equal(statusText(), undefined, 'server running, nothing about this file yet');
  const other = { document: { uri: Uri.file('/work/other.py'), languageId: 'python' }, selection: {} };
  changeActiveEditor(other);
  await middleware().didSave?.(other.document as never, async () => undefined);
  const begin: WorkDoneProgressBegin = { kind: 'begin', title: 'drtriton: Gelu', message: 'starting' };
  middleware().handleWorkDoneProgress?.('drtriton-job-2', begin, () => undefined); // started by the save
  assert.equal(statusText(), '$(sync~spin) drtriton: Gelu · starting');
  changeActiveEditor({ document: { uri: FILE, languageId: 'python' }, selection: {} });
  assert.equal(statusText(), undefined, "the other file's job is not this file's");
  changeActiveEditor({ document: { uri: Uri.file('/work/notes.md'), languageId: 'markdown' }, selection: {} });
  latestClient().changeState(State.Stopped);
  assert.equal(statusText(), undefined, 'not a Python editor');
  changeActiveEditor(other);
  assert.equal(statusText(), '$(error) drtriton: server stopped');
  assert.match(recorded.statusItems[0].tooltip ?? '', /Language server: drtriton-lsp --log-level WARNING \(from drtriton-lsp on PATH\)/);
});

test('the server gets only its own settings, at start and when it asks for them', async () => {
  recorded.settings.set('drtriton.device', 'cpu');
  recorded.settings.set('drtriton.trials', 2);
  recorded.settings.set('drtriton.server.logLevel', 'DEBUG');
  await activated();
  const options = latestClient().clientOptions;
  assert.deepEqual((options.initializationOptions as () => unknown)(), { device: 'cpu', trials: 2 });
  const params: ConfigurationParams = { items: [{ section: 'drtriton' }] };
  const answer = await middleware().workspace?.configuration?.(params, {} as CancellationToken, async () => [
    { device: 'cpu', trials: 2, server: { logLevel: 'DEBUG' } },
  ]);
  assert.deepEqual(answer, [{ device: 'cpu', trials: 2 }]);
});

test('a settings change is announced with no settings, so the server asks for the narrowed section', async () => {
  await activated();
  const sent: (string[] | undefined)[] = [];
  await middleware().workspace?.didChangeConfiguration?.(['drtriton'], async (sections) => {
    sent.push(sections);
  });
  assert.deepEqual(sent, [undefined]);
});

test('debug information opens as a JSON document', async () => {
  await activated();
  recorded.commandResults.set('drtriton.printDebugInformation', '{"versions": {"drtriton-lsp": "0.1.0"}}');
  await recorded.commands.get('drtriton.showDebugInformation')?.();
  assert.deepEqual(recorded.openedDocuments, [{ content: '{"versions": {"drtriton-lsp": "0.1.0"}}', language: 'json' }]);
});

test('Restart language server replaces the client', async () => {
  await activated();
  const first = latestClient();
  await recorded.commands.get('drtriton.restartServer')?.();
  assert.notEqual(latestClient(), first);
  assert.equal(first.state, State.Stopped);
  assert.equal(latestClient().state, State.Running);
});

test('with drtriton.server.socket, the extension connects there and sends the token file\'s token, never logging it', async () => {
  const folder = mkdtempSync(join(tmpdir(), 'drtriton-extension-'));
  const socketPath = join(folder, 'drtriton.sock');
  const token = 'a-token-of-more-than-32-characters-0123456789';
  writeFileSync(join(folder, 'token'), `${token}\n`, { mode: 0o600 });
  const connections: net.Socket[] = [];
  const server = net.createServer((connection) => connections.push(connection));
  await new Promise<void>((resolve) => server.listen(socketPath, resolve));
  recorded.settings.set('drtriton.server.socket', socketPath);
  recorded.settings.set('drtriton.server.tokenFile', join(folder, 'token'));
  recorded.settings.set('drtriton.device', 'cpu');
  try {
    await activated();
    const client = latestClient();
    const connect = client.serverOptions as unknown as () => Promise<StreamInfo>;
    await connect();
    assert.equal(connections.length, 1, 'the extension connected to the socket instead of starting a server');
    assert.deepEqual((client.clientOptions.initializationOptions as () => unknown)(), { device: 'cpu', authToken: token });
    client.clientOptions.outputChannel?.trace(`Params: {"authToken": "${token}"}`);
    const logged = recorded.outputChannels[0].lines.join('\n');
    assert.match(logged, new RegExp(`starting a connection to ${socketPath} \\(from drtriton.server.socket\\)`));
    assert.match(logged, /Params: \{"authToken": "<authToken>"\}/);
    assert.ok(!logged.includes(token));
  } finally {
    connections.forEach((connection) => connection.destroy()); // else close() waits for them
    await new Promise((resolve) => server.close(resolve));
  }
});

test('with drtriton.server.socket but no token file, the extension says what to set and starts nothing', async () => {
  recorded.settings.set('drtriton.server.socket', '127.0.0.1:2087');
  cursorInPythonFile();
  await activated();
  assert.equal(LanguageClient.created.length, 0);
  assert.deepEqual(recorded.errors, [
    'drtriton: the language server did not start (a connection to 127.0.0.1:2087 (from drtriton.server.socket)): ' +
      "drtriton.server.socket is set, so drtriton.server.tokenFile must name the file with the server's token " +
      '(the --token-file drtriton-lsp was started with)',
  ]);
  assert.equal(statusText(), '$(error) drtriton: server stopped');
});

test("the context key drtriton.serverRunning (the walkthrough's install step) follows the server", async () => {
  await activated();
  assert.equal(recorded.contexts.get('drtriton.serverRunning'), true);
  latestClient().changeState(State.Stopped);
  assert.equal(recorded.contexts.get('drtriton.serverRunning'), false);
});

/** The Python extension, with `interpreter` selected. */
function pythonExtensionSelecting(interpreter: string): void {
  recorded.extensions.set('ms-python.python', {
    isActive: true,
    exports: {
      environments: {
        getActiveEnvironmentPath: () => ({ path: interpreter }),
        resolveEnvironment: async (path: string) => ({ executable: { uri: Uri.file(path) } }),
        onDidChangeActiveEnvironmentPath: () => ({ dispose: () => undefined }),
      },
    },
  });
}

test("in Restricted Mode the server starts outside the workspace, without the workspace's interpreter", async () => {
  recorded.trusted = false;
  pythonExtensionSelecting(fakePython(true));
  await activated();
  assert.deepEqual(latestClient().serverOptions, {
    command: 'drtriton-lsp',
    args: ['--log-level', 'WARNING'],
    options: { cwd: EXTENSION_FOLDER },
  });
});

test('in Restricted Mode the server gets settings that run no workspace code, at start and when it asks', async () => {
  recorded.trusted = false;
  recorded.settings.set('drtriton.onSave', 'search');
  recorded.settings.set('drtriton.writeTests', true);
  await activated();
  const restricted = { onSave: 'hint', writeTests: false, warmWorker: false };
  assert.deepEqual((latestClient().clientOptions.initializationOptions as () => unknown)(), restricted);
  const params: ConfigurationParams = { items: [{ section: 'drtriton' }] };
  const answer = await middleware().workspace?.configuration?.(params, {} as CancellationToken, async () => [
    { onSave: 'search', writeTests: true },
  ]);
  assert.deepEqual(answer, [restricted]);
});

test('in Restricted Mode Generate, Verify and Benchmark are refused with why and a way to trust; others run', async () => {
  recorded.trusted = false;
  await activated();
  const sent: string[] = [];
  const next = async (command: string) => {
    sent.push(command);
    return undefined;
  };
  const targetArguments = [{ uri: FILE.toString(), target: 'MLPBlock' }];
  recorded.commandResults.set('workbench.trust.manage', undefined);
  recorded.warningChoice = 'Manage Workspace Trust';
  for (const command of ['drtriton.generate', 'drtriton.verify', 'drtriton.benchmark', 'drtriton.showReport', 'drtriton.apply']) {
    await middleware().executeCommand?.(command, targetArguments, next);
  }
  await settle();
  assert.deepEqual(sent, ['drtriton.showReport', 'drtriton.apply']);
  assert.equal(recorded.warnings.length, 3);
  assert.match(recorded.warnings[0], /^drtriton: Generate runs this workspace's code .* off in Restricted Mode\. Trust the workspace/);
  assert.ok(recorded.executed.some((call) => call.command === 'workbench.trust.manage'));
});

test('trusting the workspace restarts the server with the selected interpreter and all settings', async () => {
  recorded.trusted = false;
  recorded.settings.set('drtriton.onSave', 'search');
  const workspacePython = fakePython(true);
  pythonExtensionSelecting(workspacePython);
  await activated();
  assert.equal(latestClient().serverOptions.command, 'drtriton-lsp');
  grantWorkspaceTrust();
  await eventually(() => latestClient().serverOptions.command === workspacePython);
  assert.equal(latestClient().serverOptions.command, workspacePython);
  assert.deepEqual((latestClient().clientOptions.initializationOptions as () => unknown)(), { onSave: 'search' });
  const sent: string[] = [];
  await middleware().executeCommand?.('drtriton.generate', [], async (command: string) => sent.push(command));
  assert.deepEqual(sent, ['drtriton.generate']);
});

test('a selected interpreter without drtriton gives way to drtriton-lsp on PATH, and the user is told which runs', async () => {
  const withoutDrtriton = fakePython(false);
  pythonExtensionSelecting(withoutDrtriton);
  await activated();
  assert.deepEqual(latestClient().serverOptions, { command: 'drtriton-lsp', args: ['--log-level', 'WARNING'] });
  assert.deepEqual(recorded.infos, [
    `drtriton: the selected interpreter ${withoutDrtriton} has no drtriton, so the language server runs as ` +
      'drtriton-lsp from PATH. Install drtriton there, or set drtriton.server.pythonPath.',
  ]);
  const logged = recorded.outputChannels[0].lines.join('\n');
  assert.ok(logged.includes(`drtriton-lsp on PATH, as the Python extension's selected interpreter ${withoutDrtriton} has no drtriton_lsp`));
});

test("a report the server shows opens as a Markdown preview beside the code; other documents as VS Code opens them", async () => {
  recorded.commandResults.set('markdown.showPreviewToSide', undefined); // VS Code's built-in Markdown extension
  await activated();
  const showDocument = middleware().window?.showDocument ?? assert.fail('no showDocument middleware');
  const report = 'file:///tmp/drtriton-reports-1000/3f2a9c0d1e2b/model.ScaledActivation.md';
  const passedOn: string[] = [];
  const next = async (params: { uri: string }) => {
    passedOn.push(params.uri);
    return { success: true };
  };
  assert.deepEqual(await showDocument({ uri: report, takeFocus: true }, CancellationToken.None, next), { success: true });
  const previews = recorded.executed.filter(({ command }) => command === 'markdown.showPreviewToSide');
  assert.deepEqual(previews.map(({ args }) => String(args[0])), [report]);
  assert.deepEqual(passedOn, []);

  const elsewhere = 'file:///work/notes.md';
  await showDocument({ uri: elsewhere, takeFocus: true }, CancellationToken.None, next);
  assert.deepEqual(passedOn, [elsewhere]);
  assert.equal(recorded.executed.filter(({ command }) => command === 'markdown.showPreviewToSide').length, 1);
});
