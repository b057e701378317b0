import { createHash } from 'node:crypto'
import { afterAll, beforeAll, describe, expect, it } from 'vitest'
import { queryFrame as rawQuery } from '@pgwasm/test-support/frontend'
import { DatabaseError, PGlite } from '../src/index.js'
import { ENCODING_NAMES } from '../src/engine/hooks/encoding-conversions.js'
import { concat, rejection } from './helpers.js'

/*
 * Another client encoding, convert(), convert_to(), convert_from() and
 * COPY ... ENCODING run the engine's conversion side modules, whose helpers
 * the published build lacks (engine/hooks/encoding-conversions.ts supplies them);
 * any other import a side module needs and nothing defines raises an ERROR
 * (engine/hooks/missing-imports.ts). Before, each of these ended the engine, and
 * an in-memory database with it. The expected bytes and messages were
 * checked by hand against native PostgreSQL (the conversion tables have
 * not changed for these characters since 15): every conversion of the
 * candidates below, in every direction pg_conversion has, gave the same
 * bytes or the same error.
 */

/** Non-ASCII characters of many scripts; each encoding's sample is those of them it holds. */
const CANDIDATES = [
  ...'éàüñçøåßæ¿¡£¥©®°±µ¶·¼½¾×÷',
  ...'ąęłńśźżčřšžőűğışāēīūŵŷœŒŸ',
  ...'ươảạễ₫αβγΩάжяЖёєїўґ',
  ...'אשתעبة،กข๑€–—‘’“”†•…‰™№─│┌░■√∞',
  ...'日本語中文漢字國台灣한국어똠あいカナｱ〒㈱①',
  // A pair JIS X 0213 encodes as one character, and one past the BMP (GB18030 computes it).
  'か\u309a',
  '😀',
]

/**
 * WHATWG labels of encodings whose decoder agrees with Postgres for the
 * candidates: an oracle outside Postgres. (Node decodes windows-1252 as
 * Latin-1; WHATWG's big5 and euc-kr map some of them elsewhere.)
 */
const DECODER_LABELS: Readonly<Record<string, string>> = {
  LATIN2: 'iso-8859-2',
  LATIN3: 'iso-8859-3',
  LATIN4: 'iso-8859-4',
  LATIN6: 'iso-8859-10',
  LATIN7: 'iso-8859-13',
  LATIN8: 'iso-8859-14',
  LATIN9: 'iso-8859-15',
  ISO_8859_5: 'iso-8859-5',
  ISO_8859_6: 'iso-8859-6',
  ISO_8859_7: 'iso-8859-7',
  ISO_8859_8: 'iso-8859-8',
  KOI8R: 'koi8-r',
  KOI8U: 'koi8-u',
  WIN866: 'ibm866',
  WIN874: 'windows-874',
  WIN1250: 'windows-1250',
  WIN1251: 'windows-1251',
  WIN1253: 'windows-1253',
  WIN1254: 'windows-1254',
  WIN1255: 'windows-1255',
  WIN1256: 'windows-1256',
  WIN1257: 'windows-1257',
  WIN1258: 'windows-1258',
  EUC_JP: 'euc-jp',
  SJIS: 'shift_jis',
  GBK: 'gbk',
  GB18030: 'gb18030',
}

/** A decoder for `label`, or undefined where this Node's ICU lacks it. */
function decoder(label: string | undefined): TextDecoder | undefined {
  if (label === undefined) return undefined
  try {
    return new TextDecoder(label, { fatal: true })
  } catch {
    return undefined
  }
}

const utf8 = (text: string): Uint8Array => new TextEncoder().encode(text)
const hex = (bytes: Uint8Array): string => Buffer.from(bytes).toString('hex')

interface Reply {
  rows: Uint8Array[][]
  /** ErrorResponse fields by their code letter. */
  error?: Record<string, string>
}

/** The DataRows and the ErrorResponse of a backend reply (NULL columns are left out). */
function parseReply(bytes: Uint8Array): Reply {
  const view = new DataView(bytes.buffer, bytes.byteOffset, bytes.byteLength)
  const reply: Reply = { rows: [] }
  for (let at = 0; at < bytes.length; at += 1 + view.getInt32(at + 1)) {
    const type = String.fromCharCode(bytes[at]!)
    const body = at + 5
    if (type === 'D') {
      const row: Uint8Array[] = []
      let p = body + 2
      for (let n = view.getInt16(body); n > 0; n--) {
        const length = view.getInt32(p)
        p += 4
        if (length >= 0) row.push(bytes.slice(p, p + length))
        p += Math.max(length, 0)
      }
      reply.rows.push(row)
    } else if (type === 'E') {
      const fields: Record<string, string> = {}
      for (let p = body; bytes[p] !== 0; ) {
        const end = bytes.indexOf(0, p + 1)
        fields[String.fromCharCode(bytes[p]!)] = Buffer.from(bytes.subarray(p + 1, end)).toString('latin1')
        p = end + 1
      }
      reply.error = fields
    }
  }
  return reply
}

const KEPT_ROWS = 1000

/** Whether `c` survives a trip to `enc` and back (some encodings' verifiers reject bytes their own conversion writes). */
const HELPERS = `
  create function round_trips(c text, enc name) returns boolean language plpgsql as $$
  begin
    return convert_from(convert_to(c, enc), enc) = c;
  exception when untranslatable_character or character_not_in_repertoire then
    return false;
  end $$;
  create function source_bytes(c text, enc name, via name) returns bytea language plpgsql as $$
  begin
    if enc = 'MULE_INTERNAL' then
      return convert(convert_to(c, via), via, enc);
    end if;
    return convert_to(c, enc);
  exception when untranslatable_character then
    return null;
  end $$;
  create function try_convert(b bytea, src name, dst name) returns text language plpgsql as $$
  begin
    return encode(convert(b, src, dst), 'hex');
  exception when others then
    return 'ERROR ' || sqlstate;
  end $$;
`

async function expectAnswering(db: PGlite): Promise<void> {
  expect((await db.query<{ n: number }>('select count(*)::int as n from kept')).rows).toEqual([{ n: KEPT_ROWS }])
}

describe('encodings', () => {
  let db: PGlite
  /** Client encodings with conversions to and from UTF8, from the catalog. */
  let clientEncodings: string[]
  /** Each encoding's sample: the candidates it holds, in order. */
  const samples = new Map<string, string>()

  beforeAll(async () => {
    db = await PGlite.create()
    await db.exec(HELPERS)
    await db.exec(`create table kept (n int, t text); insert into kept select n, 'row ' || n from generate_series(1, ${KEPT_ROWS}) n`)
    clientEncodings = (
      await db.query<{ name: string }>(`
        select distinct pg_encoding_to_char(c.conforencoding) as name from pg_conversion c
        where c.contoencoding = pg_char_to_encoding('UTF8')
          and exists (select from pg_conversion r where r.conforencoding = c.contoencoding and r.contoencoding = c.conforencoding)
        order by 1`)
    ).rows.map((r) => r.name)
  })

  afterAll(async () => {
    await db?.close()
  })

  /** The candidates `encoding` holds (asked of the engine, which converts them). */
  async function sampleOf(encoding: string): Promise<string> {
    let sample = samples.get(encoding)
    if (sample === undefined) {
      const { rows } = await db.query<{ s: string | null }>(
        `select string_agg(c, '' order by i) as s from unnest($1::text[]) with ordinality u(c, i) where round_trips(c, $2)`,
        [CANDIDATES, encoding],
      )
      sample = rows[0]!.s ?? ''
      samples.set(encoding, sample)
    }
    return sample
  }

  it('every client encoding with conversions to and from UTF8 round-trips its text', async () => {
    // The catalog lists them all: the Latin, Windows, Cyrillic and Asian ones.
    expect(clientEncodings.length).toBeGreaterThanOrEqual(39)
    expect(clientEncodings).toEqual(expect.arrayContaining(['LATIN1', 'LATIN9', 'WIN1252', 'SJIS', 'BIG5', 'GB18030', 'EUC_JIS_2004', 'JOHAB']))
    for (const encoding of clientEncodings) {
      const sample = await sampleOf(encoding)
      expect(sample.length, encoding).toBeGreaterThan(0)
      const local = (await db.query<{ b: Uint8Array }>('select convert_to($1, $2) as b', [sample, encoding])).rows[0]!.b
      expect(local.some((b) => b >= 0x80), encoding).toBe(true)
      const whatwg = decoder(DECODER_LABELS[encoding])
      if (whatwg) expect(whatwg.decode(local), encoding).toBe(sample)

      // A client of that encoding sends its bytes and reads them back; the
      // server holds the UTF-8 text (its hex comes back in ASCII).
      await db.exec(`set client_encoding to '${encoding}'`)
      const sql = concat([utf8(`select '`), local, utf8(`' as t, encode(convert_to('`), local, utf8(`', 'UTF8'), 'hex') as h`)])
      const reply = parseReply(await db.execProtocolRaw(rawQuery(sql)))
      await db.exec('reset client_encoding')
      expect(reply.error, encoding).toBeUndefined()
      expect(hex(reply.rows[0]![0]!), encoding).toBe(hex(local))
      expect(Buffer.from(reply.rows[0]![1]!).toString(), encoding).toBe(hex(utf8(sample)))
    }
    await expectAnswering(db)
  })

  it('the issue: LATIN1, LATIN9 and WIN1252 clients get non-ASCII text and the instance goes on', async () => {
    for (const encoding of ['LATIN1', 'LATIN9', 'WIN1252']) {
      await db.exec(`set client_encoding to '${encoding}'`)
      // chr() makes the text in the server, so only the way out converts it.
      const reply = parseReply(await db.execProtocolRaw(rawQuery(utf8('select chr(233) as e, chr(252) as u'))))
      await db.exec('reset client_encoding')
      expect(reply.error).toBeUndefined()
      expect(reply.rows[0]!.map(hex)).toEqual(['e9', 'fc'])
    }
    await expectAnswering(db)
  })

  it('convert() converts or refuses, for every row of pg_conversion, byte for byte as Postgres itself', async () => {
    const { rows } = await db.query<{ conversions: number }>('select count(*)::int as conversions from pg_conversion')
    expect(rows[0]!.conversions).toBeGreaterThan(100)
    // Every candidate the source encoding holds, through every conversion
    // (MULE_INTERNAL's text is made from the other side's): one line each.
    const { rows: lines } = await db.query<{ line: string }>(
      `select format('%s %s %s', conname, encode(source, 'hex'), try_convert(source, src, dst)) as line
       from (select conname, pg_encoding_to_char(conforencoding) as src, pg_encoding_to_char(contoencoding) as dst from pg_conversion) v,
         lateral (select i, source_bytes(c, src, dst) as source from unnest($1::text[]) with ordinality u(c, i)) s
       where source is not null
       order by conname, i`,
      [CANDIDATES],
    )
    const results = lines.map(({ line }) => line.split(' ').slice(2).join(' '))
    for (const [i, result] of results.entries()) expect(result, lines[i]!.line).toMatch(/^([0-9a-f]+|ERROR 22P05|ERROR 22021)$/)
    expect(results.filter((r) => !r.startsWith('ERROR')).length).toBeGreaterThan(4000)
    // Native PostgreSQL gives exactly these lines (checked by hand with the
    // same query on 15.18, whose tables equal 18's for these characters).
    const digest = createHash('sha256')
      .update(lines.map((l) => l.line).join('\n'))
      .digest('hex')
    expect({ lines: lines.length, digest }).toEqual({ lines: 7874, digest: '81aa99cf43fb183903baa05380472fd32a312576820cee2c79f6092422e0a61c' })
    await expectAnswering(db)
  })

  it('untranslatable characters give 22P05 and invalid bytes 22021, in Postgres words', async () => {
    const cases: [sql: string, code: string, message: string][] = [
      [`select convert_to('日本', 'LATIN1')`, '22P05', 'character with byte sequence 0xe6 0x97 0xa5 in encoding "UTF8" has no equivalent in encoding "LATIN1"'],
      [`select convert_from('\\x81'::bytea, 'WIN1252')`, '22P05', 'character with byte sequence 0x81 in encoding "WIN1252" has no equivalent in encoding "UTF8"'],
      [`select convert_from('\\x8140ff'::bytea, 'SJIS')`, '22021', 'invalid byte sequence for encoding "SJIS": 0xff'],
      [`select convert_from('\\xa4'::bytea, 'EUC_KR')`, '22021', 'invalid byte sequence for encoding "EUC_KR": 0xa4'],
      [`select convert('\\xc328'::bytea, 'UTF8', 'LATIN1')`, '22021', 'invalid byte sequence for encoding "UTF8": 0xc3 0x28'],
      [`select convert('\\x8241'::bytea, 'MULE_INTERNAL', 'LATIN1')`, '22021', 'invalid byte sequence for encoding "MULE_INTERNAL": 0x82 0x41'],
      [`select convert('\\x82e9'::bytea, 'MULE_INTERNAL', 'LATIN1')`, '22P05', 'character with byte sequence 0x82 0xe9 in encoding "MULE_INTERNAL" has no equivalent in encoding "LATIN1"'],
      [`select convert('\\x98'::bytea, 'WIN1251', 'KOI8R')`, '22P05', 'character with byte sequence 0x98 in encoding "WIN1251" has no equivalent in encoding "KOI8R"'],
      [`select convert_from('\\x8130'::bytea, 'GB18030')`, '22021', 'invalid byte sequence for encoding "GB18030": 0x81 0x30'],
      [`select convert_from('\\x41ff'::bytea, 'GB18030')`, '22021', 'invalid byte sequence for encoding "GB18030": 0xff'],
      [`select convert_to('か\u309ax', 'SJIS')`, '22P05', 'character with byte sequence 0xe3 0x82 0x9a in encoding "UTF8" has no equivalent in encoding "SJIS"'],
      [`select convert_to('😀', 'BIG5')`, '22P05', 'character with byte sequence 0xf0 0x9f 0x98 0x80 in encoding "UTF8" has no equivalent in encoding "BIG5"'],
    ]
    // The messages name encodings as pg_encoding_to_char() does.
    const { rows: named } = await db.query<{ names: string[] }>(`select array_agg(pg_encoding_to_char(i) order by i) as names from generate_series(0, $1) i`, [
      ENCODING_NAMES.length,
    ])
    expect(named[0]!.names).toEqual([...ENCODING_NAMES, ''])
    for (const [sql, code, message] of cases) {
      const error = await rejection(db.query(sql))
      expect(error, sql).toBeInstanceOf(DatabaseError)
      expect({ code: (error as DatabaseError).code, message: (error as DatabaseError).message }, sql).toEqual({ code, message })
    }
    // Those that convert: a JIS X 0213 pair to one character, a code past the BMP computed for GB18030.
    const { rows } = await db.query<{ pair: string; emoji: string }>(
      `select encode(convert_to('か\u309ax', 'SHIFT_JIS_2004'), 'hex') as pair, encode(convert_to('😀', 'GB18030'), 'hex') as emoji`,
    )
    expect(rows).toEqual([{ pair: '82f578', emoji: '9439fc36' }])

    // Through a client encoding, both ways.
    await db.exec(`set client_encoding to 'LATIN1'`)
    const out = parseReply(await db.execProtocolRaw(rawQuery(utf8('select chr(26085)'))))
    await db.exec(`set client_encoding to 'WIN1252'`)
    const into = parseReply(await db.execProtocolRaw(rawQuery(concat([utf8(`select '`), Uint8Array.of(0x81), utf8(`'`)]))))
    await db.exec('reset client_encoding')
    expect([out.error?.C, out.error?.M]).toEqual(['22P05', 'character with byte sequence 0xe6 0x97 0xa5 in encoding "UTF8" has no equivalent in encoding "LATIN1"'])
    expect([into.error?.C, into.error?.M]).toEqual(['22P05', 'character with byte sequence 0x81 in encoding "WIN1252" has no equivalent in encoding "UTF8"'])
    await expectAnswering(db)
  })

  it('COPY TO and COPY FROM convert with ENCODING, errors with the line', async () => {
    await db.exec(`create table latin (t text); insert into latin values ('é'), ('ü€')`)
    const { blob } = await db.query(`copy latin to '/dev/blob' (encoding 'LATIN9')`)
    expect(hex(new Uint8Array(await blob!.arrayBuffer()))).toBe(hex(concat([Uint8Array.of(0xe9), utf8('\n'), Uint8Array.of(0xfc, 0xa4), utf8('\n')])))

    // More than COPY's 64 kB input buffer, so characters are split between
    // two reads and the conversion stops short of the partial one.
    for (const encoding of ['SJIS', 'EUC_JIS_2004', 'GB18030', 'BIG5', 'UHC', 'LATIN1']) {
      const sample = await sampleOf(encoding)
      const { rows } = await db.query<{ data: Uint8Array; sum: string }>(
        `select convert_to(string_agg(n || E'\\t' || $1, E'\\n' order by n) || E'\\n', $2) as data, md5(string_agg($1, ',' order by n)) as sum
         from generate_series(1, 5000) n`,
        [sample, encoding],
      )
      const { data, sum } = rows[0]!
      expect(data.length, encoding).toBeGreaterThan(65536)
      await db.exec(`drop table if exists copied; create table copied (n int, t text)`)
      await db.query(`copy copied from '/dev/blob' (encoding '${encoding}')`, [], { blob: new Blob([new Uint8Array(data)]) })
      const copied = await db.query<{ sum: string }>(`select md5(string_agg(t, ',' order by n)) as sum from copied`)
      expect(copied.rows[0]!.sum, encoding).toBe(sum)
      const out = await db.query(`copy copied to '/dev/blob' (encoding '${encoding}')`)
      expect(hex(new Uint8Array(await out.blob!.arrayBuffer())) === hex(data), encoding).toBe(true)
    }

    // An invalid byte on line 3: the ERROR says so, as Postgres' does.
    const bad = concat([utf8('1\tok\n2\tok\n3\t'), Uint8Array.of(0x82), utf8('\n')])
    const error = (await rejection(db.query(`copy copied from '/dev/blob' (encoding 'SJIS')`, [], { blob: new Blob([new Uint8Array(bad)]) }))) as DatabaseError
    expect({ code: error.code, message: error.message, where: error.where }).toEqual({
      code: '22021',
      message: 'invalid byte sequence for encoding "SJIS": 0x82 0x0a',
      where: 'COPY copied, line 3',
    })
    await expectAnswering(db)
  })
})

describe('side modules that need what the engine lacks', () => {
  it('pgoutput gets an ERROR naming the missing function, and the database goes on', async () => {
    // Logical decoding runs pgoutput.so, most of whose imports the build left out.
    const db = await PGlite.create({ postgresqlConf: { wal_level: 'logical' } })
    try {
      await db.exec(`
        create table kept (n int, t text);
        insert into kept select n, 'row ' || n from generate_series(1, ${KEPT_ROWS}) n;
        create publication pub for table kept;
      `)
      // A slot is made in a transaction of its own.
      await db.query(`select pg_create_logical_replication_slot('slot', 'pgoutput')`)
      await db.query(`insert into kept values (0, 'decoded')`)
      const error = (await rejection(
        db.query(`select count(*) from pg_logical_slot_get_binary_changes('slot', null, null, 'proto_version', '1', 'publication_names', 'pub')`),
      )) as DatabaseError
      expect(error).toBeInstanceOf(DatabaseError)
      expect(error.code).toBe('0A000')
      expect(error.message).toMatch(/^function "\w+" needed by library "pgoutput\.so" is not in this build of the engine$/)
      expect((await db.query<{ n: number }>('select count(*)::int as n from kept')).rows).toEqual([{ n: KEPT_ROWS + 1 }])
      await db.query(`select pg_drop_replication_slot('slot')`)
    } finally {
      await db.close()
    }
  })

  it('a library that takes addresses nothing defines is refused, and later loads still link', async () => {
    const db = await PGlite.create()
    try {
      await db.exec(`create table kept (n int); insert into kept select generate_series(1, ${KEPT_ROWS})`)
      const error = (await rejection(db.query(`load 'libpqwalreceiver'`))) as DatabaseError
      expect(error.code).toBe('58P01')
      expect(error.message).toMatch(/^could not load library "\/pglite\/lib\/postgresql\/libpqwalreceiver\.so": it needs .*WalReceiverFunctions.*, which this build of the engine does not have$/)
      // Before, the refused library's unresolved symbols failed every later
      // load: PL/pgSQL and the conversions alike.
      await db.exec(`do $$ begin perform 1; end $$`)
      expect((await db.query<{ e: string }>(`select convert_from(convert_to('é', 'LATIN1'), 'LATIN1') as e`)).rows).toEqual([{ e: 'é' }])
      expect((await db.query<{ n: number }>('select count(*)::int as n from kept')).rows).toEqual([{ n: KEPT_ROWS }])
    } finally {
      await db.close()
    }
  })
})
