/** Tests for serverConnection.ts: where drtriton.server.socket points, reading the token file, connecting, and
 *  keeping the token out of the output channel. */

import assert from 'node:assert/strict';
import { mkdtempSync, writeFileSync } from 'node:fs';
import * as net from 'node:net';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { test } from 'node:test';
import type * as vscode from 'vscode';

import { connectTo, parseSocketSetting, readToken, REDACTED_TOKEN, redacting } from '../serverConnection';
import { OutputChannelStandIn } from './standIns/vscode';

const TOKEN = 'a-token-of-more-than-32-characters-0123456789';

function temporaryFolder(): string {
  return mkdtempSync(join(tmpdir(), 'drtriton-connection-'));
}

test('HOST:PORT is a TCP address, anything else a Unix socket path, and empty means stdio', () => {
  assert.deepEqual(parseSocketSetting('127.0.0.1:2087'), { host: '127.0.0.1', port: 2087 });
  assert.deepEqual(parseSocketSetting(' localhost:2087 '), { host: 'localhost', port: 2087 });
  assert.deepEqual(parseSocketSetting('[::1]:2087'), { host: '::1', port: 2087 });
  assert.deepEqual(parseSocketSetting('/run/user/1000/drtriton.sock'), { path: '/run/user/1000/drtriton.sock' });
  assert.deepEqual(parseSocketSetting('/tmp/odd:1'), { path: '/tmp/odd:1' });
  assert.equal(parseSocketSetting('  '), undefined);
});

test('a socket path under ~ is taken from the home folder', () => {
  const home = process.env.HOME;
  process.env.HOME = '/home/someone';
  try {
    assert.deepEqual(parseSocketSetting('~/drtriton.sock'), { path: '/home/someone/drtriton.sock' });
  } finally {
    process.env.HOME = home;
  }
});

test('the token is the token file without surrounding whitespace', async () => {
  const file = join(temporaryFolder(), 'token');
  writeFileSync(file, `${TOKEN}\n`, { mode: 0o600 });
  assert.equal(await readToken(file), TOKEN);
});

test('a missing, unreadable or empty token file is refused with what to set', async () => {
  await assert.rejects(readToken(''), /drtriton\.server\.socket is set, so drtriton\.server\.tokenFile must name the file/);
  const missing = join(temporaryFolder(), 'nothing-here');
  await assert.rejects(readToken(missing), new RegExp(`cannot read drtriton.server.tokenFile ${missing} \\(ENOENT\\)`));
  const empty = join(temporaryFolder(), 'token');
  writeFileSync(empty, '\n');
  await assert.rejects(readToken(empty), /is empty; it must hold the server's token/);
});

test('the connection reaches a server on a Unix socket, and a missing socket is an error', async () => {
  const path = join(temporaryFolder(), 'drtriton.sock');
  const received: Buffer[] = [];
  const connections: net.Socket[] = [];
  const server = net.createServer((connection) => {
    connections.push(connection);
    connection.on('data', (chunk) => received.push(chunk));
  });
  await new Promise<void>((resolve) => server.listen(path, resolve));
  try {
    const stream = await connectTo({ path })();
    stream.writer.write('Content-Length: 2\r\n\r\n{}');
    await new Promise((resolve) => setTimeout(resolve, 50));
    assert.equal(Buffer.concat(received).toString(), 'Content-Length: 2\r\n\r\n{}');
  } finally {
    connections.forEach((connection) => connection.destroy()); // else close() waits for them
    await new Promise((resolve) => server.close(resolve));
  }
  await assert.rejects(connectTo({ path })(), /ENOENT/);
});

test('whatever is written through the redacting channel shows no token', () => {
  const channel = new OutputChannelStandIn('drtriton');
  const redacted = redacting(channel as unknown as vscode.LogOutputChannel, TOKEN);
  redacted.trace(`Sending request 'initialize - (0)'.\nParams: {"initializationOptions": {"authToken": "${TOKEN}"}}`);
  redacted.info(`token ${TOKEN} twice ${TOKEN}`);
  redacted.appendLine(TOKEN);
  assert.deepEqual(channel.lines, [
    `trace Sending request 'initialize - (0)'.\nParams: {"initializationOptions": {"authToken": "${REDACTED_TOKEN}"}}`,
    `info token ${REDACTED_TOKEN} twice ${REDACTED_TOKEN}`,
    REDACTED_TOKEN,
  ]);
  assert.equal(redacted.name, 'drtriton');
});
