// The agent card, built once from policies/agent.yaml and the public URL, in both wire shapes:
// A2A 1.0 (ProtoJSON: oneof security schemes, `supportedInterfaces`, one entry per version) and
// v0.3 (OpenAPI-style `securitySchemes`, `url`, `protocolVersion`). The SDK keeps cards as
// protobuf-shaped objects whose oneofs are `{$case, value}` wrappers; serialising those with
// JSON.stringify would put the wrappers on the wire, so the 1.0 body goes through the SDK's
// ProtoJSON codec and the 0.3 body is written out field by field.
//
// The extended card (GetExtendedAgentCard, agent/getAuthenticatedExtendedCard) lists the skills a
// caller may use. Skills in agent.yaml name no tools, so nothing ties a skill to the caller's
// ceiling: every authenticated caller sees every skill. Should skills ever declare the tools they
// need, `selectSkills` is the one place to filter them.
import { createHash } from "node:crypto";
import { AgentCard, type AgentInterface, type AgentSkill } from "@a2a-js/sdk";
import type { Caller } from "../domain/caller.ts";
import type { VersionedAgentPolicy } from "../load-policies.ts";
import type { ProtocolVersion } from "./call-context.ts";
import { usageExtensionCard } from "./usage-extension.ts";

/** A card ready to serve: the exact body and its strong validator. */
export type AgentCardDocument = { body: string; etag: string };

export type AgentCards = {
  /** The SDK's in-memory card (what DefaultRequestHandler is given). */
  core: AgentCard;
  /** `A2A-Version: 1.0` (and anything that is not a 0.3 request). */
  v1: AgentCardDocument;
  /** No `A2A-Version` header, or 0.3. */
  v03: AgentCardDocument;
  /** The bindings the card lists (`listInterfaces`). */
  interfaces: readonly AgentInterface[];
};

// The media types a run reads and writes (src/a2a/conversation.ts, run-executor.ts). Text parts
// are read as text and data parts as JSON. File parts (bytes or a URL) of any type are taken
// without an error but only named to the run (filename, media type, size or URL): their content
// is never opened or fetched (DESIGN §5), so no file type is listed — a client should not send a
// PDF expecting it to be read. Every part peergate writes is text/plain.
const inputModes = ["text/plain", "application/json"];
const outputModes = ["text/plain"];

// Two credentials, either of which authenticates (the requirements are alternatives): the
// operator-issued opaque token every caller can have, and a JWT for a caller registered with a
// key. `bearerFormat` is only a hint (OpenAPI, A2A 1.0 HTTPAuthSecurityScheme); "JWT" alone
// would send clients of an opaque-token caller looking for a token issuer that does not exist.
const credentialSchemes = {
  bearer: {
    bearerFormat: "opaque",
    description:
      "An opaque peergate token (pg_…) issued by the operator for this caller; sent as Authorization: Bearer pg_….",
  },
  jwt: {
    bearerFormat: "JWT",
    description:
      "A JWT (RFC 7519) signed with the key the operator registered for this caller, with the issuer and audience it names and exp, iat and jti; only for callers registered with a key.",
  },
} as const;

/** `path` under the public URL, keeping any path prefix the URL already has. */
export function resolvePublicUrl(publicUrl: string, path: string): string {
  const base = new URL(publicUrl);
  const prefix = base.pathname.replace(/\/+$/, "");
  base.pathname = `${prefix}${path}`;
  base.search = "";
  base.hash = "";
  return base.toString();
}

/** `/a2a` under the public URL, keeping any path prefix the URL already has. */
export function resolveEndpointUrl(publicUrl: string): string {
  return resolvePublicUrl(publicUrl, "/a2a");
}

/**
 * The base URL of the HTTP+JSON binding: the public URL itself (its routes, `/message:send` …, sit
 * at the server's root, under any path prefix the URL has), without a trailing slash, since
 * clients append `/message:send` to it.
 */
export function resolveHttpJsonUrl(publicUrl: string): string {
  return resolvePublicUrl(publicUrl, "").replace(/\/+$/, "");
}

/**
 * Every binding this server answers, as the card lists them: the one place a binding is
 * declared. JSON-RPC first, since clients that take the card's order pick it (it speaks 1.0 and
 * v0.3; HTTP+JSON and gRPC speak 1.0 only). gRPC is listed only when it is served (`grpcAddress`).
 */
export function listInterfaces(publicUrl: string, features: CardFeatures = {}): AgentInterface[] {
  const jsonRpc = resolveEndpointUrl(publicUrl);
  const entry = (url: string, protocolBinding: string, protocolVersion: string) => ({
    url,
    protocolBinding,
    tenant: "",
    protocolVersion,
  });
  return [
    entry(jsonRpc, "JSONRPC", "1.0"),
    entry(jsonRpc, "JSONRPC", "0.3"),
    entry(resolveHttpJsonUrl(publicUrl), "HTTP+JSON", "1.0"),
    ...grpcInterfaces(features),
  ];
}

function toSkill(skill: VersionedAgentPolicy["skills"][number]): AgentSkill {
  return {
    id: skill.id,
    name: skill.name,
    description: skill.description,
    tags: [...skill.tags],
    examples: [...skill.examples],
    inputModes: [],
    outputModes: [],
    securityRequirements: [],
  };
}

/** The skills `caller` may use; today all of them (see the module comment). */
export function selectSkills(
  _caller: Caller,
  skills: VersionedAgentPolicy["skills"],
): VersionedAgentPolicy["skills"] {
  return skills;
}

/** What the card declares beyond agent.yaml. */
export type CardFeatures = {
  /** Whether push notification configs are accepted (the A2A service was given a push store). */
  pushNotifications?: boolean;
  /** `host:port` of the gRPC binding, when it is on (PEERGATE_GRPC_PORT). */
  grpcAddress?: string | undefined;
};

/**
 * The gRPC binding's entry in `supportedInterfaces`, when it is on: A2A 1.0 only (the SDK's
 * `lf.a2a.v1` service), at `host:port` as a gRPC client dials it.
 */
export function grpcInterfaces(features: CardFeatures): AgentCard["supportedInterfaces"] {
  if (!features.grpcAddress) return [];
  return [
    { url: features.grpcAddress, protocolBinding: "GRPC", tenant: "", protocolVersion: "1.0" },
  ];
}

function buildCoreCard(
  agent: VersionedAgentPolicy,
  interfaces: readonly AgentInterface[],
  skills: VersionedAgentPolicy["skills"],
  features: CardFeatures,
): AgentCard {
  return {
    name: agent.name,
    description: agent.description,
    version: agent.declaredVersion,
    supportedInterfaces: interfaces.map((i) => ({ ...i })),
    provider: undefined,
    capabilities: {
      streaming: true,
      pushNotifications: features.pushNotifications ?? false,
      extensions: [usageExtensionCard],
      extendedAgentCard: true,
    },
    securitySchemes: Object.fromEntries(
      Object.entries(credentialSchemes).map(([name, scheme]) => [
        name,
        { scheme: { $case: "httpAuthSecurityScheme", value: { scheme: "bearer", ...scheme } } },
      ]),
    ),
    securityRequirements: Object.keys(credentialSchemes).map((name) => ({
      schemes: { [name]: { list: [] } },
    })),
    defaultInputModes: [...inputModes],
    defaultOutputModes: [...outputModes],
    skills: skills.map(toSkill),
    signatures: [],
  };
}

/**
 * The 1.0 wire form. ProtoJSON drops empty repeated fields, which would turn the security
 * requirement into `{bearer: {}}`; the scope list is written out so the card reads as the spec's
 * examples do.
 */
export function serializeCardV1(card: AgentCard): Record<string, unknown> {
  const json = AgentCard.toJSON(card) as Record<string, unknown>;
  json.securityRequirements = card.securityRequirements.map((requirement) => ({
    schemes: Object.fromEntries(
      Object.entries(requirement.schemes).map(([name, scopes]) => [
        name,
        { list: [...scopes.list] },
      ]),
    ),
  }));
  return json;
}

/** The v0.3 wire form of the same card. */
export function serializeCardV03(card: AgentCard): Record<string, unknown> {
  // A v0.3 client reads only `url`: the JSON-RPC endpoint, the one binding that speaks 0.3 here.
  const primary = card.supportedInterfaces.find(
    (i) => i.protocolVersion === "0.3" && i.protocolBinding === "JSONRPC",
  );
  const securitySchemes: Record<string, unknown> = {};
  for (const [name, scheme] of Object.entries(card.securitySchemes)) {
    if (scheme.scheme?.$case !== "httpAuthSecurityScheme") continue;
    const http = scheme.scheme.value;
    securitySchemes[name] = {
      type: "http",
      scheme: http.scheme,
      ...(http.bearerFormat ? { bearerFormat: http.bearerFormat } : {}),
      ...(http.description ? { description: http.description } : {}),
    };
  }
  return {
    name: card.name,
    description: card.description,
    url: primary?.url ?? card.supportedInterfaces[0]?.url ?? "",
    preferredTransport: "JSONRPC",
    protocolVersion: "0.3.0",
    version: card.version,
    capabilities: {
      streaming: card.capabilities?.streaming ?? false,
      pushNotifications: card.capabilities?.pushNotifications ?? false,
      stateTransitionHistory: false,
    },
    supportsAuthenticatedExtendedCard: card.capabilities?.extendedAgentCard ?? false,
    securitySchemes,
    security: card.securityRequirements.map((requirement) =>
      Object.fromEntries(
        Object.entries(requirement.schemes).map(([name, scopes]) => [name, [...scopes.list]]),
      ),
    ),
    defaultInputModes: [...card.defaultInputModes],
    defaultOutputModes: [...card.defaultOutputModes],
    skills: card.skills.map((skill) => ({
      id: skill.id,
      name: skill.name,
      description: skill.description,
      tags: [...skill.tags],
      ...(skill.examples.length > 0 ? { examples: [...skill.examples] } : {}),
    })),
  };
}

export function toDocument(json: unknown): AgentCardDocument {
  const body = JSON.stringify(json);
  const hash = createHash("sha256").update(body).digest("base64url").slice(0, 27);
  return { body, etag: `"${hash}"` };
}

export function buildAgentCards(
  agent: VersionedAgentPolicy,
  publicUrl: string,
  features: CardFeatures = {},
): AgentCards {
  const interfaces = listInterfaces(publicUrl, features);
  const core = buildCoreCard(agent, interfaces, agent.skills, features);
  return {
    core,
    v1: toDocument(serializeCardV1(core)),
    v03: toDocument(serializeCardV03(core)),
    interfaces,
  };
}

/** The card an authenticated caller gets: the public one with only the skills it may use. */
export function buildExtendedCard(
  agent: VersionedAgentPolicy,
  interfaces: readonly AgentInterface[],
  caller: Caller,
  features: CardFeatures = {},
): AgentCard {
  return buildCoreCard(agent, interfaces, selectSkills(caller, agent.skills), features);
}

export function serializeCard(card: AgentCard, version: ProtocolVersion): Record<string, unknown> {
  return version === "1.0" ? serializeCardV1(card) : serializeCardV03(card);
}
