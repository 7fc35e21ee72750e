/** drtriton's Markdown reports (written by the server's drtriton.showReport) open as a preview beside the code,
 *  where VS Code would otherwise open the file in place of the code the report is about. */

import * as vscode from 'vscode';

/** `<temp>/drtriton-reports-<user>/<hash>/<stem>.<target>.md`, as drtriton_lsp/server/show_report.py names it. */
const REPORT_PATH = /\/drtriton-reports-[^/]+\/[^/]+\/[^/]+\.md$/;

export function isDrtritonReport(uri: string): boolean {
  return uri.startsWith('file:') && REPORT_PATH.test(uri);
}

/** Opens a report as a Markdown preview to the side; true when `uri` was one. */
export async function showReportBeside(uri: string): Promise<boolean> {
  if (!isDrtritonReport(uri)) {
    return false;
  }
  await vscode.commands.executeCommand('markdown.showPreviewToSide', vscode.Uri.parse(uri));
  return true;
}
