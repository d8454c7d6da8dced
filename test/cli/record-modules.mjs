// Loaded with `node --import` ahead of a command under test: appends the URL of every module the
// process loads to the file named by PEERGATE_TEST_RECORD_MODULES, one a line, as it is loaded.
// Plain JavaScript so that it is not itself one of the TypeScript files it watches load.
import { appendFileSync } from "node:fs";
import { registerHooks } from "node:module";

const file = process.env.PEERGATE_TEST_RECORD_MODULES;
if (file) {
  registerHooks({
    load(url, context, nextLoad) {
      appendFileSync(file, `${url}\n`);
      return nextLoad(url, context);
    },
  });
}
