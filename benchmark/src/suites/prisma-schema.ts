/** How many tables (and Prisma models) the schema rows create. */
export const SCHEMA_TABLES = 12

/** The Prisma schema of the TestDatabase rows: {@link SCHEMA_TABLES} models, each with an index. */
export const PRISMA_SCHEMA = `datasource db {
  provider = "postgresql"
}
${Array.from({ length: SCHEMA_TABLES }, (_, i) => `model M${i} {
  id        Int      @id @default(autoincrement())
  name      String
  qty       Int
  createdAt DateTime @default(now())

  @@index([name])
}`).join('\n')}
`
