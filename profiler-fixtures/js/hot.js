// A JavaScript program whose time goes to one hot function, for Node's
// JIT map (`node --perf-basic-prof` writes /tmp/perf-PID.map, naming the
// code V8 compiled; without it a profiler sees anonymous memory).
//
// hotSpin runs integer arithmetic until its deadline, so V8 compiles it
// (on-stack replacement) and nearly all of the main thread's CPU time is
// in its compiled code.
//
// Protocol (as the Rust fixtures'): prints `ready pid=P main=P`, waits for
// a line on stdin, spins for argv[2] seconds, prints `hot_ms=N` (the wall
// time hotSpin ran), then lingers until stdin closes.
'use strict';

const readline = require('readline');

function hotSpin(deadlineMs) {
  let x = 1;
  for (;;) {
    for (let i = 0; i < 200000; i++) {
      x = (Math.imul(x, 1103515245) + 12345) | 0;
    }
    if (Date.now() >= deadlineMs) {
      return x;
    }
  }
}

const seconds = Number(process.argv[2] || '5');
const lines = readline.createInterface({ input: process.stdin });
let started = false;
lines.on('line', () => {
  if (started) {
    return;
  }
  started = true;
  const t0 = Date.now();
  const x = hotSpin(t0 + seconds * 1000);
  process.stdout.write(`hot_ms=${Date.now() - t0} checksum=${x >>> 0}\n`);
});
lines.on('close', () => process.exit(0));
process.stdout.write(`ready pid=${process.pid} main=${process.pid}\n`);
