/** Tests for jobStatus.ts: what the status bar says for one file through a job's progress (begin, reports, end),
 *  whose file each job is, and server states. The messages are the ones drtriton-lsp sends (jobs.py). */

import assert from 'node:assert/strict';
import { test } from 'node:test';

import { JobStatus, MAX_TEXT_LENGTH, startedJob, StatusView } from '../jobStatus';

const MODEL = 'file:///work/model.py';
const OTHER = 'file:///work/other.py';

/** A running server with a job on MODEL that a command started (token `drtriton-job-<number>`). */
function withJob(number: number, target: string, message = 'starting'): JobStatus {
  const status = new JobStatus();
  status.setServerState('running');
  begin(status, number, target, MODEL, message);
  return status;
}

function begin(status: JobStatus, number: number, target: string, file: string, message = 'starting'): void {
  status.onProgress(`drtriton-job-${number}`, { kind: 'begin', title: `drtriton: ${target}`, message, cancellable: true });
  status.jobStarted(`drtriton-job-${number}`, file);
}

function text(view: StatusView | undefined): string | undefined {
  return view?.text;
}

test('a running job shows its target and current step in its own file only', () => {
  const status = withJob(1, 'MLPBlock');
  status.onProgress('drtriton-job-1', { kind: 'report', message: 'trial 1/5 at 8x64' });
  assert.equal(text(status.view(MODEL)), '$(sync~spin) drtriton: MLPBlock · trial 1/5 at 8x64');
  assert.equal(status.view(OTHER), undefined);
});

test('a finished job leaves its one-line result in its file, named once', () => {
  const status = withJob(7, 'MLPBlock');
  status.onProgress('drtriton-job-7', { kind: 'end', message: 'MLPBlock: verified · no speed measured: no GPU' });
  assert.equal(text(status.view(MODEL)), 'drtriton: MLPBlock: verified · no speed measured: no GPU');
  assert.match(status.view(MODEL)?.tooltip ?? '', /Last result: MLPBlock: verified/);
  assert.equal(status.view(OTHER), undefined);
});

test('each file keeps its own last result', () => {
  const status = withJob(1, 'MLPBlock');
  begin(status, 2, 'Gelu', OTHER);
  status.onProgress('drtriton-job-1', { kind: 'end', message: 'MLPBlock: verified' });
  status.onProgress('drtriton-job-2', { kind: 'end', message: 'Gelu: failed: untraceable forward' });
  assert.equal(text(status.view(MODEL)), 'drtriton: MLPBlock: verified');
  assert.equal(text(status.view(OTHER)), 'drtriton: Gelu: failed: untraceable forward');
});

test('an end message without the target (a failure or a cancel) gets it prefixed', () => {
  const status = withJob(1, 'Gelu');
  status.onProgress('drtriton-job-1', { kind: 'end', message: 'cancelled; the worker was stopped' });
  assert.equal(text(status.view(MODEL)), 'drtriton: Gelu: cancelled; the worker was stopped');
});

test("several running jobs in a file show the first and a count; other files' jobs are not counted", () => {
  const status = withJob(1, 'A');
  begin(status, 2, 'B', MODEL, 'queued behind another drtriton job');
  begin(status, 3, 'C', OTHER);
  assert.equal(text(status.view(MODEL)), '$(sync~spin) drtriton: A · starting (+1 more)');
  assert.match(status.view(MODEL)?.tooltip ?? '', /B: queued behind another drtriton job/);
  assert.doesNotMatch(status.view(MODEL)?.tooltip ?? '', /C:/);
});

test('a job no command announced (on-save search) belongs to the file saved last', () => {
  const status = new JobStatus();
  status.setServerState('running');
  status.saved(OTHER);
  status.saved(MODEL);
  status.onProgress('drtriton-job-4', { kind: 'begin', title: 'drtriton: MLPBlock', message: 'starting' });
  assert.equal(text(status.view(MODEL)), '$(sync~spin) drtriton: MLPBlock · starting');
  assert.equal(status.view(OTHER), undefined);
});

test("a command's answer moves its job to the file it named, though another file was saved last", () => {
  const status = new JobStatus();
  status.setServerState('running');
  status.saved(OTHER);
  begin(status, 5, 'MLPBlock', MODEL);
  assert.equal(text(status.view(MODEL)), '$(sync~spin) drtriton: MLPBlock · starting');
  assert.equal(status.view(OTHER), undefined);
});

test('with nothing to say about a file (server running, no job, no result) there is no view', () => {
  const status = new JobStatus();
  status.setServerState('running');
  status.onProgress('someone-else', { kind: 'end', message: 'done' });
  assert.equal(status.view(MODEL), undefined);
});

test('a starting server is shown in every file', () => {
  assert.equal(text(new JobStatus().view(OTHER)), '$(sync~spin) drtriton: starting');
});

test('a long result is cut to the status bar limit', () => {
  const status = withJob(1, 'T');
  status.onProgress('drtriton-job-1', { kind: 'end', message: `T: failed · ${'x'.repeat(200)}` });
  const shown = text(status.view(MODEL)) ?? '';
  assert.equal(shown.length, MAX_TEXT_LENGTH);
  assert.ok(shown.endsWith('…'));
});

test('a stopped server is shown as stopped in every file and forgets its running jobs', () => {
  const status = withJob(1, 'T');
  status.setServerState('stopped');
  assert.equal(text(status.view(OTHER)), '$(error) drtriton: server stopped');
  assert.match(status.view(MODEL)?.tooltip ?? '', /Restart language server/);
  status.setServerState('running');
  assert.equal(status.view(MODEL), undefined);
});

test("a started job is read from a command's arguments and answer; refusals and other commands start none", () => {
  const args = [{ uri: MODEL, target: 'MLPBlock' }];
  assert.deepEqual(startedJob(args, { status: 'started', jobId: '3', token: 'drtriton-job-3' }), {
    token: 'drtriton-job-3',
    file: MODEL,
  });
  assert.equal(startedJob(args, { status: 'refused', message: 'no example inputs' }), undefined);
  assert.equal(startedJob(['3'], { status: 'cancelled' }), undefined);
  assert.equal(startedJob([], undefined), undefined);
});
