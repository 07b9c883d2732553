// The peer gateways of the benchmark, in front of one statefed node, on 127.0.0.1.
// Usage: node peers.mjs <npm prefix> compose <subgraph name> <subgraph url> <sdl file> <out file>
//        node peers.mjs <npm prefix> hive <supergraph file> <port>
//        node peers.mjs <npm prefix> apollo <supergraph file> <port>
// compose writes the supergraph of that one subgraph with @apollo/composition (exit 1 with
// the errors, or with the hints: the node's SDL must compose cleanly); hive and apollo serve
// POST /graphql with their defaults and print "listening <port>" once they accept requests.
import { readFileSync, writeFileSync } from 'node:fs';
import { createServer } from 'node:http';
import { createRequire } from 'node:module';
import { join } from 'node:path';

const [prefix, command, ...args] = process.argv.slice(2);
if (!prefix || !command) {
  console.error('usage: node peers.mjs <npm prefix> compose|hive|apollo ...');
  process.exit(2);
}
// every package from one CommonJS graph, so graphql is loaded once
const require = createRequire(join(prefix, 'package.json'));
const HOST = '127.0.0.1';
// the benchmark stops a peer with SIGTERM when its loads are over: nothing to drain, so exit
// at once rather than wait out a graceful shutdown's grace period
process.on('SIGTERM', () => process.exit(0));

function compose([name, url, sdlFile, outFile]) {
  const { parse } = require('graphql');
  const { composeServices } = require('@apollo/composition');
  const typeDefs = parse(readFileSync(sdlFile, 'utf8'));
  const result = composeServices([{ name, url, typeDefs }]);
  if (result.errors) {
    console.error(`composition failed: ${result.errors.map((e) => e.message).join('; ')}`);
    process.exit(1);
  }
  if (result.hints.length) {
    console.error(`composition hints: ${result.hints.map((h) => h.toString()).join('; ')}`);
    process.exit(1);
  }
  writeFileSync(outFile, result.supergraphSdl);
}

async function hive([supergraphFile, port]) {
  // the Hive Gateway as a library: its runtime is a fetch-API handler node:http can serve
  const { createGatewayRuntime } = await import(
    require.resolve('@graphql-hive/gateway')
  );
  const gateway = createGatewayRuntime({
    supergraph: readFileSync(supergraphFile, 'utf8'),
    logging: 'warn',
  });
  const server = createServer(gateway);
  await new Promise((resolve) => server.listen(Number(port), HOST, resolve));
  console.log(`listening ${port}`);
}

async function apollo([supergraphFile, port]) {
  const { ApolloGateway } = require('@apollo/gateway');
  const { ApolloServer } = require('@apollo/server');
  const { startStandaloneServer } = require('@apollo/server/standalone');
  const gateway = new ApolloGateway({ supergraphSdl: readFileSync(supergraphFile, 'utf8') });
  const server = new ApolloServer({ gateway, stopOnTerminationSignals: false });
  await startStandaloneServer(server, { listen: { port: Number(port), host: HOST } });
  console.log(`listening ${port}`);
}

const commands = { compose, hive, apollo };
if (!(command in commands)) {
  console.error(`unknown command ${command}: compose, hive or apollo`);
  process.exit(2);
}
await commands[command](args);
