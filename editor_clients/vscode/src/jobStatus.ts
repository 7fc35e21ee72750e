/** The status bar item's content for one file: its running drtriton jobs and its last result, from the server's
 *  `$/progress`. Each job is one progress token: begin (title "drtriton: <target>"), report (the step), end (the
 *  one-line result). Progress names no file, so each job's file comes from elsewhere (see `jobStarted`, `saved`). */

import type { WorkDoneProgressBegin, WorkDoneProgressEnd, WorkDoneProgressReport } from 'vscode-languageclient/node';

export type ServerState = 'starting' | 'running' | 'stopped';

type ProgressValue = WorkDoneProgressBegin | WorkDoneProgressReport | WorkDoneProgressEnd;
type ProgressToken = string | number;

const TITLE_PREFIX = 'drtriton: ';
/** Longer results are cut in the status bar; the tooltip has them whole. */
export const MAX_TEXT_LENGTH = 80;

interface RunningJob {
  target: string;
  step: string;
  /** The document's URI (as the server names it); undefined until known. */
  file: string | undefined;
}

export interface StatusView {
  text: string;
  /** One line per job, the last result, and what to do about a stopped server. */
  tooltip: string;
}

export class JobStatus {
  private readonly running = new Map<ProgressToken, RunningJob>();
  private readonly lastResults = new Map<string, string>();
  private lastSavedFile: string | undefined;
  private serverState: ServerState = 'starting';

  setServerState(state: ServerState): void {
    this.serverState = state;
    if (state === 'stopped') {
      this.running.clear(); // a stopped server sends no `end` for its jobs
    }
  }

  /** The server starts jobs by itself only for the file just saved (`drtriton.onSave` = search): a job that
   *  begins without a command naming its file belongs to the file saved last. */
  saved(file: string): void {
    this.lastSavedFile = file;
  }

  /** A command started the job of `token` on `file` (its answer names the token; it begins before that answer). */
  jobStarted(token: ProgressToken, file: string): void {
    const job = this.running.get(token);
    if (job !== undefined) {
      job.file = file;
    }
  }

  onProgress(token: ProgressToken, value: ProgressValue): void {
    if (value.kind === 'begin') {
      this.running.set(token, { target: targetOf(value.title), step: value.message ?? 'starting', file: this.lastSavedFile });
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
    if (job.file === undefined) {
      return;
    }
    const message = value.message ?? 'finished';
    this.lastResults.set(job.file, message.startsWith(`${job.target}:`) ? message : `${job.target}: ${message}`);
  }

  /** What an editor of `file` shows: its jobs (with a spinner), else its last result, else the server's state
   *  when it is not running; undefined when there is nothing to say. */
  view(file: string): StatusView | undefined {
    const jobs = [...this.running.values()].filter((job) => job.file === file);
    const lastResult = this.lastResults.get(file);
    const lines = jobs.map((job) => `${job.target}: ${job.step}`);
    if (lastResult !== undefined) {
      lines.push(`Last result: ${lastResult}`);
    }
    let text: string;
    if (this.serverState === 'stopped') {
      text = '$(error) drtriton: server stopped';
      lines.push('The language server stopped: see the drtriton output channel, then run "drtriton: Restart language server".');
    } else if (jobs.length > 0) {
      const more = jobs.length > 1 ? ` (+${jobs.length - 1} more)` : '';
      text = `$(sync~spin) drtriton: ${jobs[0].target} · ${jobs[0].step}${more}`;
    } else if (lastResult !== undefined) {
      text = `drtriton: ${lastResult}`;
    } else if (this.serverState === 'starting') {
      text = '$(sync~spin) drtriton: starting';
    } else {
      return undefined;
    }
    return { text: shorten(text), tooltip: lines.join('\n') };
  }
}

/** The job a drtriton command started: the token from its answer (`{status: "started", token}`), the file from its
 *  arguments (`[{uri, target}]`); undefined for other commands and for refusals. */
export function startedJob(args: readonly unknown[], answer: unknown): { token: string; file: string } | undefined {
  const token = (answer as { token?: unknown } | null | undefined)?.token;
  const file = (args[0] as { uri?: unknown } | null | undefined)?.uri;
  return typeof token === 'string' && typeof file === 'string' ? { token, file } : undefined;
}

function targetOf(title: string): string {
  return title.startsWith(TITLE_PREFIX) ? title.slice(TITLE_PREFIX.length) : title;
}

function shorten(text: string): string {
  return text.length <= MAX_TEXT_LENGTH ? text : `${text.slice(0, MAX_TEXT_LENGTH - 1)}…`;
}
