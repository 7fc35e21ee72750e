/** Tests for package.json as VS Code reads it: settings, commands, menus, packaging. */

import assert from 'node:assert/strict';
import { readFileSync } from 'node:fs';
import { builtinModules } from 'node:module';
import { join } from 'node:path';
import { test } from 'node:test';

const packageJson = require('../../package.json');
const EXTENSION_FOLDER = join(__dirname, '..', '..');

interface ContributedSetting {
  scope?: string;
  enum?: string[];
  enumDescriptions?: string[];
}

const settings: Record<string, ContributedSetting> = packageJson.contributes.configuration.properties;
const SETTING_SCOPES = ['application', 'machine', 'machine-overridable', 'window', 'resource', 'language-overridable'];

test('every setting and command is under the one prefix "drtriton."', () => {
  const commands: string[] = packageJson.contributes.commands.map((entry: { command: string }) => entry.command);
  const outside = [...Object.keys(settings), ...commands].filter((name) => !name.startsWith('drtriton.'));
  assert.deepEqual(outside, []);
});

test('every setting says where it may be set, and describes each of its choices', () => {
  for (const [name, setting] of Object.entries(settings)) {
    assert.ok(SETTING_SCOPES.includes(setting.scope ?? ''), `${name}: scope ${setting.scope}`);
    assert.equal(setting.enumDescriptions?.length, setting.enum?.length, `${name}: one description per choice`);
  }
});

test('the package carries the Apache-2.0 license text, a changelog and a 128x128 PNG icon', () => {
  assert.equal(packageJson.license, 'Apache-2.0');
  assert.match(readFileSync(join(EXTENSION_FOLDER, 'LICENSE'), 'utf8'), /^\s*Apache License\s+Version 2\.0, January 2004/);
  assert.doesNotMatch(packageJson.scripts.package, /--skip-license/);
  assert.match(readFileSync(join(EXTENSION_FOLDER, 'CHANGELOG.md'), 'utf8'), /^# Changelog\n\n## \d+\.\d+\.\d+/);
  const icon = readFileSync(join(EXTENSION_FOLDER, packageJson.icon));
  assert.deepEqual(icon.subarray(0, 8), Buffer.from([0x89, 0x50, 0x4e, 0x47, 0x0d, 0x0a, 0x1a, 0x0a]), 'a PNG signature');
  assert.deepEqual([icon.readUInt32BE(16), icon.readUInt32BE(20)], [128, 128], 'IHDR width and height');
});

test('the extension runs from one esbuild bundle that needs only vscode and Node built-ins', () => {
  assert.equal(packageJson.main, './dist/extension.js');
  assert.match(packageJson.devDependencies.esbuild, /^\d+\.\d+\.\d+$/, 'esbuild pinned exactly');
  assert.match(packageJson.scripts['vscode:prepublish'], /npm run bundle/);
  assert.match(packageJson.scripts.package, /--no-dependencies/, 'node_modules stays out: the bundle has them');
  const bundle = readFileSync(join(EXTENSION_FOLDER, packageJson.main), 'utf8');
  const required = new Set([...bundle.matchAll(/require\("([^"]+)"\)/g)].map((match) => match[1].replace(/^node:/, '')));
  const outside = [...required].filter((name) => name !== 'vscode' && !builtinModules.includes(name));
  assert.deepEqual(outside, []);
  const loaded = require(join(EXTENSION_FOLDER, packageJson.main));
  assert.deepEqual([typeof loaded.activate, typeof loaded.deactivate], ['function', 'function']);
});

const PYTHON_EDITORS = /\beditorLangId == python\b/;
const commandNames = new Set<string>(packageJson.contributes.commands.map((entry: { command: string }) => entry.command));

test('the keybinding and the editor context menu are offered in Python editors only, for contributed commands', () => {
  const contextMenu: { submenu?: string; when?: string }[] = packageJson.contributes.menus['editor/context'];
  const keybindings: { command: string; when?: string }[] = packageJson.contributes.keybindings;
  for (const entry of [...contextMenu, ...keybindings]) {
    assert.match(entry.when ?? '', PYTHON_EDITORS, JSON.stringify(entry));
  }
  assert.deepEqual(
    keybindings.map((binding) => binding.command),
    ['drtriton.generateAtCursor'],
  );
  const submenu: { command: string }[] = packageJson.contributes.menus[contextMenu[0].submenu ?? ''];
  assert.deepEqual(
    submenu.map((entry) => entry.command),
    ['generate', 'verify', 'benchmark', 'apply', 'showReport', 'cancel'].map((kind) => `drtriton.${kind}AtCursor`),
  );
  assert.ok(submenu.every((entry) => commandNames.has(entry.command)));
});

test('the walkthrough installs the server, picks the device and runs a first Generate, with links that exist', () => {
  const [walkthrough] = packageJson.contributes.walkthroughs;
  const steps: { id: string; description: string; media: { markdown: string }; completionEvents: string[] }[] = walkthrough.steps;
  assert.deepEqual(
    steps.map((step) => step.id),
    ['drtriton.installServer', 'drtriton.pickDevice', 'drtriton.firstGenerate'],
  );
  assert.deepEqual(
    steps.map((step) => step.completionEvents),
    [['onContext:drtriton.serverRunning'], ['onSettingChanged:drtriton.device'], ['onCommand:drtriton.generateAtCursor']],
  );
  for (const step of steps) {
    assert.match(readFileSync(join(EXTENSION_FOLDER, step.media.markdown), 'utf8'), /^# /);
    for (const [, command, argument] of step.description.matchAll(/\(command:([\w.]+)(?:\?([^)]*))?\)/g)) {
      if (command === 'workbench.action.openSettings') {
        const [setting] = JSON.parse(decodeURIComponent(argument));
        assert.ok(setting in settings, `${step.id} opens the unknown setting ${setting}`);
      } else {
        assert.ok(commandNames.has(command), `${step.id} links to the unknown command ${command}`);
      }
    }
  }
});

test('untrusted workspaces get limited support, and cannot choose the interpreter that starts the server', () => {
  const untrusted = packageJson.capabilities.untrustedWorkspaces;
  assert.equal(untrusted.supported, 'limited');
  assert.match(untrusted.description, /runs none of the workspace's code/);
  // The other drtriton.server.* settings that start or reach a server are machine-scoped: no workspace sets them.
  const workspaceSettable = ['drtriton.server.pythonPath', 'drtriton.server.socket', 'drtriton.server.tokenFile'].filter(
    (name) => settings[name].scope !== 'machine',
  );
  assert.deepEqual(untrusted.restrictedConfigurations, workspaceSettable);
});
