/** Tests for serverLaunch.ts: which command starts drtriton-lsp, in the documented order of preference.
 *  Configured interpreter, then the Python extension's when it has drtriton, then drtriton-lsp on PATH. */

import assert from 'node:assert/strict';
import { test } from 'node:test';

import { describeLaunch, hasServerModule, resolveServerLaunch } from '../serverLaunch';
import { fakePython } from './standIns/python';

const WITH_DRTRITON = { path: '/home/me/.venv/bin/python', hasServer: true };

test('the configured interpreter runs the server module, whatever the Python extension selected', () => {
  const launch = resolveServerLaunch({ configuredPython: '/opt/venv/bin/python', selectedPython: WITH_DRTRITON, logLevel: 'INFO' });
  assert.deepEqual(launch, {
    command: '/opt/venv/bin/python',
    args: ['-m', 'drtriton_lsp.server.main', '--log-level', 'INFO'],
    origin: 'drtriton.server.pythonPath',
  });
});

test("without a configured interpreter, the Python extension's selected one is used when it has drtriton", () => {
  const launch = resolveServerLaunch({ configuredPython: '  ', selectedPython: WITH_DRTRITON, logLevel: 'WARNING' });
  assert.equal(launch.command, '/home/me/.venv/bin/python');
  assert.deepEqual(launch.args, ['-m', 'drtriton_lsp.server.main', '--log-level', 'WARNING']);
  assert.equal(launch.interpreterWithoutServer, undefined);
});

test('a selected interpreter without drtriton gives way to drtriton-lsp on PATH, and the launch says so', () => {
  const selectedPython = { path: '/usr/bin/python3', hasServer: false };
  const launch = resolveServerLaunch({ configuredPython: '', selectedPython, logLevel: 'WARNING' });
  assert.deepEqual(launch, {
    command: 'drtriton-lsp',
    args: ['--log-level', 'WARNING'],
    origin: "drtriton-lsp on PATH, as the Python extension's selected interpreter /usr/bin/python3 has no drtriton_lsp",
    interpreterWithoutServer: '/usr/bin/python3',
  });
});

test('the probe tells an interpreter with drtriton from one without, and from one that does not run', async () => {
  assert.equal(await hasServerModule(fakePython(true), undefined), true);
  assert.equal(await hasServerModule(fakePython(false), undefined), false);
  assert.equal(await hasServerModule('/nonexistent/bin/python', undefined), false);
});

test('with neither, drtriton-lsp is taken from PATH', () => {
  const launch = resolveServerLaunch({ configuredPython: '', selectedPython: undefined, logLevel: 'WARNING' });
  assert.deepEqual(launch, { command: 'drtriton-lsp', args: ['--log-level', 'WARNING'], origin: 'drtriton-lsp on PATH' });
});

test('the description names the command line and where it came from', () => {
  const launch = resolveServerLaunch({ configuredPython: '/p/python', selectedPython: undefined, logLevel: 'DEBUG' });
  assert.equal(describeLaunch(launch), '/p/python -m drtriton_lsp.server.main --log-level DEBUG (from drtriton.server.pythonPath)');
});
