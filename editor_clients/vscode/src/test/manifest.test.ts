/** Tests for package.json as VS Code reads it: settings, commands, menus, packaging. */

import assert from 'node:assert/strict';
import { test } from 'node:test';

const packageJson = require('../../package.json');

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
