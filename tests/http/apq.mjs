// Runs queries through Apollo Client's real PersistedQueryLink over its HttpLink and prints
// one JSON document: {steps: [{data, error}], requests: [{method, query, hash, status, body}]}
// (what each HTTP request carried and got back, in order).
// The plan comes on stdin: {url, useGET, queries: [string]}; each query runs once, uncached.
// Usage: node apq.mjs <npm prefix holding @apollo/client, graphql and rxjs>
import { createHash } from 'node:crypto';
import { createRequire } from 'node:module';
import { join } from 'node:path';

const prefix = process.argv[2];
if (!prefix) {
  console.error('usage: node apq.mjs <npm prefix> < plan.json');
  process.exit(2);
}
const require = createRequire(join(prefix, 'package.json'));
const { ApolloClient, ApolloLink, HttpLink, InMemoryCache, gql } = require('@apollo/client');
const { PersistedQueryLink } = require('@apollo/client/link/persisted-queries');

let input = '';
for await (const chunk of process.stdin) input += chunk;
const plan = JSON.parse(input);
const requests = [];

// what the links put on the wire, seen at the fetch they call
async function recordingFetch(uri, options) {
  const url = new URL(uri);
  let sent;
  if (options.method === 'GET') {
    sent = {
      query: url.searchParams.get('query'),
      extensions: JSON.parse(url.searchParams.get('extensions') ?? 'null'),
    };
  } else {
    sent = JSON.parse(options.body);
  }
  const response = await fetch(uri, options);
  const text = await response.clone().text();
  requests.push({
    method: options.method,
    query: sent.query ?? null,
    hash: sent.extensions?.persistedQuery?.sha256Hash ?? null,
    status: response.status,
    body: JSON.parse(text),
  });
  return response;
}

const sha256 = (text) => createHash('sha256').update(text).digest('hex');
const link = ApolloLink.from([
  new PersistedQueryLink({ sha256, useGETForHashedQueries: plan.useGET }),
  new HttpLink({ uri: plan.url, fetch: recordingFetch }),
]);
const client = new ApolloClient({ link, cache: new InMemoryCache() });

const steps = [];
for (const query of plan.queries) {
  try {
    const result = await client.query({ query: gql(query), fetchPolicy: 'no-cache' });
    steps.push({ data: result.data ?? null, error: result.error ? String(result.error.message) : null });
  } catch (err) {
    steps.push({ data: null, error: String(err?.message ?? err) });
  }
}
client.stop();
console.log(JSON.stringify({ steps, requests }));
process.exit(0);
