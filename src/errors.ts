// Every failure peergate reports has one class here with a literal `code`. Services throw these;
// only src/http (and the A2A adapter) turn them into responses. No imports, by design.

export type Problem = { field?: string; value?: unknown; expected?: string; message: string };

export class ConfigError extends Error {
  readonly code = "config-invalid";
  readonly problems: readonly Problem[];
  constructor(problems: readonly Problem[], heading = "peergate cannot start: bad configuration") {
    super([heading, ...problems.map((p) => `  - ${p.message}`)].join("\n"));
    this.name = "ConfigError";
    this.problems = problems;
  }
}

export class ValidationError extends Error {
  readonly code = "invalid-input";
  readonly problems: readonly Problem[];
  constructor(problems: readonly Problem[]) {
    super(problems.map((p) => p.message).join("; "));
    this.name = "ValidationError";
    this.problems = problems;
  }
}

export class UnauthenticatedError extends Error {
  readonly code = "unauthenticated";
  /** The real reason; goes to the audit trail, never to the client. */
  readonly reason: string;
  constructor(reason: string) {
    super("authentication required");
    this.name = "UnauthenticatedError";
    this.reason = reason;
  }
}

export class ForbiddenError extends Error {
  /** `operator-token-required`: the write widens a caller and needs the operator token too. */
  readonly code: "forbidden" | "operator-token-required";
  readonly problems: readonly Problem[] | undefined;
  constructor(
    message: string,
    options: { code?: "operator-token-required"; problems?: readonly Problem[] } = {},
  ) {
    super(message);
    this.name = "ForbiddenError";
    this.code = options.code ?? "forbidden";
    this.problems = options.problems;
  }
}

export class NotFoundError extends Error {
  readonly code = "not-found";
  constructor(message: string) {
    super(message);
    this.name = "NotFoundError";
  }
}

export class ConflictError extends Error {
  readonly code = "conflict";
  constructor(message: string) {
    super(message);
    this.name = "ConflictError";
  }
}

export class RateLimitedError extends Error {
  readonly code = "rate-limited";
  readonly retryAfterSeconds: number;
  constructor(message: string, retryAfterSeconds: number) {
    super(message);
    this.name = "RateLimitedError";
    this.retryAfterSeconds = retryAfterSeconds;
  }
}

export class PayloadTooLargeError extends Error {
  readonly code = "payload-too-large";
  readonly limitBytes: number;
  constructor(limitBytes: number) {
    super(`request body is larger than the ${limitBytes}-byte limit for this route`);
    this.name = "PayloadTooLargeError";
    this.limitBytes = limitBytes;
  }
}

export class UnsupportedMediaTypeError extends Error {
  readonly code = "unsupported-media-type";
  constructor(message: string) {
    super(message);
    this.name = "UnsupportedMediaTypeError";
  }
}

/** The database cannot be reached or is not migrated: fail closed with 503. */
export class UnavailableError extends Error {
  readonly code = "unavailable";
  constructor(message: string, options?: { cause?: unknown }) {
    super(message, options);
    this.name = "UnavailableError";
  }
}

/** The audit chain failed verification. */
export class AuditChainError extends Error {
  readonly code = "audit-chain-broken";
  readonly seq: number;
  constructor(message: string, seq: number) {
    super(message);
    this.name = "AuditChainError";
    this.seq = seq;
  }
}

export type PeergateError =
  | ConfigError
  | ValidationError
  | UnauthenticatedError
  | ForbiddenError
  | NotFoundError
  | ConflictError
  | RateLimitedError
  | PayloadTooLargeError
  | UnsupportedMediaTypeError
  | UnavailableError
  | AuditChainError;
