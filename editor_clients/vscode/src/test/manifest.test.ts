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
