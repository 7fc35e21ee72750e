/** Tests for restartWithBackoff.ts: growing delays between restarts, giving up after too many crashes in the window.
 *  A fake clock stands in for time, so no test sleeps. */

import assert from 'node:assert/strict';
import { test } from 'node:test';
import { CloseAction, ErrorAction } from 'vscode-languageclient/node';

import { Clock, CRASH_WINDOW_MS, MAX_CRASHES, MAX_DELAY_MS, restartDelay, RestartWithBackoff } from '../restartWithBackoff';

class FakeClock implements Clock {
  time = 0;
  readonly sleeps: number[] = [];
  now(): number {
    return this.time;
  }
  async sleep(milliseconds: number): Promise<void> {
    this.sleeps.push(milliseconds);
    this.time += milliseconds;
  }
}

function handler(clock: FakeClock, log: string[] = []): RestartWithBackoff {
  return new RestartWithBackoff(() => 'drtriton-lsp --log-level WARNING (from drtriton-lsp on PATH)', (line) => log.push(line), clock);
}

test('the delay doubles from one second and stops growing at the cap', () => {
  assert.deepEqual([1, 2, 3, 4].map(restartDelay), [1000, 2000, 4000, 8000]);
  assert.equal(restartDelay(20), MAX_DELAY_MS);
});

test('each crash restarts after the next delay, and says so in the log', async () => {
  const clock = new FakeClock();
  const log: string[] = [];
  const policy = handler(clock, log);
  for (let crash = 0; crash < MAX_CRASHES; crash++) {
    assert.equal((await policy.closed()).action, CloseAction.Restart);
  }
  assert.deepEqual(clock.sleeps, [1000, 2000, 4000, 8000, 16000]);
  assert.match(log[0], /restarting in 1 s/);
});

test('one crash too many in the window stops restarting, with a message that says what to do', async () => {
  const clock = new FakeClock();
  const policy = handler(clock);
  for (let crash = 0; crash < MAX_CRASHES; crash++) {
    await policy.closed();
  }
  const last = await policy.closed();
  assert.equal(last.action, CloseAction.DoNotRestart);
  assert.match(last.message ?? '', /drtriton-lsp --log-level WARNING \(from drtriton-lsp on PATH\)/);
  assert.match(last.message ?? '', /drtriton: Restart language server/);
});

test('crashes older than the window no longer count', async () => {
  const clock = new FakeClock();
  const policy = handler(clock);
  for (let crash = 0; crash < MAX_CRASHES; crash++) {
    await policy.closed();
  }
  clock.time += CRASH_WINDOW_MS;
  assert.equal((await policy.closed()).action, CloseAction.Restart);
  assert.equal(clock.sleeps.at(-1), 1000);
});

test('a restart the user asked for starts the count again', async () => {
  const clock = new FakeClock();
  const policy = handler(clock);
  for (let crash = 0; crash < MAX_CRASHES; crash++) {
    await policy.closed();
  }
  policy.forgetCrashes();
  assert.equal((await policy.closed()).action, CloseAction.Restart);
});

test('a few connection errors are tolerated, then the connection is shut down', () => {
  const policy = handler(new FakeClock());
  assert.equal(policy.error(new Error('write EPIPE'), undefined, 1).action, ErrorAction.Continue);
  assert.equal(policy.error(new Error('write EPIPE'), undefined, 4).action, ErrorAction.Shutdown);
});
