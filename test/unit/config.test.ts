import { describe, expect, it } from "vitest";
import { loadConfig } from "../../src/config.ts";
import { ConfigError } from "../../src/errors.ts";

function configError(env: Record<string, string>): ConfigError {
  try {
    loadConfig(env, "/srv/app");
  } catch (error) {
    if (error instanceof ConfigError) return error;
    throw error;
  }
  throw new Error("expected loadConfig to throw");
}

describe("loadConfig", () => {
  it("gives the documented defaults on an empty environment", () => {
    expect(loadConfig({}, "/srv/app")).toEqual({
      host: "127.0.0.1",
      port: 8080,
      dataDir: "/srv/app/.peergate",
      databaseUrl: undefined,
      policiesDir: "/srv/app/policies",
      logLevel: "info",
      shutdownTimeoutMs: 8000,
      runStartsAtOnce: 8,
      publicUrl: undefined,
      adminToken: undefined,
      secretKey: undefined,
      workspace: "/srv/app/workspace",
      workspaceHardLinks: "refuse",
      sandbox: "bwrap",
      model: undefined,
      modelBaseUrl: undefined,
      modelApiKey: undefined,
      allowUnmendedDriver: false,
      push: { allowAddresses: [], leaseMs: 30_000, retryBaseMs: 1_000, timeoutMs: 10_000 },
      grpc: undefined,
      tracing: undefined,
      retention: {
        days: {
          runs: 90,
          tasks: 90,
          "push-deliveries": 30,
          "webhook-claims": 400,
          "jti-claims": 1,
          audit: null,
        },
        intervalMs: 3_600_000,
        batchSize: 1_000,
      },
    });
  });

  it("turns the gRPC binding on only with a port, and checks its address", () => {
    expect(loadConfig({ PEERGATE_GRPC_PORT: "" }, "/srv/app").grpc).toBeUndefined();
    expect(loadConfig({ PEERGATE_GRPC_PORT: "50051" }, "/srv/app").grpc).toEqual({
      host: "127.0.0.1",
      port: 50051,
      publicAddress: undefined,
    });
    expect(
      loadConfig(
        {
          PEERGATE_GRPC_PORT: "0",
          PEERGATE_GRPC_HOST: "0.0.0.0",
          PEERGATE_GRPC_PUBLIC_ADDRESS: "grpc.example.org:443",
        },
        "/srv/app",
      ).grpc,
    ).toEqual({ host: "0.0.0.0", port: 0, publicAddress: "grpc.example.org:443" });
    expect(() => loadConfig({ PEERGATE_GRPC_PORT: "grpc" }, "/srv/app")).toThrow(
      /PEERGATE_GRPC_PORT="grpc": expected a port number/,
    );
    expect(() =>
      loadConfig(
        { PEERGATE_GRPC_PORT: "1", PEERGATE_GRPC_PUBLIC_ADDRESS: "https://x.example" },
        "/srv/app",
      ),
    ).toThrow(/PEERGATE_GRPC_PUBLIC_ADDRESS=.*expected host:port/);
  });

  it("turns traces on only with an OTLP endpoint, and names the fix for a bad one", () => {
    expect(
      loadConfig({ OTEL_EXPORTER_OTLP_ENDPOINT: "http://127.0.0.1:4318/" }, "/").tracing,
    ).toEqual({ url: "http://127.0.0.1:4318/v1/traces", serviceName: "peergate", content: false });
    // The signal's own endpoint is used as written, and wins over the general one.
    expect(
      loadConfig(
        {
          OTEL_EXPORTER_OTLP_ENDPOINT: "http://a:4318",
          OTEL_EXPORTER_OTLP_TRACES_ENDPOINT: "https://b/otlp/traces",
          OTEL_SERVICE_NAME: "gate-1",
          PEERGATE_TRACE_CONTENT: "1",
        },
        "/",
      ).tracing,
    ).toEqual({ url: "https://b/otlp/traces", serviceName: "gate-1", content: true });
    expect(
      loadConfig({ OTEL_EXPORTER_OTLP_ENDPOINT: "http://a:4318", OTEL_SDK_DISABLED: "true" }, "/")
        .tracing,
    ).toBeUndefined();
    const bad = configError({
      OTEL_EXPORTER_OTLP_ENDPOINT: "collector:4318",
      OTEL_EXPORTER_OTLP_TRACES_PROTOCOL: "grpc",
      PEERGATE_TRACE_CONTENT: "yes",
    });
    expect(bad.problems.map((p) => p.field).sort()).toEqual([
      "OTEL_EXPORTER_OTLP_ENDPOINT",
      "OTEL_EXPORTER_OTLP_TRACES_PROTOCOL",
      "PEERGATE_TRACE_CONTENT",
    ]);
    expect(bad.message).toContain('OTEL_EXPORTER_OTLP_ENDPOINT="collector:4318"');
    expect(bad.message).toContain("http://127.0.0.1:4318");
    expect(bad.message).toContain('OTEL_EXPORTER_OTLP_TRACES_PROTOCOL="grpc": expected http/json');
  });

  it("reads retention days per family, `off` for never, and refuses anything else", () => {
    const config = loadConfig(
      { PEERGATE_RETAIN_AUDIT_DAYS: "365", PEERGATE_RETAIN_RUNS_DAYS: "off" },
      "/srv/app",
    );
    expect(config.retention.days).toMatchObject({ audit: 365, runs: null, tasks: 90 });
    for (const value of ["0", "1.5", "forever"]) {
      expect(() => loadConfig({ PEERGATE_RETAIN_TASKS_DAYS: value }, "/srv/app")).toThrow(
        /PEERGATE_RETAIN_TASKS_DAYS/,
      );
    }
  });

  it("reads the push egress allow list as IP addresses, and refuses anything else", () => {
    const config = loadConfig(
      { PEERGATE_PUSH_ALLOW_ADDRESSES: " 127.0.0.1, ::1 ,", PEERGATE_PUSH_LEASE_MS: "1500" },
      "/srv/app",
    );
    expect(config.push).toEqual({
      allowAddresses: ["127.0.0.1", "::1"],
      leaseMs: 1500,
      retryBaseMs: 1_000,
      timeoutMs: 10_000,
    });
    expect(() => loadConfig({ PEERGATE_PUSH_ALLOW_ADDRESSES: "localhost" }, "/srv/app")).toThrow(
      /PEERGATE_PUSH_ALLOW_ADDRESSES/,
    );
  });

  it("reads every variable and resolves relative paths against the working directory", () => {
    const config = loadConfig(
      {
        PEERGATE_HOST: "::1",
        PEERGATE_PORT: "0",
        PEERGATE_DATA_DIR: "data",
        DATABASE_URL: "postgres://u:p@127.0.0.1:5432/pg",
        PEERGATE_POLICIES_DIR: "/etc/peergate",
        PEERGATE_LOG_LEVEL: "debug",
      },
      "/srv/app",
    );
    expect(config).toMatchObject({
      host: "::1",
      port: 0,
      dataDir: "/srv/app/data",
      databaseUrl: "postgres://u:p@127.0.0.1:5432/pg",
      policiesDir: "/etc/peergate",
      logLevel: "debug",
    });
  });

  it("refuses hard-linked files in the workspace unless PEERGATE_WORKSPACE_HARD_LINKS=allow", () => {
    expect(loadConfig({}, "/").workspaceHardLinks).toBe("refuse");
    expect(loadConfig({ PEERGATE_WORKSPACE_HARD_LINKS: "refuse" }, "/").workspaceHardLinks).toBe(
      "refuse",
    );
    expect(loadConfig({ PEERGATE_WORKSPACE_HARD_LINKS: "allow" }, "/").workspaceHardLinks).toBe(
      "allow",
    );
    expect(() => loadConfig({ PEERGATE_WORKSPACE_HARD_LINKS: "yes" }, "/")).toThrow(
      /PEERGATE_WORKSPACE_HARD_LINKS="yes": expected refuse .* or allow/,
    );
  });

  it("treats an empty DATABASE_URL as unset (embedded database)", () => {
    expect(loadConfig({ DATABASE_URL: "" }, "/").databaseUrl).toBeUndefined();
  });

  it("lists every bad variable at once, with its value and what was expected", () => {
    const error = configError({
      PEERGATE_PORT: "99999",
      PEERGATE_LOG_LEVEL: "loud",
      PEERGATE_HOST: "",
    });
    expect(error.problems.map((p) => p.field).sort()).toEqual([
      "PEERGATE_HOST",
      "PEERGATE_LOG_LEVEL",
      "PEERGATE_PORT",
    ]);
    expect(error.message).toContain(
      'PEERGATE_PORT="99999": expected a port number from 0 to 65535',
    );
    expect(error.message).toContain('PEERGATE_LOG_LEVEL="loud": expected one of debug, info');
    expect(error.message).toContain('PEERGATE_HOST="": expected');
  });

  it("rejects a port that is not a whole number", () => {
    expect(configError({ PEERGATE_PORT: "80.5" }).message).toContain('PEERGATE_PORT="80.5"');
    expect(configError({ PEERGATE_PORT: "http" }).message).toContain('PEERGATE_PORT="http"');
  });

  it("never echoes a secret variable's value, even a malformed one", () => {
    const error = configError({
      PEERGATE_ADMIN_TOKEN: "short-secret-value",
      PEERGATE_SECRET_KEY: "not-a-key-hunter3",
    });
    expect(error.message).toContain("PEERGATE_ADMIN_TOKEN=(value hidden)");
    expect(error.message).toContain("PEERGATE_SECRET_KEY=(value hidden)");
    expect(error.message).not.toContain("short-secret-value");
    expect(JSON.stringify(error.problems)).not.toContain("hunter3");
  });

  it("checks the model setting and the public URL", () => {
    const error = configError({
      PEERGATE_MODEL: "gpt-4",
      PEERGATE_PUBLIC_URL: "https://example.com/",
      PEERGATE_MODEL_BASE_URL: "not a url",
    });
    expect(error.message).toContain('PEERGATE_MODEL="gpt-4": expected provider:model');
    expect(error.message).toContain("PEERGATE_PUBLIC_URL");
    expect(error.message).toContain("PEERGATE_MODEL_BASE_URL");
    const ok = loadConfig(
      { PEERGATE_MODEL: "openai-compatible:llama3", PEERGATE_WORKSPACE: "ws" },
      "/srv",
    );
    expect(ok.model).toBe("openai-compatible:llama3");
    expect(ok.workspace).toBe("/srv/ws");
  });

  it("never echoes a DATABASE_URL, which carries a password", () => {
    const error = configError({ DATABASE_URL: "mysql://root:hunter2@db/x" });
    expect(error.message).toContain("DATABASE_URL=(value hidden)");
    expect(error.message).not.toContain("hunter2");
    expect(JSON.stringify(error.problems)).not.toContain("hunter2");
  });
});
