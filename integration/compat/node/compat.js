#!/usr/bin/env node
// compat.js drives kafkajs for kproxy's client compatibility tests
// (integration/compat). The Go tests run it as a subprocess:
//
//   node compat.js metadata --bootstrap H:P[,H:P] --topic T
//   node compat.js produce  --bootstrap ... --topic T [--codec C] [--idempotent] [--delivery-ms D]
//       reads "key<TAB>value" lines on stdin, sends them in order; with
//       --delivery-ms each send is answered (ack or error) within about D ms
//   node compat.js consume  --bootstrap ... --topic T --group G [--plain] [--rack ZONE]
//       runs until SIGTERM, then leaves the group (--plain: exits at once)
//
// Every line on stdout is one JSON object; diagnostics go to stderr.
// The exit code is 0 only if the command fully succeeded.
'use strict'

const readline = require('readline')
const { Kafka, CompressionTypes, CompressionCodecs, logLevel } = require('kafkajs')
const SnappyCodec = require('kafkajs-snappy')
const lz4 = require('lz4js')
const { ZstdCodec } = require('zstd-codec')

// kafkajs ships gzip only; the other codecs are plug-ins the application
// registers. LZ4 and ZSTD use pure-JS/wasm libraries so that `npm ci` needs
// no native build.
CompressionCodecs[CompressionTypes.Snappy] = SnappyCodec
CompressionCodecs[CompressionTypes.LZ4] = () => ({
  async compress(encoder) { return Buffer.from(lz4.compress(encoder.buffer)) },
  async decompress(buffer) { return Buffer.from(lz4.decompress(buffer)) },
})
let zstdSimple = null
const zstdReady = new Promise(resolve => ZstdCodec.run(z => { zstdSimple = new z.Simple(); resolve() }))
CompressionCodecs[CompressionTypes.ZSTD] = () => ({
  async compress(encoder) { await zstdReady; return Buffer.from(zstdSimple.compress(encoder.buffer)) },
  async decompress(buffer) { await zstdReady; return Buffer.from(zstdSimple.decompress(buffer)) },
})

const codecs = {
  none: CompressionTypes.None,
  gzip: CompressionTypes.GZIP,
  snappy: CompressionTypes.Snappy,
  lz4: CompressionTypes.LZ4,
  zstd: CompressionTypes.ZSTD,
}

function parseArgs(argv) {
  const args = { _: [] }
  for (let i = 0; i < argv.length; i++) {
    const a = argv[i]
    if (!a.startsWith('--')) { args._.push(a); continue }
    const key = a.slice(2)
    if (i + 1 < argv.length && !argv[i + 1].startsWith('--')) args[key] = argv[++i]
    else args[key] = true
  }
  return args
}

const out = obj => process.stdout.write(JSON.stringify(obj) + '\n')

// deliveryBound maps --delivery-ms to kafkajs's settings, since kafkajs has
// no delivery timeout of its own: a send makes retries+1 tries, each
// bounded by requestTimeout (client side) and timeout (the broker's ack
// wait), with at most maxRetryTime between them, so they share the bound.
function deliveryBound(args) {
  const d = Number(args['delivery-ms'])
  if (!d) return null
  return { requestTimeout: Math.floor(d / 4), retry: { retries: 2, initialRetryTime: 100, maxRetryTime: Math.floor(d / 8) } }
}

function client(args) {
  const bound = deliveryBound(args)
  return new Kafka({
    ...(bound ? { requestTimeout: bound.requestTimeout } : {}),
    clientId: 'kproxy-compat',
    brokers: String(args.bootstrap).split(','),
    logLevel: logLevel.WARN,
    logCreator: () => ({ level, log }) => {
      process.stderr.write(`kafkajs ${level}: ${log.message} ${JSON.stringify(log)}\n`)
    },
  })
}

async function metadata(args) {
  const admin = client(args).admin()
  await admin.connect()
  try {
    const cluster = await admin.describeCluster()
    const md = await admin.fetchTopicMetadata({ topics: [args.topic] })
    out({
      brokers: cluster.brokers.map(b => ({ id: b.nodeId, addr: `${b.host}:${b.port}` })),
      partitions: md.topics[0].partitions.map(p => ({ partition: p.partitionId, leader: p.leader })),
    })
  } finally {
    await admin.disconnect()
  }
}

// produce sends stdin's records in batches of whatever has arrived (at most
// 100), one send at a time so order holds, and reports each acknowledged
// batch as {"acked": n}: sends are serialized, so the acknowledged records
// are always a prefix of the input.
async function produce(args) {
  const codec = codecs[args.codec || 'none']
  if (codec === undefined) throw new Error(`unknown codec ${args.codec}`)
  const idempotent = Boolean(args.idempotent)
  const bound = deliveryBound(args)
  const producer = client(args).producer({
    ...(idempotent ? { idempotent: true, maxInFlightRequests: 1 } : {}),
    ...(bound ? { retry: bound.retry } : {}),
  })
  await producer.connect()
  let pending = []
  let inputDone = false
  let wake = null
  const rl = readline.createInterface({ input: process.stdin, crlfDelay: Infinity })
  rl.on('line', line => {
    const tab = line.indexOf('\t')
    if (tab < 0) return
    pending.push({ key: line.slice(0, tab), value: line.slice(tab + 1) })
    if (wake) { wake(); wake = null }
  })
  rl.on('close', () => { inputDone = true; if (wake) { wake(); wake = null } })
  let acked = 0
  try {
    for (;;) {
      if (pending.length === 0) {
        if (inputDone) break
        await new Promise(resolve => { wake = resolve })
        continue
      }
      const messages = pending.splice(0, 100)
      await producer.send({ topic: args.topic, acks: -1, compression: codec, messages, ...(bound ? { timeout: bound.requestTimeout } : {}) })
      acked += messages.length
      out({ acked: messages.length })
    }
  } finally {
    await producer.disconnect()
  }
  out({ done: true, total: acked })
}

// consume joins the group (kafkajs has no consumer without a group) and
// prints every record. Offsets are committed after each record
// (autoCommitThreshold 1) so that a SIGTERM never loses a commit: kafkajs
// does not commit on disconnect by itself.
async function consume(args) {
  const consumer = client(args).consumer({ groupId: args.group, ...(args.rack ? { rackId: String(args.rack) } : {}) })
  let stopping = false
  const stop = async () => {
    if (stopping) return
    stopping = true
    // A plain read (a throwaway group) has nothing to commit: leave at
    // once instead of waiting out the fetch in flight.
    if (args.plain) process.exit(0)
    try {
      await consumer.disconnect()
      out({ stopped: true })
      process.exit(0)
    } catch (e) {
      process.stderr.write(`disconnect: ${e.stack || e}\n`)
      process.exit(3)
    }
  }
  process.on('SIGTERM', stop)
  process.on('SIGINT', stop)
  consumer.on(consumer.events.CRASH, e => {
    out({ crash: String(e.payload.error && e.payload.error.message), restart: Boolean(e.payload.restart) })
  })
  consumer.on(consumer.events.GROUP_JOIN, e => out({ assigned: e.payload.memberAssignment }))
  await consumer.connect()
  await consumer.subscribe({ topics: [args.topic], fromBeginning: true })
  await consumer.run({
    autoCommitThreshold: 1,
    eachMessage: async ({ partition, message }) => {
      out({
        p: partition,
        o: Number(message.offset),
        k: message.key === null ? null : message.key.toString(),
        v: message.value === null ? null : message.value.toString(),
      })
    },
  })
}

async function main() {
  const args = parseArgs(process.argv.slice(2))
  const cmd = args._[0]
  if (!args.bootstrap || !args.topic) throw new Error('--bootstrap and --topic are required')
  switch (cmd) {
    case 'metadata': return metadata(args)
    case 'produce': return produce(args)
    case 'consume':
      if (!args.group) throw new Error('--group is required')
      return consume(args)
    default: throw new Error(`unknown command ${cmd}`)
  }
}

main().catch(e => {
  out({ error: String(e && e.message ? e.message : e) })
  process.stderr.write(`${e && e.stack ? e.stack : e}\n`)
  process.exit(2)
})
