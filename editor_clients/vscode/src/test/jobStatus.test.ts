/** Tests for jobStatus.ts: the status bar text through a job's progress (begin, reports, end) and server states.
 *  The messages are the ones drtriton-lsp sends (jobs.py). */

import assert from 'node:assert/strict';
import { test } from 'node:test';

import { JobStatus, MAX_TEXT_LENGTH } from '../jobStatus';

function runningStatus(): JobStatus {
  const status = new JobStatus();
  status.setServerState('running');
  return status;
}

test('a running job shows its target and current step', () => {
  const status = runningStatus();
  status.onProgress('drtriton-job-1', { kind: 'begin', title: 'drtriton: MLPBlock', message: 'starting', cancellable: true });
  status.onProgress('drtriton-job-1', { kind: 'report', message: 'trial 1/5 at 8x64' });
  assert.equal(status.text(), '$(sync~spin) drtriton: MLPBlock · trial 1/5 at 8x64');
});

test('a finished job leaves its one-line result, named once', () => {
  const status = runningStatus();
  status.onProgress(7, { kind: 'begin', title: 'drtriton: MLPBlock' });
  status.onProgress(7, { kind: 'end', message: 'MLPBlock: verified · no speed measured: no GPU' });
  assert.equal(status.text(), 'drtriton: MLPBlock: verified · no speed measured: no GPU');
  assert.match(status.tooltip(), /Last result: MLPBlock: verified/);
});

test('an end message without the target (a failure or a cancel) gets it prefixed', () => {
  const status = runningStatus();
  status.onProgress(1, { kind: 'begin', title: 'drtriton: Gelu' });
  status.onProgress(1, { kind: 'end', message: 'cancelled; the worker was stopped' });
  assert.equal(status.text(), 'drtriton: Gelu: cancelled; the worker was stopped');
});

test('several running jobs show the first and a count', () => {
  const status = runningStatus();
  status.onProgress(1, { kind: 'begin', title: 'drtriton: A', message: 'starting' });
  status.onProgress(2, { kind: 'begin', title: 'drtriton: B', message: 'queued behind another drtriton job' });
  assert.equal(status.text(), '$(sync~spin) drtriton: A · starting (+1 more)');
  assert.match(status.tooltip(), /B: queued behind another drtriton job/);
});

test('progress for tokens that never began is ignored', () => {
  const status = runningStatus();
  status.onProgress('someone-else', { kind: 'end', message: 'done' });
  assert.equal(status.text(), 'drtriton');
});

test('a long result is cut to the status bar limit', () => {
  const status = runningStatus();
  status.onProgress(1, { kind: 'begin', title: 'drtriton: T' });
  status.onProgress(1, { kind: 'end', message: `T: failed · ${'x'.repeat(200)}` });
  assert.equal(status.text().length, MAX_TEXT_LENGTH);
  assert.ok(status.text().endsWith('…'));
});

test('a stopped server is shown as stopped and forgets its running jobs', () => {
  const status = runningStatus();
  status.onProgress(1, { kind: 'begin', title: 'drtriton: T' });
  status.setServerState('stopped');
  assert.equal(status.text(), '$(error) drtriton: server stopped');
  status.setServerState('running');
  assert.equal(status.text(), 'drtriton');
});
