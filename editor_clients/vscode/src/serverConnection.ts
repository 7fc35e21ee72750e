/** Connecting to a drtriton-lsp the user started (`--socket PATH` or `--tcp HOST:PORT`) instead of starting one:
 *  the address, the token from `drtriton.server.tokenFile`, and an output channel that never shows the token. */

import { promises as fs } from 'node:fs';
import * as net from 'node:net';
import * as os from 'node:os';
import type * as vscode from 'vscode';
import type { StreamInfo } from 'vscode-languageclient/node';

export type SocketAddress = { path: string } | { host: string; port: number };

/** What the channel shows instead of the token. */
export const REDACTED_TOKEN = '<authToken>';

function expandHome(path: string): string {
  return path === '~' || path.startsWith('~/') ? os.homedir() + path.slice(1) : path;
}

/** `drtriton.server.socket`: `HOST:PORT` is TCP, anything else a Unix socket path; empty means stdio (undefined). */
export function parseSocketSetting(value: string): SocketAddress | undefined {
  const trimmed = value.trim();
  if (!trimmed) {
    return undefined;
  }
  const tcp = /^(.+):(\d+)$/.exec(trimmed);
  if (tcp && !trimmed.includes('/')) {
    return { host: tcp[1].replace(/^\[(.*)\]$/, '$1'), port: Number(tcp[2]) };
  }
  return { path: expandHome(trimmed) };
}

export function describeAddress(address: SocketAddress): string {
  return 'path' in address ? address.path : `${address.host}:${address.port}`;
}

/** The token in `tokenFile` (the server's `--token-file`), read fresh at each start so a new token is picked up. */
export async function readToken(tokenFile: string): Promise<string> {
  const path = tokenFile.trim();
  if (!path) {
    throw new Error(
      'drtriton.server.socket is set, so drtriton.server.tokenFile must name the file with the server\'s token ' +
        '(the --token-file drtriton-lsp was started with)',
    );
  }
  let content: string;
  try {
    content = await fs.readFile(expandHome(path), 'utf8');
  } catch (failure) {
    const code = (failure as NodeJS.ErrnoException).code ?? String(failure);
    throw new Error(`cannot read drtriton.server.tokenFile ${path} (${code})`);
  }
  const token = content.trim();
  if (!token) {
    throw new Error(`drtriton.server.tokenFile ${path} is empty; it must hold the server's token`);
  }
  return token;
}

/** Server options for vscode-languageclient: a connection to `address` each time the client starts. */
export function connectTo(address: SocketAddress): () => Promise<StreamInfo> {
  return () =>
    new Promise((resolve, reject) => {
      const connection = net.connect(address);
      connection.once('connect', () => resolve({ reader: connection, writer: connection }));
      connection.once('error', reject);
    });
}

const WRITING_METHODS = new Set(['append', 'appendLine', 'replace', 'trace', 'debug', 'info', 'warn', 'error']);

/** `channel` with `secret` replaced in everything written to it: vscode-languageclient's verbose trace
 *  (`drtriton.trace.server`) writes the initialize params, token included. */
export function redacting(channel: vscode.LogOutputChannel, secret: string): vscode.LogOutputChannel {
  const redact = (part: unknown) => (typeof part === 'string' ? part.split(secret).join(REDACTED_TOKEN) : part);
  return new Proxy(channel, {
    get(target, property) {
      const value: unknown = Reflect.get(target, property);
      if (typeof value !== 'function') {
        return value;
      }
      if (typeof property === 'string' && WRITING_METHODS.has(property)) {
        return (...parts: unknown[]) => value.apply(target, parts.map(redact));
      }
      return value.bind(target);
    },
  });
}
