/** Tests for serverLaunch.ts: which command starts drtriton-lsp, in the documented order of preference.
 *  Configured interpreter, then the Python extension's, then drtriton-lsp on PATH. */

import assert from 'node:assert/strict';
import { test } from 'node:test';

import { describeLaunch, resolveServerLaunch } from '../serverLaunch';

test('the configured interpreter runs the server module, whatever the Python extension selected', () => {
  const launch = resolveServerLaunch({ configuredPython: '/opt/venv/bin/python', selectedPython: '/usr/bin/python3', logLevel: 'INFO' });
  assert.deepEqual(launch, {
    command: '/opt/venv/bin/python',
    args: ['-m', 'drtriton_lsp.server.main', '--log-level', 'INFO'],
    origin: 'drtriton.server.pythonPath',
  });
});

test("without a configured interpreter, the Python extension's selected one is used", () => {
  const launch = resolveServerLaunch({ configuredPython: '  ', selectedPython: '/home/me/.venv/bin/python', logLevel: 'WARNING' });
  assert.equal(launch.command, '/home/me/.venv/bin/python');
  assert.deepEqual(launch.args, ['-m', 'drtriton_lsp.server.main', '--log-level', 'WARNING']);
});

test('with neither, drtriton-lsp is taken from PATH', () => {
  const launch = resolveServerLaunch({ configuredPython: '', selectedPython: undefined, logLevel: 'WARNING' });
  assert.deepEqual(launch, { command: 'drtriton-lsp', args: ['--log-level', 'WARNING'], origin: 'drtriton-lsp on PATH' });
});

test('the description names the command line and where it came from', () => {
  const launch = resolveServerLaunch({ configuredPython: '/p/python', selectedPython: undefined, logLevel: 'DEBUG' });
  assert.equal(describeLaunch(launch), '/p/python -m drtriton_lsp.server.main --log-level DEBUG (from drtriton.server.pythonPath)');
});
