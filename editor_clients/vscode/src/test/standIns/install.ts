/** Loaded before the tests (`node --require`): routes `vscode` and `vscode-languageclient/node` to the stand-ins.
 *  Inside this folder `vscode-languageclient/node` stays the real module, which the stand-in client wraps. */

import Module = require('module');

type Load = (request: string, parent: { filename?: string } | undefined, isMain: boolean) => unknown;
const moduleLoader = Module as unknown as { _load: Load };
const load = moduleLoader._load;

moduleLoader._load = function (request, parent, isMain) {
  if (request === 'vscode') {
    return require('./vscode');
  }
  if (request === 'vscode-languageclient/node' && !parent?.filename?.startsWith(__dirname)) {
    return require('./languageClient');
  }
  return load.call(this, request, parent, isMain);
};
