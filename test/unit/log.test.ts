import { describe, expect, it } from "vitest";
import { createLogger } from "../../src/log.ts";

function capture(level: "debug" | "info" | "warn" | "error" | "silent" = "debug") {
  const lines: string[] = [];
  const logger = createLogger({
    level,
    write: (line) => lines.push(line),
    now: () => new Date("2026-01-02T03:04:05.000Z"),
  });
  return { logger, lines, records: () => lines.map((l) => JSON.parse(l)) };
}

describe("logger", () => {
  it("writes one JSON object per line with time, level and message", () => {
    const { logger, records } = capture();
    logger.info("hello", { requestId: "r1" });
    expect(records()).toEqual([
      { time: "2026-01-02T03:04:05.000Z", level: "info", msg: "hello", requestId: "r1" },
    ]);
  });

  it("drops records below the configured level", () => {
    const { logger, lines } = capture("warn");
    logger.debug("a");
    logger.info("b");
    logger.warn("c");
    logger.error("d");
    expect(lines.map((l) => JSON.parse(l).msg)).toEqual(["c", "d"]);
  });

  it("never writes credential-looking fields, at any depth", () => {
    const { logger, lines } = capture();
    logger.info("req", {
      headers: { Authorization: "Bearer pg_secret1", cookie: "s=secret2" },
      token: "secret3",
      nested: { deeper: { apiKey: "secret4", ifttt_secret: "secret5", jwt: "eyJsecret6" } },
    });
    const text = lines.join("\n");
    for (const n of [1, 2, 3, 4, 5, 6]) expect(text).not.toContain(`secret${n}`);
    expect(text).toContain("[redacted]");
  });

  it("strips CR/LF so a hostile value cannot forge a log line", () => {
    const { logger, lines } = capture();
    logger.info("name\nforged", { caller: 'evil\r\n{"level":"error","msg":"fake"}' });
    expect(lines).toHaveLength(1);
    expect(lines[0]).not.toMatch(/[\r\n]/);
  });

  it("writes an error's cause chain, so a wrapped driver error says what failed", () => {
    const { logger, records } = capture();
    const driver = new Error('could not extend file "base/5/1": No space left on device');
    logger.error("request failed", {
      error: new Error("Failed query: insert …", { cause: driver }),
    });
    expect(records()[0].error).toEqual({
      name: "Error",
      message: "Failed query: insert …",
      cause: {
        name: "Error",
        message: 'could not extend file "base/5/1": No space left on device',
      },
    });
  });

  it("child loggers carry their fields", () => {
    const { logger, records } = capture();
    logger.child({ instance: "a" }).warn("x", { n: 1 });
    expect(records()[0]).toMatchObject({ instance: "a", n: 1, level: "warn" });
  });
});
