import type { Backend } from '../engine/backend/backend.js'
import { DatabaseError } from '../errors.js'
import { ResultCollector, makeRowShape, type ResultSet } from '../protocol/decode.js'
import { FrameWriter } from '../engine/wire/frame-writer.js'
import { TxStatus } from '../engine/wire/message-codes.js'
import { ParsedHandler } from '../protocol/handlers.js'
import { needsParamTypes, serializeByValue, type Parser, type Serializer } from '../types/index.js'
import type { DescribeQueryResult, QueryOptions } from './results.js'
import { StatementCache } from './statement-cache.js'

/** SQLSTATE: prepared statement does not exist (e.g. after DISCARD ALL). */
const INVALID_SQL_STATEMENT_NAME = '26000'
/** SQLSTATE 0A000, raised when a cached plan's result type changed (ALTER TABLE). */
const FEATURE_NOT_SUPPORTED = '0A000'

export interface RunnerHooks {
  /** Called after every exec with what it collected (notices, notifications). */
  afterExec(collector: ResultCollector, options: QueryOptions | undefined): void
}

/**
 * Runs `query`, `exec` and `describeQuery` on a backend: encodes the whole
 * request into one buffer, runs it as one exec, decodes rows as the engine
 * writes them. Synchronous; the caller holds the queue.
 */
export class QueryRunner {
  readonly collector = new ResultCollector()
  readonly #handler = new ParsedHandler(this.collector)
  readonly #writer = new FrameWriter()
  readonly cache: StatementCache
  readonly #backend: Backend
  readonly #hooks: RunnerHooks
  parsers: Record<number, Parser>
  serializers: Record<number, Serializer>
  /** Instance serializers chosen by type: every first call asks the server for parameter types. */
  readonly #typesAlwaysNeeded: boolean

  constructor(
    backend: Backend,
    hooks: RunnerHooks,
    parsers: Record<number, Parser>,
    serializers: Record<number, Serializer>,
    cacheSize: number,
    hasCustomSerializers = false,
  ) {
    this.#typesAlwaysNeeded = hasCustomSerializers
    this.#backend = backend
    this.#hooks = hooks
    this.parsers = parsers
    this.serializers = serializers
    this.cache = new StatementCache(cacheSize)
  }

  get handlerAssemblyBytes(): number {
    return this.#handler.assemblyBytes
  }

  /** A raw exec left an extended-protocol sequence open: end it before our next request. */
  pendingSync = false

  #writerWithCloses(): FrameWriter {
    const w = this.#writer.reset()
    if (this.pendingSync) {
      w.sync()
      this.pendingSync = false
    }
    const closes = this.cache.pendingCloses
    if (closes.length > 0) {
      for (const name of closes) w.close('S', name)
      this.cache.pendingCloses = []
    }
    return w
  }

  #run(message: Uint8Array, options: QueryOptions | undefined, shape?: Parameters<ResultCollector['reset']>[2]): ResultCollector {
    const collector = this.collector.reset(this.#parsersFor(options), options?.rowMode ?? 'object', shape)
    this.#backend.exec(message, this.#handler)
    this.#handler.finish()
    const failure = this.#handler.takeFailure()
    this.#hooks.afterExec(collector, options)
    if (failure !== undefined) throw failure
    return collector
  }

  /** Merged tables by per-query `parsers` object: merging 300+ entries on every call cost more than the query. */
  #mergedParsers = new WeakMap<Record<number, Parser>, Record<number, Parser>>()

  /** The instance's parsers changed (array types added): rebuild merged tables and row shapes. */
  parsersChanged(): void {
    this.#mergedParsers = new WeakMap()
    this.cache.clear()
  }

  #parsersFor(options: QueryOptions | undefined): Record<number, Parser> {
    const own = options?.parsers
    if (!own) return this.parsers
    let merged = this.#mergedParsers.get(own)
    if (!merged) {
      merged = { ...this.parsers, ...own }
      this.#mergedParsers.set(own, merged)
    }
    return merged
  }

  /** One statement through the extended protocol, prepared once per SQL text. */
  query(sql: string, params: readonly unknown[], options: QueryOptions | undefined): ResultSet {
    const result = this.#query(sql, params, options, true)
    // The caller owns the rows now; the collector must not keep them alive.
    this.collector.release()
    return result
  }

  #query(sql: string, params: readonly unknown[], options: QueryOptions | undefined, mayRetry: boolean): ResultSet {
    const cache = this.cache
    const key = options?.paramTypes?.length ? `${sql}\u0000${options.paramTypes.join(',')}` : sql
    let cached = cache.enabled ? cache.get(key) : undefined
    if (cached && cached.catalog !== this.#backend.catalogChanges) {
      // Postgres re-plans a statement after DDL but keeps its parameter
      // types: a dropped and re-created type fails with "cache lookup
      // failed". Prepare afresh, as if it were never cached.
      cache.drop(key)
      cached = undefined
    }
    if (cached) {
      const values = this.#serialize(params, cached.paramTypes, options)
      const message = this.#writerWithCloses().bind('', cached.name, values).execute().sync().view()
      const shape =
        cached.fields && options?.parsers ? makeRowShape(cached.fields, this.#parsersFor(options)) : (cached.shape ?? undefined)
      const c = this.#run(message, options, shape)
      const error = c.error
      if (error) {
        // Our statement vanished (DISCARD ALL, DEALLOCATE) or its plan's
        // result type changed (ALTER TABLE): prepare again, once, unless a
        // transaction is now aborted by it.
        if (error.code === INVALID_SQL_STATEMENT_NAME || error.code === FEATURE_NOT_SUPPORTED) {
          cache.drop(key)
          if (mayRetry && c.txStatus === TxStatus.Idle) return this.#query(sql, params, options, false)
        }
        throw withQuery(error, sql, params)
      }
      return firstResult(c)
    }

    const name = cache.enabled ? cache.nextName() : ''
    const catalog = this.#backend.catalogChanges
    const explicitTypes = options?.paramTypes ?? []
    let c: ResultCollector
    if (params.length > 0 && (this.#typesAlwaysNeeded || options?.serializers || needsParamTypes(params))) {
      // The text form of arrays and objects depends on the parameter's type
      // (array literal or JSON): ask the server first.
      c = this.#run(this.#writerWithCloses().parse(name, sql, explicitTypes).describe('S', name).sync().view(), options)
      if (c.error) throw withQuery(c.error, sql, params)
      const paramTypes = c.paramTypes ?? []
      const described = c.described
      this.#remember(key, name, paramTypes, described, catalog)
      const values = this.#serialize(params, paramTypes, options)
      c = this.#run(this.#writerWithCloses().bind('', name, values).execute().sync().view(), options, described ?? undefined)
    } else {
      const values = params.map(serializeByValue)
      c = this.#run(
        this.#writerWithCloses().parse(name, sql, explicitTypes).describe('S', name).bind('', name, values).execute().sync().view(),
        options,
      )
      if (c.parseComplete) this.#remember(key, name, c.paramTypes ?? [], c.described, catalog)
    }
    if (c.error) throw withQuery(c.error, sql, params)
    return firstResult(c)
  }

  #remember(key: string, name: string, paramTypes: readonly number[], described: ResultCollector['described'], catalog: number): void {
    if (!name) return
    const fields = described ? described.fields : null
    // The shape is rebuilt with the instance's parsers: a per-query `parsers`
    // option must not leak into later calls.
    const shape = fields ? makeRowShape(fields, this.parsers) : null
    this.cache.set(key, { name, paramTypes, fields, shape, catalog })
  }

  #serialize(
    params: readonly unknown[],
    paramTypes: readonly number[],
    options: QueryOptions | undefined,
  ): (string | Uint8Array | null)[] {
    const out = new Array<string | Uint8Array | null>(params.length)
    for (let i = 0; i < params.length; i++) {
      const value = params[i]
      if (value === null || value === undefined) {
        out[i] = null
        continue
      }
      const oid = paramTypes[i] ?? 0
      const serialize = options?.serializers?.[oid] ?? this.serializers[oid]
      out[i] = serialize && !(value instanceof Uint8Array) ? serialize(value) : serializeByValue(value)
    }
    return out
  }

  /** Every statement of `sql` through the simple protocol. */
  exec(sql: string, options: QueryOptions | undefined): ResultSet[] {
    const c = this.#run(this.#writerWithCloses().query(sql).view(), options)
    if (c.error) throw withQuery(c.error, sql, undefined)
    const results = c.results.length > 0 ? c.results : [{ rows: [], fields: [], affectedRows: 0 }]
    c.release()
    return results
  }

  describe(sql: string, options: QueryOptions | undefined): DescribeQueryResult {
    const c = this.#run(this.#writerWithCloses().parse('', sql, options?.paramTypes ?? []).describe('S', '').sync().view(), options)
    if (c.error) throw withQuery(c.error, sql, undefined)
    const parsers = this.#parsersFor(options)
    return {
      queryParams: (c.paramTypes ?? []).map((dataTypeID) => ({
        dataTypeID,
        serializer: options?.serializers?.[dataTypeID] ?? this.serializers[dataTypeID],
      })),
      resultFields: (c.described?.fields ?? []).map(({ name, dataTypeID }) => ({
        name,
        dataTypeID,
        // Text and unknown types come back as strings: a parser that returns its input.
        parser: parsers[dataTypeID] ?? identity,
      })),
    }
  }
}

function firstResult(c: ResultCollector): ResultSet {
  return c.results[0] ?? { rows: [], fields: c.described ? c.described.fields : [], affectedRows: 0 }
}

function withQuery(error: DatabaseError, sql: string, params: readonly unknown[] | undefined): DatabaseError {
  error.query = sql
  error.params = params
  return error
}

const identity: Parser = (value) => value
