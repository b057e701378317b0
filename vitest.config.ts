import { defineConfig } from 'vitest/config'

export default defineConfig({
  test: {
    // Engine tests are CPU-heavy; two workers match the 2-core machines.
    maxWorkers: 2,
    projects: [
      {
        test: {
          name: 'pglite',
          root: 'packages/pglite',
          include: ['tests/**/*.test.ts'],
          testTimeout: 60_000,
          hookTimeout: 120_000,
        },
      },
      {
        test: {
          name: 'pglite-socket',
          root: 'packages/pglite-socket',
          include: ['tests/**/*.test.ts'],
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
          globalSetup: ['tests/global-setup.ts'],
          testTimeout: 120_000,
          hookTimeout: 180_000,
        },
      },
      {
        test: {
          name: 'benchmark',
          root: 'benchmark',
          include: ['tests/**/*.test.ts'],
          // One CLI run of every suite at a tiny scale, in beforeAll.
          testTimeout: 600_000,
          hookTimeout: 600_000,
        },
      },
    ],
  },
})
