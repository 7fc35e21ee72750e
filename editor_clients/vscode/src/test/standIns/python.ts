/** A stand-in for a Python interpreter: a shell script that answers the extension's probe for drtriton's package
 *  (and fails anything else), so tests can select an interpreter with or without drtriton. */

import { mkdtempSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';

export function fakePython(hasDrtriton: boolean): string {
  const path = join(mkdtempSync(join(tmpdir(), 'drtriton-python-')), 'python');
  const script = `#!/bin/sh
if [ "$1" = -c ]; then
  case "$2" in *"find_spec('drtriton_lsp')"*) exit ${hasDrtriton ? 0 : 1} ;; esac
fi
exit 2
`;
  writeFileSync(path, script, { mode: 0o755 });
  return path;
}
