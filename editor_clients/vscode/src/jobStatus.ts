/** The status bar item's content: the running drtriton jobs and the last result, from the server's `$/progress`.
 *  Each job is one progress token: begin (title "drtriton: <target>"), report (the step), end (the one-line result). */

import type { WorkDoneProgressBegin, WorkDoneProgressEnd, WorkDoneProgressReport } from 'vscode-languageclient/node';

export type ServerState = 'starting' | 'running' | 'stopped';

type ProgressValue = WorkDoneProgressBegin | WorkDoneProgressReport | WorkDoneProgressEnd;

const TITLE_PREFIX = 'drtriton: ';
/** Longer results are cut in the status bar; the tooltip has them whole. */
export const MAX_TEXT_LENGTH = 80;

interface RunningJob {
  target: string;
  step: string;
}

export class JobStatus {
  private readonly running = new Map<string | number, RunningJob>();
  private lastResult: string | undefined;
  private serverState: ServerState = 'starting';

  setServerState(state: ServerState): void {
    this.serverState = state;
    if (state === 'stopped') {
      this.running.clear(); // a stopped server sends no `end` for its jobs
    }
  }

  onProgress(token: string | number, value: ProgressValue): void {
    if (value.kind === 'begin') {
      this.running.set(token, { target: targetOf(value.title), step: value.message ?? 'starting' });
      return;
    }
    const job = this.running.get(token);
    if (job === undefined) {
      return; // progress of something that is not a drtriton job
    }
    if (value.kind === 'report') {
      job.step = value.message ?? job.step;
      return;
    }
    this.running.delete(token);
    const message = value.message ?? 'finished';
    this.lastResult = message.startsWith(`${job.target}:`) ? message : `${job.target}: ${message}`;
  }

  /** Status bar text, with a codicon: a spinner while jobs run. */
  text(): string {
    if (this.serverState === 'stopped') {
      return '$(error) drtriton: server stopped';
    }
    const jobs = [...this.running.values()];
    if (jobs.length > 0) {
      const more = jobs.length > 1 ? ` (+${jobs.length - 1} more)` : '';
      return shorten(`$(sync~spin) drtriton: ${jobs[0].target} · ${jobs[0].step}${more}`);
    }
    if (this.lastResult !== undefined) {
      return shorten(`drtriton: ${this.lastResult}`);
    }
    return this.serverState === 'starting' ? '$(sync~spin) drtriton: starting' : 'drtriton';
  }

  tooltip(): string {
    const lines = [...this.running.values()].map((job) => `${job.target}: ${job.step}`);
    if (this.lastResult !== undefined) {
      lines.push(`Last result: ${this.lastResult}`);
    }
    if (this.serverState === 'stopped') {
      lines.push('The language server stopped: see the drtriton output channel, then run "drtriton: Restart language server".');
    }
    lines.push('Click to show the language server log.');
    return lines.join('\n');
  }
}

function targetOf(title: string): string {
  return title.startsWith(TITLE_PREFIX) ? title.slice(TITLE_PREFIX.length) : title;
}

function shorten(text: string): string {
  return text.length <= MAX_TEXT_LENGTH ? text : `${text.slice(0, MAX_TEXT_LENGTH - 1)}…`;
}
