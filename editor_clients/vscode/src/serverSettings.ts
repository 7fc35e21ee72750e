/** Which `drtriton.*` settings go to the language server: the server reads section "drtriton", and VS Code's
 *  section of that name also holds this extension's own settings (`drtriton.server.*`, `drtriton.trace.server`). */

export const SECTION = 'drtriton';

export type SettingsObject = Record<string, unknown>;

/** The server's setting names: every contributed `drtriton.<name>` property without a further dot.
 *  Nested ones (`drtriton.server.pythonPath`, `drtriton.trace.server`) belong to this extension. */
export function serverSettingNames(contributedProperties: Record<string, unknown>): string[] {
  const prefix = `${SECTION}.`;
  return Object.keys(contributedProperties)
    .filter((key) => key.startsWith(prefix))
    .map((key) => key.slice(prefix.length))
    .filter((name) => !name.includes('.'));
}

/** The server's settings out of VS Code's "drtriton" section (unknown keys would draw a warning from the server). */
export function serverSettings(section: unknown, names: readonly string[]): SettingsObject {
  const picked: SettingsObject = {};
  if (section === null || typeof section !== 'object') {
    return picked;
  }
  for (const name of names) {
    const value = (section as SettingsObject)[name];
    if (value !== undefined) {
      picked[name] = value;
    }
  }
  return picked;
}

/** A `workspace/configuration` answer with every "drtriton" item replaced by `toServerSettings` of it. */
export function narrowConfigurationAnswer(
  items: readonly { section?: string }[],
  answers: readonly unknown[],
  toServerSettings: (section: unknown) => SettingsObject,
): unknown[] {
  return answers.map((answer, index) => (items[index]?.section === SECTION ? toServerSettings(answer) : answer));
}

/** The settings as the server may have them in Restricted Mode (an untrusted workspace): nothing that runs the
 *  workspace's code (on-save generate jobs, the regression test written when applying), and no worker processes
 *  started ahead for jobs that cannot run. */
export function restrictedSettings(settings: SettingsObject): SettingsObject {
  const restricted: SettingsObject = { ...settings, writeTests: false, warmWorker: false };
  if (settings.onSave === 'search') {
    restricted.onSave = 'hint';
  }
  return restricted;
}
