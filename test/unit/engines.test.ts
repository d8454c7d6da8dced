// The EBADENGINE warnings: npm checks every `engines` range against the Node that runs npm
// itself (often the system's, older), not against the Node pinned as a devDependency, which is
// the one peergate's scripts run on. The honest fix is to run npm on the pinned Node (see
// docs/operating.md); what this keeps true is that the declared range is the one peergate runs
// on: `node src/main.ts` needs type stripping without a flag and the pinned Node is 24.
import { readFile } from "node:fs/promises";
import { describe, expect, it } from "vitest";

const pkg = JSON.parse(await readFile(new URL("../../package.json", import.meta.url), "utf8"));
const lock = JSON.parse(
  await readFile(new URL("../../package-lock.json", import.meta.url), "utf8"),
);

describe("engines", () => {
  it("declares the Node that is pinned and tested, no lower", () => {
    const pinned = Number(String(pkg.devDependencies.node).split(".")[0]);
    expect(pkg.engines.node).toBe(`>=${pinned}`);
    expect(lock.packages[""].engines.node).toBe(pkg.engines.node);
    expect(Number(process.versions.node.split(".")[0])).toBeGreaterThanOrEqual(pinned);
  });
});
