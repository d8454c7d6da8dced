import type { Command } from "./command.ts";

export const serveCommand: Command = {
  words: ["serve"],
  summary: "run the peergate server (what `npm start` runs)",
  help: "[options]\n\nStarts the HTTP server. Configuration comes from the environment; see README.md.",
  async run(_args, ctx) {
    ctx.io.err("serve: not implemented yet");
    return 1;
  },
};
