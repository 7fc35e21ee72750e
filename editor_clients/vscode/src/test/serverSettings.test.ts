/** Tests for serverSettings.ts: the server receives exactly its own settings, never the extension's.
 *  The contributed properties come from the real package.json. */

import assert from 'node:assert/strict';
import { test } from 'node:test';

import { narrowConfigurationAnswer, restrictedSettings, serverSettingNames, serverSettings } from '../serverSettings';

const packageJson = require('../../package.json');
const SERVER_SETTINGS = ['device', 'remote', 'remotePython', 'onSave', 'trials', 'warmWorker', 'writeTests', 'writeBack', 'model'];

test('the server settings are the contributed top-level drtriton properties and the model group', () => {
  assert.deepEqual(serverSettingNames(packageJson.contributes.configuration.properties).sort(), [...SERVER_SETTINGS].sort());
});

test("the extension's own settings are left out of what the server gets", () => {
  const section = { device: 'cpu', trials: 2, server: { pythonPath: '/venv/bin/python' }, trace: { server: 'verbose' } };
  assert.deepEqual(serverSettings(section, SERVER_SETTINGS), { device: 'cpu', trials: 2 });
});

test('the model settings go to the server as one object', () => {
  const section = { trials: 2, model: { backend: 'openai', endpoint: 'http://localhost:8000/v1' } };
  assert.deepEqual(serverSettings(section, SERVER_SETTINGS), section);
});

test('a missing or malformed section gives no settings (the server keeps its defaults)', () => {
  assert.deepEqual(serverSettings(undefined, SERVER_SETTINGS), {});
  assert.deepEqual(serverSettings('cpu', SERVER_SETTINGS), {});
});

test('a configuration answer is narrowed only for the drtriton section', () => {
  const items = [{ section: 'drtriton' }, { section: 'python' }];
  const answers = [{ onSave: 'off', server: { logLevel: 'DEBUG' } }, { defaultInterpreterPath: 'python3' }];
  assert.deepEqual(narrowConfigurationAnswer(items, answers, (section) => serverSettings(section, SERVER_SETTINGS)), [
    { onSave: 'off' },
    { defaultInterpreterPath: 'python3' },
  ]);
});

test('in Restricted Mode the server runs no workspace code: no on-save jobs, no regression tests, no warm workers', () => {
  assert.deepEqual(restrictedSettings({ device: 'cuda', onSave: 'search', writeTests: true, warmWorker: true }), {
    device: 'cuda',
    onSave: 'hint',
    writeTests: false,
    warmWorker: false,
  });
  assert.deepEqual(restrictedSettings({ onSave: 'off' }), { onSave: 'off', writeTests: false, warmWorker: false });
});
