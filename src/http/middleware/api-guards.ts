// Guards every API route shares. A browser page must not drive the admin API or /a2a with ambient
// credentials, so a request carrying an `Origin` header is refused. Credentials in a query string
// end up in proxy and access logs, so a query parameter that looks like one is refused too: the
// credential is not even looked at.
//
// The one exception: the console (/console) is a page of this server that drives the admin API. Its
// requests carry the server's own origin and the admin token in the Authorization header, which
// the page holds in the tab's session storage. A foreign page cannot send that header without the
// token (there is no cookie, nothing ambient), and its Origin differs. So the admin routes accept
// an Origin equal to the request's own origin when an Authorization header is present, and nothing
// else; /a2a does not relax at all.
import type { Context, MiddlewareHandler } from "hono";
import { ForbiddenError, ValidationError } from "../../errors.ts";

const credentialParameter = /token|secret|key|auth|password|passwd|jwt|bearer|signature/i;

export function refuseBrowserOrigins(
  options: { allowOwnOriginWithAuthorization?: boolean } = {},
): MiddlewareHandler {
  return async function refuseOrigin(c, next) {
    const origin = c.req.header("origin");
    if (
      origin !== undefined &&
      !(options.allowOwnOriginWithAuthorization && isOwnPage(c, origin))
    ) {
      throw new ForbiddenError(
        "requests from a browser page (with an Origin header) are refused on this route",
      );
    }
    await next();
  };
}

/** The request comes from this server's own page (same origin) and carries a credential header. */
function isOwnPage(c: Context, origin: string): boolean {
  if (c.req.header("authorization") === undefined) return false;
  const site = c.req.header("sec-fetch-site");
  if (site !== undefined && site !== "same-origin") return false;
  // The host, not the scheme: behind a TLS-terminating proxy the page is https and the request
  // reaching us is http. The token in the header is what makes the request the admin's.
  try {
    return new URL(origin).host === new URL(c.req.url).host;
  } catch {
    return false;
  }
}

/**
 * `allow` names parameters that only look like credentials and are part of a route's contract
 * (the A2A `pageToken` of ListTasks, a cursor), matched exactly.
 */
export function refuseQueryCredentials(
  options: { allow?: readonly string[] } = {},
): MiddlewareHandler {
  const allowed = new Set(options.allow ?? []);
  return async function refuseQuery(c, next) {
    if (!c.req.url.includes("?")) return next();
    const url = new URL(c.req.url);
    for (const name of url.searchParams.keys()) {
      if (credentialParameter.test(name) && !allowed.has(name)) {
        throw new ValidationError([
          {
            field: `query.${name.slice(0, 40)}`,
            message: `query parameter ${JSON.stringify(name.slice(0, 40))}: credentials are never accepted in a URL query; send them in the Authorization header`,
          },
        ]);
      }
    }
    await next();
  };
}
