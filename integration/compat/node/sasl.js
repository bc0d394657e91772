#!/usr/bin/env node
// sasl.js drives kafkajs over SASL_SSL for the client matrix's SASL_SSL
// column and integration/security's OAUTHBEARER test: it produces COUNT
// records to TOPIC, then reads
// them back as a member of GROUP and commits. Settings come from the
// environment: BOOTSTRAP, CA_FILE, TOPIC, GROUP, COUNT, and MECHANISM
// (scram-sha-512 with USERNAME and PASSWORD, or oauthbearer with TOKEN).
// kafkajs comes from node_modules here (NODE_PATH for callers elsewhere). The exit
// code is 0 only if every record was produced and consumed.
'use strict'

const fs = require('fs')
const { Kafka, logLevel } = require('kafkajs')

const env = process.env
const count = Number(env.COUNT)
const sasl = env.MECHANISM === 'oauthbearer'
  ? { mechanism: 'oauthbearer', oauthBearerProvider: async () => ({ value: env.TOKEN }) }
  : { mechanism: env.MECHANISM, username: env.USERNAME, password: env.PASSWORD }

const kafka = new Kafka({
  clientId: 'kproxy-security-test',
  brokers: env.BOOTSTRAP.split(','),
  ssl: { ca: [fs.readFileSync(env.CA_FILE, 'utf8')] },
  sasl,
  logLevel: logLevel.WARN,
  retry: { retries: 3 },
})

async function main () {
  const producer = kafka.producer({ allowAutoTopicCreation: true })
  await producer.connect()
  for (let i = 0; i < count; i++) {
    await producer.send({ topic: env.TOPIC, acks: -1, messages: [{ value: String(i) }] })
  }
  await producer.disconnect()

  const consumer = kafka.consumer({ groupId: env.GROUP })
  await consumer.connect()
  await consumer.subscribe({ topic: env.TOPIC, fromBeginning: true })
  let got = 0
  await new Promise((resolve, reject) => {
    const timer = setTimeout(() => reject(new Error(`consumed ${got} of ${count}`)), 60000)
    consumer.run({
      eachMessage: async () => {
        if (++got >= count) { clearTimeout(timer); resolve() }
      },
    }).catch(reject)
  })
  await consumer.disconnect()
  console.log(JSON.stringify({ produced: count, consumed: got }))
}

main().catch(err => { console.error(err.stack || String(err)); process.exit(1) })
