// Guards every API route shares. A browser page must not drive the admin API or /a2a with ambient
// credentials, so a request carrying an `Origin` header is refused. Credentials in a query string
// end up in proxy and access logs, so a query parameter that looks like one is refused too: the
// credential is not even looked at.
import type { MiddlewareHandler } from "hono";
import { ForbiddenError, ValidationError } from "../../errors.ts";

const credentialParameter = /token|secret|key|auth|password|passwd|jwt|bearer|signature/i;

export function refuseBrowserOrigins(): MiddlewareHandler {
  return async function refuseOrigin(c, next) {
    if (c.req.header("origin") !== undefined) {
      throw new ForbiddenError(
        "requests from a browser page (with an Origin header) are refused on this route",
      );
    }
    await next();
  };
}

export function refuseQueryCredentials(): MiddlewareHandler {
  return async function refuseQuery(c, next) {
    const url = new URL(c.req.url);
    for (const name of url.searchParams.keys()) {
      if (credentialParameter.test(name)) {
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
