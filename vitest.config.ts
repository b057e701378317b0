import { defineConfig } from 'vitest/config'

/** The setup files and reporters every project shares (the private @pgwasm/test-support package). */
const fixtures = new URL('./packages/test-support/src/vitest/', import.meta.url).pathname
/** Under CI=true: fails the run when native PostgreSQL, psql, pgbench or Chromium is missing. */
const ciTools = `${fixtures}ci-tools-setup.ts`
/** Fails the run when a workspace package the tests import by name was not rebuilt after a change. */
const freshDist = `${fixtures}fresh-dist-setup.ts`

export default defineConfig({
  test: {
    // Engine tests are CPU-heavy; two workers match the 2-core machines.
    maxWorkers: 2,
    // The second prints how many tests that need outside tools ran; the third
    // prints failures as they happen and records the running tests (scripts/test.mjs).
    reporters: ['default', `${fixtures}tool-groups-reporter.ts`, `${fixtures}running-tests-reporter.ts`],
    projects: [
      {
        test: {
          name: 'pglite',
          root: 'packages/pglite',
          include: ['tests/**/*.test.ts'],
          globalSetup: [ciTools],
          testTimeout: 60_000,
          hookTimeout: 120_000,
        },
      },
      {
        test: {
          name: 'pglite-socket',
          root: 'packages/pglite-socket',
          include: ['tests/**/*.test.ts'],
          globalSetup: [ciTools, freshDist],
          testTimeout: 60_000,
          hookTimeout: 120_000,
        },
      },
      {
        test: {
          name: 'pglite-prisma',
          root: 'packages/pglite-prisma',
          include: ['tests/**/*.test.ts'],
          // Generates the test schema's Prisma Client (offline) before any file runs.
          globalSetup: ['tests/global-setup.ts', freshDist],
          testTimeout: 120_000,
          hookTimeout: 180_000,
        },
      },
      {
        test: {
          // The engine built from Debian sources (`pnpm engine`); skipped when it
          // is not built, except under CI=true (.ci/run builds it).
          name: 'engine',
          root: 'packages/engine',
          include: ['tests/**/*.test.ts'],
          testTimeout: 180_000,
          hookTimeout: 300_000,
        },
      },
      {
        test: {
          name: 'benchmark',
          root: 'benchmark',
          include: ['tests/**/*.test.ts'],
          globalSetup: [freshDist],
          // One CLI run of every suite at a tiny scale, in beforeAll.
          testTimeout: 600_000,
          hookTimeout: 600_000,
        },
      },
    ],
  },
})
