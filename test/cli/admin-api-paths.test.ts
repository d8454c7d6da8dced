// The CLI calls the admin API with the methods and paths of src/http/routes/admin-api-paths.ts,
// which must be the contract's own.
import { describe, expect, it } from "vitest";
import { adminApi } from "../../src/http/routes/admin-api.ts";
import { adminPaths } from "../../src/http/routes/admin-api-paths.ts";

describe("the admin API's paths as plain data", () => {
  it("are the contract's methods and paths, every operation and no other", () => {
    const contract = Object.fromEntries(
      Object.entries(adminApi).map(([op, route]) => [
        op,
        { method: route.method, path: route.path },
      ]),
    );
    expect(adminPaths).toEqual(contract);
  });
});
