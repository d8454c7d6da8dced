// drizzle-kit reads this to generate SQL migrations from src/db/schema.ts into drizzle/
// (`npm run db:generate`). The generated files are applied by src/db/migrate.ts on both drivers.
import { defineConfig } from "drizzle-kit";

export default defineConfig({
  dialect: "postgresql",
  schema: "./src/db/schema.ts",
  out: "./drizzle",
  strict: true,
  verbose: true,
});
